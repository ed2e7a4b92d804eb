"""Stage 2a embedder of the offline backend: a label is embedded as the criteria that carry it.

An offline label is a few words of its criterion; the string alone says little about which
labels belong together. Its vector is therefore the mean vector (features.py) of the
criteria carrying it, so labels whose criteria ask for the same kind of check sit together,
whatever their words, followed by the share of those criteria in each broad kind (the
cut of the Ward tree Stage 1 cut its fine kinds from): merging the micro-clusters then recovers the
broad kinds instead of re-deriving them from averages. Labels no criterion carries (none in
an offline run) embed as zero rows.
"""
from __future__ import annotations

import numpy as np
import polars as pl

from taxonomy.embed import l2_normalize
from taxonomy.offline.discover import SEED, broad_kinds, label_vectors
from taxonomy.offline.features import CriterionSpace

__all__ = ["CriterionLabelEmbedder"]

BROAD_WEIGHT = 1.0  # weight of the broad-kind shares against the unit mean vector


class CriterionLabelEmbedder:
    name = "offline-criterion-centroids"

    def __init__(self, criteria: pl.DataFrame, stage1: pl.DataFrame, seed: int = 0):
        ok = stage1.filter(pl.col("status") == "ok") if "status" in stage1.columns else stage1
        joined = criteria.select(pl.col("criterion_id").cast(pl.Utf8), "task_id", "text").join(
            ok.select("criterion_id", "labels"), on="criterion_id", how="left")
        self._texts = [t or "" for t in joined["text"].to_list()]
        self._tasks = joined["task_id"].cast(pl.Utf8).to_list()
        self._labels = [list(x) if x is not None else [] for x in joined["labels"].to_list()]
        self._seed = seed

    def embed(self, texts: list[str]) -> np.ndarray:
        space = CriterionSpace.fit(self._texts, self._tasks, seed=SEED)
        broad = broad_kinds(space, seed=SEED)
        one_hot = np.eye(int(broad.max()) + 1 if len(broad) else 1, dtype=np.float32)[broad]
        means = label_vectors(self._labels, space.vectors, list(texts))
        shares = label_vectors(self._labels, one_hot, list(texts)) * BROAD_WEIGHT
        return l2_normalize(np.hstack([means, shares]))
