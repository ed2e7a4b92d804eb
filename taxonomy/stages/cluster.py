"""Stage 2a: Stage 1 labels -> k micro-clusters (of the criteria, or of the unique label strings as in the paper);
label -> cluster; criterion -> dominant cluster.

Exact agglomerative clustering costs O(n^2) time and memory (30,000 labels take ~4 min
and ~7 GB). Above `cfg.exact_max` unique labels we first
compress them to `cfg.centroids` mini-batch k-means centroids and cluster those. Above
KMEANS_FIT_MAX labels the centroids are fitted on a deterministic sample and every label is
then assigned to its nearest one: on 300,000 labels that gave the same within-cluster spread
of the 80 micro-clusters as fitting on all of them (0.641 against 0.643, seeds 0 and 1), and
1,000,000 labels embed and cluster in 75-94 s at load average 2 (benchmarks/clustering_scale.py).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import polars as pl
from sklearn.cluster import AgglomerativeClustering, MiniBatchKMeans, kmeans_plusplus

from taxonomy.config import ClusterConfig
from taxonomy.embed import Embedder, l2_normalize

# Above this many unique labels the k-means centroids are fitted on a deterministic sample of
# this size, then every label goes to its nearest centroid.
KMEANS_FIT_MAX = 100_000


@dataclass
class ClusterResult:
    clusters: pl.DataFrame  # label str, frequency i64, cluster_id i64; frequency desc, then label
    criterion_clusters: pl.DataFrame  # criterion_id str, dominant_cluster i64
    embeddings: np.ndarray  # row i embeds clusters["label"][i]
    method: str  # which path ran, e.g. "agglomerative(ward, euclidean)"
    k_note: str = ""  # which k ran and why, for the stage's line


def cluster_labels(
    stage1: pl.DataFrame,
    embedder: Embedder,
    cfg: ClusterConfig,
    scaled: bool = True,
    criteria: pl.DataFrame | None = None,
) -> ClusterResult:
    """Micro-clusters of the `ok` Stage 1 rows, `cfg.k_for(n_unique, scaled)` of them; every label in one.

    With `criteria` (the corpus frame: criterion_id, task_id, text) and cluster.unit = "criteria", the criteria
    are clustered by their text and labels (cluster_criteria.py): a criterion's dominant cluster is its own, and a
    label's the one holding most of its criteria. Otherwise the paper's design: the unique label strings are
    clustered, and a criterion's dominant cluster is the one holding the most of its labels; when several tie,
    the one holding its highest-ranked (first listed, most confident) label among them.

    Cluster ids are renumbered 0..k-1 by descending cluster size (unique labels), ties by the position of the
    cluster's most frequent label in `clusters`. Criteria without labels get no row.
    """
    ok = stage1.filter(pl.col("status") == "ok").select("criterion_id", "labels")
    per_criterion = [
        (str(cid), [lab.strip() for lab in (labels or []) if lab and lab.strip()]) for cid, labels in ok.iter_rows()
    ]
    freq = Counter(lab for _, labels in per_criterion for lab in labels)
    labels = sorted(freq, key=lambda lab: (-freq[lab], lab))

    if not labels:
        return ClusterResult(
            clusters=pl.DataFrame(schema={"label": pl.Utf8, "frequency": pl.Int64, "cluster_id": pl.Int64}),
            criterion_clusters=pl.DataFrame(schema={"criterion_id": pl.Utf8, "dominant_cluster": pl.Int64}),
            embeddings=np.zeros((0, 0), dtype=np.float32),
            method="empty",
        )

    k, k_note = cfg.k_for(len(labels), scaled)
    if criteria is not None and cfg.unit == "criteria":
        return _by_criteria(per_criterion, labels, freq, criteria, embedder, cfg, k, k_note)
    embeddings = embedder.embed(labels)
    raw, method = _assign(embeddings, k, cfg)
    ids = _renumber(raw)
    cluster_of = dict(zip(labels, ids.tolist()))

    clusters = pl.DataFrame(
        {"label": labels, "frequency": [freq[lab] for lab in labels], "cluster_id": ids},
        schema={"label": pl.Utf8, "frequency": pl.Int64, "cluster_id": pl.Int64},
    )
    dominant = [(cid, dominant_cluster([cluster_of[lab] for lab in labs])) for cid, labs in per_criterion if labs]
    criterion_clusters = pl.DataFrame(
        {"criterion_id": [c for c, _ in dominant], "dominant_cluster": [d for _, d in dominant]},
        schema={"criterion_id": pl.Utf8, "dominant_cluster": pl.Int64},
    )
    return ClusterResult(clusters, criterion_clusters, embeddings, method, k_note)


def _by_criteria(per_criterion, labels, freq, criteria, embedder, cfg, k, k_note) -> ClusterResult:
    from taxonomy.stages.cluster_criteria import cluster_criteria

    rows = [(cid, labs) for cid, labs in per_criterion if labs]
    found = cluster_criteria(rows, labels, criteria, embedder, cfg, k, _assign)
    new_id = _renumbering(found.label_cluster)
    clusters = pl.DataFrame(
        {"label": labels, "frequency": [freq[lab] for lab in labels], "cluster_id": new_id[found.label_cluster]},
        schema={"label": pl.Utf8, "frequency": pl.Int64, "cluster_id": pl.Int64},
    )
    criterion_clusters = pl.DataFrame(
        {"criterion_id": [c for c, _ in rows], "dominant_cluster": new_id[found.criterion_cluster]},
        schema={"criterion_id": pl.Utf8, "dominant_cluster": pl.Int64},
    )
    return ClusterResult(clusters, criterion_clusters, found.label_vectors, found.method, k_note)


def dominant_cluster(ranked_cluster_ids: list[int]) -> int:
    """Most frequent cluster among a criterion's labels (given most confident first); ties go
    to the tied cluster that appears first, i.e. holds the highest-ranked label."""
    counts = Counter(ranked_cluster_ids)
    top = max(counts.values())
    return next(c for c in ranked_cluster_ids if counts[c] == top)


def cluster_centroids(embeddings: np.ndarray, cluster_ids: np.ndarray) -> np.ndarray:
    """Row c = the L2-normalised mean embedding of cluster c (ids 0..max); empty clusters stay zero."""
    ids = np.asarray(cluster_ids, dtype=np.int64)
    n_clusters = int(ids.max()) + 1 if len(ids) else 0
    sums = np.zeros((n_clusters, embeddings.shape[1]), dtype=np.float64)
    np.add.at(sums, ids, embeddings)
    return l2_normalize(sums)


# ---- internals -------------------------------------------------------------------
def _assign(x: np.ndarray, k: int, cfg: ClusterConfig) -> tuple[np.ndarray, str]:
    n = len(x)
    # Ward is only defined for euclidean distance; on unit rows that ranks pairs as cosine does.
    metric = "euclidean" if cfg.linkage == "ward" else cfg.metric
    if k <= 1:
        return np.zeros(n, dtype=np.int64), "single-cluster"
    if n <= cfg.exact_max:
        return _agglomerate(x, k, cfg.linkage, metric), f"agglomerative({cfg.linkage}, {metric})"

    n_centroids = max(k, min(cfg.centroids, n))
    # batch_size 1024 keeps k-means++ seeding on ~3k samples; at 4096 the seeding alone
    # took a minute for 100,000 labels, and more, smaller steps gave lower inertia.
    km = MiniBatchKMeans(
        n_clusters=n_centroids, random_state=cfg.seed, n_init=1, batch_size=1024, init=_plain_kmeans_plusplus
    )
    fitted_on = ""
    if n <= KMEANS_FIT_MAX:
        assigned = km.fit(x).labels_
    else:
        fitted_on = f", fitted on {KMEANS_FIT_MAX} sampled labels"
        # Fitting on every label made 1,000,000 labels take 4 min of mini-batch steps; a fixed
        # sample places the centroids as well (see the module docstring), and one pass assigns all.
        sample = np.sort(np.random.default_rng(cfg.seed).choice(n, KMEANS_FIT_MAX, replace=False))
        assigned = km.fit(x[sample]).predict(x)
    # Mini-batch k-means can leave a centroid without members; cluster only the used ones.
    used, nearest = np.unique(assigned, return_inverse=True)
    centres = l2_normalize(km.cluster_centers_[used])
    k = min(k, len(used))
    top = _agglomerate(centres, k, cfg.linkage, metric) if k > 1 else np.zeros(len(used), dtype=np.int64)
    return top[nearest], f"minibatch-kmeans({len(used)}{fitted_on}) + agglomerative({cfg.linkage}, {metric})"


def _plain_kmeans_plusplus(x: np.ndarray, n_clusters: int, random_state) -> np.ndarray:
    """k-means++ seeding with one candidate per step: the greedy default tries 2 + log(k) (10 for
    3,000 centroids) and its 3,000 sequential steps took 20-60 s on a shared 2-core machine,
    for no measured gain in the micro-clusters."""
    return kmeans_plusplus(x, n_clusters, random_state=random_state, n_local_trials=1)[0]


def _agglomerate(x: np.ndarray, k: int, linkage: str, metric: str) -> np.ndarray:
    model = AgglomerativeClustering(n_clusters=k, linkage=linkage, metric=metric)
    return model.fit_predict(x).astype(np.int64)


def _renumber(raw: np.ndarray) -> np.ndarray:
    return _renumbering(raw)[raw]


def _renumbering(raw: np.ndarray) -> np.ndarray:
    """New id of each raw id: by descending size, ties by first appearance (rows come most frequent first)."""
    uniq, first, sizes = np.unique(raw, return_index=True, return_counts=True)
    order = sorted(range(len(uniq)), key=lambda i: (-sizes[i], first[i]))
    new_id = np.full(int(uniq.max()) + 1, -1, dtype=np.int64)
    new_id[uniq[order]] = np.arange(len(order))
    return new_id
