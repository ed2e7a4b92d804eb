"""Stage 2a with criteria as the unit (cluster.unit = "criteria"): each criterion clustered by its own text, moved
by its Stage 1 labels.

Two samples of a model word a criterion's labels differently ("dataset_loading_call_identification" in one,
"dataset_loading_code_identification" in the other), and clusters of label strings follow the wording. A
criterion's text is the same in every run, so it sets the start: Ward over the text vectors, cut into k. Then each
criterion goes to the cluster nearest to its text plus `label_weight` times its labels (a few rounds of spherical
k-means from that start), so the labels move the criteria they clearly place elsewhere without re-cutting the rest.
What a task's criteria share is its topic, not a kind of check, so each text vector loses the mean of its task's
other criteria first. One such cut moves when a tenth of the tasks go (Ward's greedy merges cascade), so up to
CONSENSUS_MAX criteria the clusters are those the criteria share across cuts that each leave some tasks out. A label
belongs to the cluster holding most of its criteria; a cluster is never left without a label, because Stage 2b
names a cluster from its labels.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import polars as pl
from sklearn.cluster import AgglomerativeClustering

from taxonomy.config import ClusterConfig
from taxonomy.embed import Embedder, l2_normalize

# Share of the mean of a task's other criteria removed from each text vector (the task's topic).
TASK_MEAN_SHARE = 1.0
# Weight of a criterion's later labels against its first (most confident) one.
LATER_LABEL_WEIGHT = 0.5
# Rounds of moving criteria to their nearest cluster; on DevAI it settles within 5.
MAX_ROUNDS = 20


# Consensus: each cut leaves out one of FOLDS groups of tasks (by a hash of the task id, so a task keeps its fold
# whichever others the corpus holds) and is made at each of K_SHARES x k; criteria are then clustered by how often
# they fell together. One cut's greedy merges cascade when a tenth of the tasks go; the share of cuts agreeing
# moves little. Above CONSENSUS_MAX criteria the n x n counts cost too much, and one cut runs.
FOLDS = 10
K_SHARES = (0.75, 1.0, 1.25)
CONSENSUS_MAX = 2_000


@dataclass
class CriterionClusters:
    label_cluster: np.ndarray  # raw cluster of each label, aligned with the labels given
    criterion_cluster: np.ndarray  # raw cluster of each criterion, aligned with the rows given
    label_vectors: np.ndarray  # row i: the mean vector of the criteria carrying label i
    method: str


def label_phrase(label: str) -> str:
    """A label as words: `_` glues them, and the suffix every label shares says nothing."""
    words = label.replace("_", " ").split()
    return " ".join(words[:-1] if len(words) > 1 and words[-1] == "capability" else words)


def cluster_criteria(
    rows: list[tuple[str, list[str]]],
    labels: list[str],
    criteria: pl.DataFrame,
    embedder: Embedder,
    cfg: ClusterConfig,
    k: int,
    assign,
) -> CriterionClusters:
    """`rows`: (criterion id, its labels most confident first), every row with one label at least; `assign(x, k,
    cfg)` -> (raw ids, method) is the label path's clustering, reused for the text's start."""
    known = criteria.select(pl.col("criterion_id").cast(pl.Utf8), pl.col("task_id").cast(pl.Utf8), "text")
    text_of = {c: (t or "", task) for c, task, t in known.iter_rows()}
    texts = [text_of.get(cid, ("", cid))[0] for cid, _ in rows]
    tasks = [text_of.get(cid, ("", cid))[1] for cid, _ in rows]
    text_x, label_x = _embed(texts, labels, embedder)
    text_x = _without_task_mean(text_x, tasks)
    weights = _label_weights(rows, labels)  # (criteria, labels)
    x = l2_normalize(text_x + cfg.label_weight * l2_normalize(weights @ label_x))
    k = max(1, min(k, len(rows)))
    if len(rows) <= CONSENSUS_MAX and k > 1:
        part, cuts = _consensus(text_x, x, tasks, k, cfg, assign)
        how = (
            f"consensus of {cuts} cuts (Ward on text, then to the nearest by text + {cfg.label_weight:g} x labels; "
            f"each without a tenth of the tasks)"
        )
    else:
        start, ward = assign(text_x, k, cfg)
        part, rounds = _refine(x, start)
        how = f"{ward} on text, then {rounds} rounds to the nearest by text + {cfg.label_weight:g} x labels"
    label_cluster, part = _labels_to_clusters(weights, part)
    # A label's vector: the mean of its criteria within its cluster (all of them where none is), so a cluster's
    # centroid is near the mean of its own criteria whichever labels they were given.
    inside = weights * (part[:, None] == label_cluster[None, :])
    inside = np.where(inside.sum(axis=0) > 0, inside, weights)
    label_vectors = l2_normalize(inside.T @ x)
    return CriterionClusters(label_cluster, part, label_vectors, f"criteria: {how}")


# ---- internals -------------------------------------------------------------------
def _embed(texts: list[str], labels: list[str], embedder: Embedder) -> tuple[np.ndarray, np.ndarray]:
    """Text and label-phrase vectors in one space. An embedder fitted on its input (the local one) is fitted on the
    criteria: they are the same in every run, so the space does not move with the labels' wording."""
    phrases = list(dict.fromkeys(label_phrase(lab) for lab in labels))
    if hasattr(embedder, "fit") and not getattr(embedder, "fitted", True):
        try:
            embedder.fit(texts)
        except ValueError:  # criteria with no word to fit on: the labels give the space
            embedder.fit(texts + phrases)
    both = np.asarray(embedder.embed(texts + phrases), dtype=np.float32)  # one request for a paid embedder
    vectors = dict(zip(phrases, both[len(texts) :]))
    return both[: len(texts)], np.stack([vectors[label_phrase(lab)] for lab in labels])


def _without_task_mean(x: np.ndarray, tasks: list[str]) -> np.ndarray:
    """Each row less TASK_MEAN_SHARE of the mean of its task's other rows (a task of one row keeps it whole)."""
    _, task_ix, sizes = np.unique(np.array(tasks, dtype=object), return_inverse=True, return_counts=True)
    sums = np.zeros((len(sizes), x.shape[1]), dtype=np.float64)
    np.add.at(sums, task_ix, x)
    others = sizes[task_ix] - 1
    mean_of_others = (sums[task_ix] - x) / np.maximum(others, 1)[:, None]
    return l2_normalize(x - TASK_MEAN_SHARE * mean_of_others * (others > 0)[:, None])


def _label_weights(rows: list[tuple[str, list[str]]], labels: list[str]) -> np.ndarray:
    index = {lab: j for j, lab in enumerate(labels)}
    w = np.zeros((len(rows), len(labels)), dtype=np.float32)
    for i, (_, labs) in enumerate(rows):
        for rank, lab in enumerate(labs):
            w[i, index[lab]] = max(w[i, index[lab]], 1.0 if rank == 0 else LATER_LABEL_WEIGHT)
    return w


def _consensus(
    text_x: np.ndarray, x: np.ndarray, tasks: list[str], k: int, cfg: ClusterConfig, assign
) -> tuple[np.ndarray, int]:
    """Average-linkage cut into k of how often two criteria share a cluster over the cuts (module constants); each
    cut is Ward on the text then nearest-cluster moves, the left-out criteria placed at their nearest cluster."""
    n = len(x)
    fold = np.array([zlib.crc32(t.encode("utf-8")) % FOLDS for t in tasks])
    # Folds holding some criteria, each left out in turn; one task alone (a single fold) is cut whole.
    folds = np.unique(fold) if len(np.unique(fold)) > 1 else np.array([-1])
    together = np.zeros((n, n), dtype=np.float32)
    cuts = 0
    for f in folds:
        kept = np.flatnonzero(fold != f)
        for share in K_SHARES:
            part, _ = _refine(x[kept], assign(text_x[kept], max(2, min(round(share * k), len(kept))), cfg)[0])
            sums = np.zeros((int(part.max()) + 1, x.shape[1]), dtype=np.float64)
            np.add.at(sums, part, x[kept])
            whole = np.argmax(x @ l2_normalize(sums).T, axis=1)
            whole[kept] = part
            together += whole[:, None] == whole[None, :]
            cuts += 1
    apart = 1.0 - together / cuts
    model = AgglomerativeClustering(n_clusters=k, metric="precomputed", linkage="average")
    return model.fit_predict(apart).astype(np.int64), cuts


def _refine(x: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, int]:
    """Spherical k-means from `start`: each row to the cluster whose mean direction is nearest, until none moves."""
    part = np.unique(start, return_inverse=True)[1].astype(np.int64)
    for rounds in range(1, MAX_ROUNDS + 1):
        sums = np.zeros((int(part.max()) + 1, x.shape[1]), dtype=np.float64)
        np.add.at(sums, part, x)
        sims = x @ l2_normalize(sums).T
        # A row as near to its own cluster as to any other stays: no move on a tie.
        own = np.take_along_axis(sims, part[:, None], axis=1)[:, 0]
        moved = np.where(own >= sims.max(axis=1), part, np.argmax(sims, axis=1))
        if np.array_equal(moved, part):
            return part, rounds - 1
        part = np.unique(moved, return_inverse=True)[1].astype(np.int64)
    return part, MAX_ROUNDS


def _labels_to_clusters(weights: np.ndarray, part: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each label to the cluster holding most of its weight (ties: the lower id). A cluster left with no label takes
    the label most of whose weight it holds, from a cluster that keeps another; failing that, its criteria go to
    the cluster holding most of their labels, as the paper's dominant-cluster rule would place them."""
    n_clusters = int(part.max()) + 1
    held = np.zeros((weights.shape[1], n_clusters), dtype=np.float64)  # label x cluster
    np.add.at(held.T, part, weights)
    label_cluster = np.argmax(held, axis=1)
    for c in range(n_clusters):
        if (label_cluster == c).any():
            continue
        owners = np.bincount(label_cluster, minlength=n_clusters)
        candidates = [
            j for j in np.argsort(-held[:, c], kind="stable") if held[j, c] > 0 and owners[label_cluster[j]] > 1
        ]
        if candidates:
            label_cluster[candidates[0]] = c
    empty = np.setdiff1d(np.arange(n_clusters), label_cluster)
    if len(empty):
        for i in np.flatnonzero(np.isin(part, empty)):
            per_cluster = np.zeros(n_clusters)
            np.add.at(per_cluster, label_cluster, weights[i])
            part[i] = int(np.argmax(per_cluster))
    return label_cluster.astype(np.int64), part
