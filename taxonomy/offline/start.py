"""Where the key-less merge starts: the micro-clusters grouped into about (min_caps + max_caps) / 2 capabilities,
which the solver (merge/solver.py) then repairs to the bounds.

Up to CONSENSUS_MAX criteria the start is the grouping the criteria themselves agree on. Ward cuts the criterion
vectors (features.py) FOLDS times into k, each time without one fold of the tasks (a task's fold is a hash of its
id, so it keeps its fold whichever other tasks the corpus holds); a left-out criterion joins its nearest cut. The
criteria are then grouped by how often two fell together (average linkage), and each micro-cluster joins the group
holding most of its criteria. Ward over the 40-80 micro-cluster centroids merges near ties at the 8-10 cut, where
text has no clear gap: a micro-cluster that moves a little, or a tenth of the tasks gone, reorders the merges and
regroups micro-clusters that never changed. How often criteria fall together moves little, and no micro-cluster's
own boundary decides it.

Above CONSENSUS_MAX criteria the n x n counts cost too much, and Ward over the micro-cluster centroids starts it.
"""

from __future__ import annotations

import zlib

import numpy as np
import polars as pl
from sklearn.cluster import AgglomerativeClustering
from threadpoolctl import threadpool_limits

from taxonomy.config import PipelineConfig
from taxonomy.offline.features import CriterionSpace
from taxonomy.schemas import MergedCapability, MicroCapability

__all__ = ["merge_start", "criterion_owners"]

FOLDS = 10
CONSENSUS_MAX = 2_000
# Weight of a criterion's later labels against its first, as in the label vectors (discover.label_vectors).
LATER_LABEL_WEIGHT = 0.5


def merge_start(
    micro: list[MicroCapability],
    centroids: np.ndarray,
    criteria: pl.DataFrame,
    stage1: pl.DataFrame,
    cfg: PipelineConfig,
    owners: np.ndarray | None = None,
) -> list[MergedCapability] | None:
    """The start (None where there are no more micro-clusters than capabilities to form). `owners[i, m]`: how much
    criterion row i belongs to micro[m], the votes by which a micro-cluster joins a group; by default those its
    Stage 1 labels fall in (criterion_owners)."""
    k = (cfg.merge.min_caps + cfg.merge.max_caps) // 2
    weights = np.array([max(m.n_criteria, 0) for m in micro], dtype=float)
    if len(micro) <= k or weights.sum() <= 0:
        return None
    consensus = 2 <= criteria.height <= CONSENSUS_MAX
    if consensus and owners is None:
        owners = criterion_owners(criteria, stage1, micro)
    if consensus and owners.sum() > 0:
        texts = [t or "" for t in criteria["text"].to_list()]
        tasks = criteria["task_id"].cast(pl.Utf8).to_list()
        vectors = CriterionSpace.fit(texts, tasks, cfg.offline).vectors.astype(np.float64)
        together = agreed_groups(vectors, tasks, k)
        votes = owners.T @ np.eye(int(together.max()) + 1)[together]  # micro x group
        # A micro-cluster none of whose criteria voted (no criterion's label is its) joins its nearest micro-cluster's
        # group by centroid, as the solver would map it.
        voted = votes.sum(axis=1) > 0
        groups = np.argmax(votes, axis=1)
        if voted.any() and not voted.all():
            sims = centroids[~voted] @ centroids[voted].T
            groups[~voted] = groups[voted][np.argmax(sims, axis=1)]
    else:
        with threadpool_limits(1):  # tiny problem: BLAS/OpenMP threads only contend
            groups = AgglomerativeClustering(n_clusters=k, linkage="ward").fit_predict(centroids)
    return _cards(micro, groups)


def agreed_groups(vectors: np.ndarray, tasks: list[str], k: int) -> np.ndarray:
    """Each row's group: the average-linkage cut into k of how often two rows share a Ward cut into k, over cuts that
    each leave out one fold of the tasks (the left-out rows placed at their nearest cut cluster)."""
    n = len(vectors)
    k = max(1, min(k, n))
    fold = np.array([zlib.crc32(t.encode("utf-8")) % FOLDS for t in tasks])
    folds = np.unique(fold) if len(np.unique(fold)) > 1 else np.array([-1])  # one fold: cut whole, once
    together = np.zeros((n, n), dtype=np.float32)
    with threadpool_limits(1):
        for f in folds:
            kept = np.flatnonzero(fold != f)
            cut_k = max(1, min(k, len(kept)))
            part = (
                AgglomerativeClustering(n_clusters=cut_k, linkage="ward").fit_predict(vectors[kept])
                if cut_k > 1
                else np.zeros(len(kept), dtype=np.int64)
            )
            sums = np.zeros((cut_k, vectors.shape[1]))
            np.add.at(sums, part, vectors[kept])
            # A left-out row joins the cluster its vector agrees with in sum over the members: between two clusters,
            # the larger, which a cut with the row in it would more often have given it.
            whole = np.argmax(vectors @ sums.T, axis=1)
            whole[kept] = part
            together += whole[:, None] == whole[None, :]
        apart = 1.0 - together / len(folds)
        if k == 1:
            return np.zeros(n, dtype=np.int64)
        model = AgglomerativeClustering(n_clusters=k, metric="precomputed", linkage="average")
        return model.fit_predict(apart).astype(np.int64)


def criterion_owners(criteria: pl.DataFrame, stage1: pl.DataFrame, micro: list[MicroCapability]) -> np.ndarray:
    """(criteria x micro): the micro-clusters a criterion's Stage 1 labels fall in, its first label counting fully
    and later ones LATER_LABEL_WEIGHT; failed Stage 1 rows count for none."""
    ok = stage1.filter(pl.col("status") == "ok") if "status" in stage1.columns else stage1
    labels = dict(zip(ok["criterion_id"].cast(pl.Utf8).to_list(), ok["labels"].to_list()))
    owner = {label: m for m, mc in enumerate(micro) for label in mc.member_labels}
    out = np.zeros((criteria.height, len(micro)))
    for row, cid in enumerate(criteria["criterion_id"].cast(pl.Utf8).to_list()):
        for rank, label in enumerate(labels.get(cid) or []):
            if label in owner:
                out[row, owner[label]] = max(out[row, owner[label]], 1.0 if rank == 0 else LATER_LABEL_WEIGHT)
    return out


def _cards(micro: list[MicroCapability], groups: np.ndarray) -> list[MergedCapability]:
    """One start capability per group, carded as its largest micro-cluster (the solver and the namer redo both)."""
    start = []
    for g in sorted(set(groups.tolist())):
        members = [m for m, gi in zip(micro, groups) if gi == g]
        lead = max(members, key=lambda m: (m.n_criteria, m.name))
        start.append(
            MergedCapability(
                **lead.model_dump(
                    include={"name", "description", "diagnostic_signal", "example_pattern", "non_examples"}
                ),
                member_input_names=[m.name for m in members],
            )
        )
    return start
