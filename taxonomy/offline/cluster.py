"""Stage 2a embedder of the key-less backend: a label is embedded as the criteria that carry it.

A Stage 1 label is a few words of its criteria; the string alone says little about which labels
belong together. Its vector is the mean vector (features.py) of the criteria carrying it, followed
by the share of those criteria in each broad kind (the high cut of the Ward tree the labels were cut
from, discover.py), so merging the micro-clusters recovers the broad kinds instead of re-deriving them
from averages. Labels no criterion carries embed as zero rows.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from taxonomy.config import OfflineConfig
from taxonomy.embed import l2_normalize
from taxonomy.offline.features import CriterionSpace
from taxonomy.offline.discover import cut, label_vectors

__all__ = ["CriterionLabelEmbedder"]


class CriterionLabelEmbedder:
    name = "offline-criterion-centroids"

    def __init__(self, criteria: pl.DataFrame, stage1: pl.DataFrame, opts: OfflineConfig | None = None):
        ok = stage1.filter(pl.col("status") == "ok") if "status" in stage1.columns else stage1
        joined = criteria.select(pl.col("criterion_id").cast(pl.Utf8), "task_id", "text").join(
            ok.select("criterion_id", "labels"), on="criterion_id", how="left"
        )
        self._texts = [t or "" for t in joined["text"].to_list()]
        self._tasks = joined["task_id"].cast(pl.Utf8).to_list()
        self._labels = [list(x) if x is not None else [] for x in joined["labels"].to_list()]
        self._opts = opts or OfflineConfig()

    def embed(self, texts: list[str]) -> np.ndarray:
        space = CriterionSpace.fit(self._texts, self._tasks, self._opts)
        broad = cut(space, self._opts.broad_kinds, self._opts)
        one_hot = np.eye(int(broad.max()) + 1 if len(broad) else 1, dtype=np.float32)[broad]
        means = label_vectors(self._labels, space.vectors, list(texts))
        shares = label_vectors(self._labels, one_hot, list(texts))
        return l2_normalize(np.hstack([means, shares]))
