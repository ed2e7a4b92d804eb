"""How sure a run is: clusterwise resampling stability of its capabilities (Hennig 2007; R fpc::clusterboot),
at no model call and no embedding.

Each resample draws a share of the criteria without replacement and re-runs Stage 2a's clustering
(`cluster_labels`) on their Stage 1 labels, the vectors read from the run's label_embeddings.npy. Each new
micro-cluster goes to the capability whose centroid on that resample is nearest: the mean vector of the
resampled criteria the capability holds as primary tag. So a criterion keeps its capability only when its
labels cluster with labels of that capability's criteria, and the whole capability lies nearer its own
criteria than any other capability's. A capability's figure is the mean over resamples of the Jaccard between
its criteria in the resample and the resampled group it overlaps most (>= 0.75 stable, < 0.5 dissolved); a
criterion's agreement is the share of the resamples that drew it in which it landed in its primary capability.
A capability whose members lie nearer other capabilities than each other is spread over their groups: low.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy.sparse import csr_matrix
from threadpoolctl import threadpool_limits

from taxonomy.config import ClusterConfig, StabilityConfig
from taxonomy.embed import l2_normalize
from taxonomy.schemas import DISSOLVED, STABLE, StabilityRun
from taxonomy.stages.cluster import cluster_centroids, cluster_labels

AGREEMENT_SCHEMA = {"criterion_id": pl.Utf8, "agreement": pl.Float64, "drawn": pl.Int64}


@dataclass
class StabilityResult:
    figures: dict[str, float | None]  # capability -> mean best Jaccard; None: no criterion holds it as primary
    agreement: pl.DataFrame  # AGREEMENT_SCHEMA; agreement null where the criterion was never drawn or placed
    run: StabilityRun


class CachedEmbedder:
    """The run's own label vectors, looked up by label: a resample never embeds anything again."""

    name = "cached label embeddings"

    def __init__(self, labels: list[str], vectors: np.ndarray) -> None:
        self.row = {label: i for i, label in enumerate(labels)}
        self.vectors = vectors

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.vectors[[self.row[t] for t in texts]]


def tags_partition_hash(tags: pl.DataFrame) -> str:
    """The criteria grouped by primary tag, names aside: a rename keeps it, any moved criterion changes it."""
    ok = tags.filter(pl.col("primary").is_not_null())
    groups = ok.group_by("primary").agg(pl.col("criterion_id").sort())["criterion_id"].to_list()
    return hashlib.sha256(json.dumps(sorted(groups)).encode()).hexdigest()[:16]


def _placeable(stage1: pl.DataFrame, tags: pl.DataFrame, labels: list[str], names: list[str]) -> pl.DataFrame:
    """Criteria with Stage 1 labels the run embedded and a primary tag among `names`: the ones a resample can
    place and compare. Columns criterion_id, labels (stripped, as Stage 2a strips them), ref (capability index)."""
    primary = tags.filter(pl.col("primary").is_in(names)).select(
        pl.col("criterion_id").cast(pl.Utf8), ref=pl.col("primary").replace_strict(names, range(len(names)))
    )
    return (
        stage1.filter(pl.col("status") == "ok")
        .select(
            pl.col("criterion_id").cast(pl.Utf8),
            pl.col("labels").list.eval(pl.element().str.strip_chars().filter(pl.element().str.len_chars() > 0)),
        )
        .filter(pl.col("labels").list.len() > 0, pl.col("labels").list.eval(pl.element().is_in(labels)).list.all())
        .join(primary, on="criterion_id", maintain_order="left")
        .with_columns(pl.col("ref").cast(pl.Int64))
    )


def _criterion_vectors(units: pl.DataFrame, embedder: CachedEmbedder) -> np.ndarray:
    """Row i: the unit mean of criterion i's label vectors (a sparse product: no loop over the criteria)."""
    lengths = units["labels"].list.len().to_numpy()
    rows = np.repeat(np.arange(units.height), lengths)
    cols = units["labels"].explode().replace_strict(embedder.row, return_dtype=pl.Int64).to_numpy()
    weights = np.repeat(1.0 / lengths, lengths).astype(np.float32)
    mean = csr_matrix((weights, (rows, cols)), shape=(units.height, len(embedder.row)))
    return l2_normalize(mean @ embedder.vectors)


def _one_resample(
    units: pl.DataFrame, vectors: np.ndarray, pick: np.ndarray, embedder: CachedEmbedder, cfg: ClusterConfig, scaled
) -> np.ndarray:
    """The capability index each picked criterion lands in on this resample."""
    sub = units[pick]
    ref = sub["ref"].to_numpy()
    result = cluster_labels(sub.with_columns(status=pl.lit("ok")), embedder, cfg, scaled)
    micro = cluster_centroids(result.embeddings, result.clusters["cluster_id"].to_numpy())
    n_caps = int(units["ref"].max()) + 1
    member = np.zeros((n_caps, len(pick)), dtype=np.float32)
    member[ref, np.arange(len(pick))] = 1.0  # a product, not np.add.at: 20x faster on thousands of rows
    caps = l2_normalize(member @ vectors[pick])
    scores = micro @ caps.T
    scores[:, ~caps.any(axis=1)] = -np.inf  # a capability with no criterion in this resample takes none
    to_cap = scores.argmax(axis=1)
    # Every picked criterion has labels, so Stage 2a gives each a row, in the order given.
    assert result.criterion_clusters["criterion_id"].equals(sub["criterion_id"], check_names=False)
    return to_cap[result.criterion_clusters["dominant_cluster"].to_numpy()]


def _best_jaccard(ref: np.ndarray, got: np.ndarray, n_caps: int) -> np.ndarray:
    """Per capability: the Jaccard of its criteria with the resampled group it overlaps most (nan when absent)."""
    counts = np.bincount(ref * n_caps + got, minlength=n_caps * n_caps).reshape(n_caps, n_caps)
    size_ref, size_got = counts.sum(axis=1), counts.sum(axis=0)
    jaccard = counts / np.maximum(size_ref[:, None] + size_got[None, :] - counts, 1)
    return np.where(size_ref > 0, jaccard.max(axis=1), np.nan)


def resample_stability(
    stage1: pl.DataFrame,
    clusters: pl.DataFrame,
    embeddings: np.ndarray,
    tags: pl.DataFrame,
    names: list[str],
    cluster_cfg: ClusterConfig,
    cfg: StabilityConfig,
    scaled: bool = True,
) -> StabilityResult | None:
    """The run's stability figures, or None where there is nothing to resample (off, or too few criteria)."""
    embedder = CachedEmbedder(clusters["label"].to_list(), np.asarray(embeddings))
    units = _placeable(stage1, tags, clusters["label"].to_list(), names)
    n_draw = min(cfg.max_criteria, round(cfg.fraction * units.height))
    if cfg.resamples == 0 or n_draw < 2 or len(names) < 2:
        return None
    vectors = _criterion_vectors(units, embedder)
    rng = np.random.default_rng(cfg.seed)
    ref = units["ref"].to_numpy()
    sums, seen = np.zeros(len(names)), np.zeros(len(names))
    hits, drawn = np.zeros(units.height), np.zeros(units.height, dtype=np.int64)
    # Small products, many of them: BLAS threads would only wait on each other. One limit for the loop, since
    # setting one scans the loaded libraries (milliseconds each time).
    with threadpool_limits(1):
        for _ in range(cfg.resamples):
            pick = np.sort(rng.choice(units.height, n_draw, replace=False))
            got = _one_resample(units, vectors, pick, embedder, cluster_cfg, scaled)
            best = _best_jaccard(ref[pick], got, len(names))
            present = ~np.isnan(best)
            sums[present] += best[present]
            seen[present] += 1
            hits[pick] += got == ref[pick]
            drawn[pick] += 1
    figures = {n: (round(float(sums[i] / seen[i]), 4) if seen[i] else None) for i, n in enumerate(names)}
    agreement = units.select("criterion_id").with_columns(
        agreement=pl.Series(np.where(drawn > 0, hits / np.maximum(drawn, 1), np.nan)).round(4).fill_nan(None),
        drawn=pl.Series(drawn, dtype=pl.Int64),
    )
    run = StabilityRun(
        resamples=cfg.resamples,
        seed=cfg.seed,
        fraction=cfg.fraction,
        criteria_per_resample=n_draw,
        max_criteria=cfg.max_criteria,
        membership="",  # the caller stamps the taxonomy's membership
        tags=tags_partition_hash(tags),
    )
    return StabilityResult(figures, agreement, run)


def summary_note(figures: dict[str, float | None], run: StabilityRun) -> str:
    """One line for the tag stage's output: how many capabilities are stable and which dissolved."""
    known = {n: v for n, v in figures.items() if v is not None}
    stable = sum(v >= STABLE for v in known.values())
    dissolved = [n for n, v in known.items() if v < DISSOLVED]
    gone = f"; dissolved (< {DISSOLVED}): " + ", ".join(f"`{n}`" for n in dissolved) if dissolved else ""
    return (
        f"stability over {run.resamples} resamples of {run.criteria_per_resample} criteria (no model call): "
        f"{stable} of {len(known)} capabilities stable (>= {STABLE}){gone}"
    )
