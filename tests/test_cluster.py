"""Stage 2a: local embedder, agglomerative and two-level clustering, dominant-cluster rule."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import adjusted_rand_score
from threadpoolctl import threadpool_limits

from taxonomy.config import ClusterConfig
from taxonomy.embed import Embedder
from taxonomy.embed.local import LocalEmbedder
from taxonomy.stages.cluster import cluster_centroids, cluster_labels, dominant_cluster

ROOT = Path(__file__).resolve().parents[1]

# Eight verifier skills, each with its own vocabulary; verbs and fillers are shared noise.
GROUPS = {
    "cash": "discounted cash flow terminal growth wacc perpetuity".split(),
    "links": "cross sheet reference formula linkage dependency chain".split(),
    "slides": "slide deck layout chart legend axis title".split(),
    "dates": "fiscal quarter date period calendar timeline year".split(),
    "units": "currency unit scaling millions thousands denomination conversion".split(),
    "sources": "citation source filing footnote provenance document evidence".split(),
    "ratios": "margin ratio leverage multiple ebitda coverage ebit".split(),
    "narrative": "thesis recommendation rationale argument narrative summary tone".split(),
}


VERBS = "verify check inspect confirm audit trace compare validate recompute".split()
FILLERS = ["", "", "reported", "stated", "each", "final"]


@pytest.fixture(autouse=True)
def one_thread():
    # Tiny inputs gain nothing from threads, and OpenMP/BLAS spin-waiting made them 10x
    # slower when other jobs shared the two cores.
    with threadpool_limits(1):
        yield


def synthetic_labels(per_group: int, seed: int = 0) -> tuple[list[str], list[int]]:
    rng = np.random.default_rng(seed)
    labels: dict[str, int] = {}
    for g, words in enumerate(GROUPS.values()):
        made = 0
        while made < per_group:
            picked = rng.choice(words, size=rng.integers(2, 4), replace=False).tolist()
            parts = [rng.choice(VERBS), rng.choice(FILLERS), *picked, "capability"]
            label = "_".join(p for p in parts if p)
            if label not in labels:
                labels[label] = g
                made += 1
    return list(labels), list(labels.values())


def stage1_of(labels: list[str]) -> pl.DataFrame:
    # One criterion per label, plus a failed row whose labels must be ignored.
    return pl.DataFrame(
        {
            "criterion_id": [f"c{i}" for i in range(len(labels))] + ["bad"],
            "labels": [[lab] for lab in labels] + [["ignored_failed_row_label_capability"]],
            "status": ["ok"] * len(labels) + ["failed"],
        }
    )


def ari(result, truth: dict[str, int]) -> float:
    got = dict(zip(result.clusters["label"], result.clusters["cluster_id"]))
    keys = sorted(truth)
    return adjusted_rand_score([truth[k] for k in keys], [got[k] for k in keys])


def test_local_embedder_shape_norm_and_determinism():
    labels, _ = synthetic_labels(5)
    a = LocalEmbedder(dim=32).embed(labels)
    b = LocalEmbedder(dim=32).fit(labels).embed(labels)
    assert isinstance(LocalEmbedder(), Embedder)
    assert a.dtype == np.float32 and a.shape == (len(labels), 32)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(a, b)
    # Small vocabulary: fewer columns than asked, still unit rows.
    tiny = LocalEmbedder(dim=256).embed(["verify_cash_flow_capability", "trace_formula_chain_capability"])
    assert tiny.shape[0] == 2 and tiny.shape[1] <= 2
    np.testing.assert_allclose(np.linalg.norm(tiny, axis=1), 1.0, atol=1e-5)


def test_local_embedder_paraphrases_are_closer():
    e = LocalEmbedder(dim=64)
    e.fit(synthetic_labels(20)[0])
    x = e.embed(
        [
            "recompute_discounted_cash_flow_capability",
            "verify_cash_flow_discounting_capability",
            "inspect_slide_chart_legend_capability",
        ]
    )
    assert x[0] @ x[1] > x[0] @ x[2] + 0.2


def test_clustering_recovers_planted_groups_and_is_deterministic():
    labels, groups = synthetic_labels(30)
    cfg = ClusterConfig(k=8)
    r1 = cluster_labels(stage1_of(labels), LocalEmbedder(dim=128), cfg)
    r2 = cluster_labels(stage1_of(labels), LocalEmbedder(dim=128), cfg)
    assert r1.method.startswith("agglomerative")
    assert ari(r1, dict(zip(labels, groups))) >= 0.9
    assert r1.clusters.equals(r2.clusters) and r1.criterion_clusters.equals(r2.criterion_clusters)
    np.testing.assert_array_equal(r1.embeddings, r2.embeddings)
    # Failed rows contribute nothing; schema and order as documented.
    assert "ignored_failed_row_label_capability" not in r1.clusters["label"].to_list()
    assert r1.clusters.schema == {"label": pl.Utf8, "frequency": pl.Int64, "cluster_id": pl.Int64}
    assert r1.criterion_clusters.schema == {"criterion_id": pl.Utf8, "dominant_cluster": pl.Int64}
    sizes = r1.clusters["cluster_id"].value_counts().sort("cluster_id")["count"].to_list()
    assert sizes == sorted(sizes, reverse=True)  # ids renumbered by descending size


def test_two_level_path_matches_quality():
    labels, groups = synthetic_labels(100)
    cfg = ClusterConfig(k=8, exact_max=200, centroids=80)
    r = cluster_labels(stage1_of(labels), LocalEmbedder(dim=128), cfg)
    assert r.method.startswith("minibatch-kmeans")
    assert ari(r, dict(zip(labels, groups))) >= 0.9
    again = cluster_labels(stage1_of(labels), LocalEmbedder(dim=128), cfg)
    assert r.clusters.equals(again.clusters)


class AxisEmbedder:
    """Labels starting with a/b/c sit on three orthogonal axes: clusters known in advance."""

    name = "axis"

    def embed(self, texts: list[str]) -> np.ndarray:
        axis = {"a": 0, "b": 1, "c": 2}
        x = np.zeros((len(texts), 4), dtype=np.float32)
        for i, t in enumerate(texts):
            x[i, axis[t[0]]] = 1.0
            x[i, 3] = 0.01 * (len(t) % 3)
        return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_dominant_cluster_majority_and_tie_rule():
    stage1 = pl.DataFrame(
        {
            "criterion_id": ["majority", "tie_a_first", "tie_b_first", "three_way", "lonely", "failed"],
            "labels": [["a1", "b1", "b2"], ["a1", "b1"], ["b2", "a2"], ["c1", "a1", "b1"], [], ["c9"]],
            "status": ["ok", "ok", "ok", "ok", "ok", "failed"],
        }
    )
    r = cluster_labels(stage1, AxisEmbedder(), ClusterConfig(k=3))
    cid = dict(zip(r.clusters["label"], r.clusters["cluster_id"]))
    dom = dict(zip(r.criterion_clusters["criterion_id"], r.criterion_clusters["dominant_cluster"]))
    assert dom == {"majority": cid["b1"], "tie_a_first": cid["a1"], "tie_b_first": cid["b2"], "three_way": cid["c1"]}
    assert len({cid["a1"], cid["b1"], cid["c1"]}) == 3
    assert "c9" not in cid  # failed rows are ignored
    # Frequency desc, then label.
    assert r.clusters["label"].to_list() == ["a1", "b1", "b2", "a2", "c1"]
    assert dominant_cluster([4, 2, 2, 4]) == 4 and dominant_cluster([2, 4, 4]) == 4


def test_k_capped_and_centroids_normalised():
    stage1 = pl.DataFrame({"criterion_id": ["x"], "labels": [["a1", "b1"]], "status": ["ok"]})
    r = cluster_labels(stage1, AxisEmbedder(), ClusterConfig(k=80))
    assert sorted(r.clusters["cluster_id"].to_list()) == [0, 1]
    cents = cluster_centroids(r.embeddings, r.clusters["cluster_id"].to_numpy())
    assert cents.shape == (2, 4)
    np.testing.assert_allclose(np.linalg.norm(cents, axis=1), 1.0, atol=1e-6)


def test_empty_input():
    stage1 = pl.DataFrame({"criterion_id": ["x"], "labels": [["a1"]], "status": ["failed"]})
    r = cluster_labels(stage1, AxisEmbedder(), ClusterConfig())
    assert r.clusters.height == 0 and r.criterion_clusters.height == 0 and r.method == "empty"


@pytest.mark.parametrize("linkage,metric", [("average", "cosine"), ("ward", "cosine")])
def test_other_linkages_run(linkage, metric):
    labels, groups = synthetic_labels(15)
    r = cluster_labels(stage1_of(labels), LocalEmbedder(dim=64), ClusterConfig(k=8, linkage=linkage, metric=metric))
    assert r.clusters["cluster_id"].n_unique() == 8
    assert "euclidean" in r.method if linkage == "ward" else "cosine" in r.method


def test_sampled_kmeans_fit_assigns_every_label(monkeypatch):
    # Above KMEANS_FIT_MAX the centroids come from a sample; labels outside it must still land in
    # the right planted group, deterministically.
    import taxonomy.stages.cluster as cluster

    labels, groups = synthetic_labels(100)
    cfg = ClusterConfig(k=8, exact_max=200, centroids=80)
    monkeypatch.setattr(cluster, "KMEANS_FIT_MAX", 300)
    r = cluster_labels(stage1_of(labels), LocalEmbedder(dim=128), cfg)
    assert "fitted on 300 sampled labels" in r.method
    assert r.clusters.height == len(labels) and r.clusters["cluster_id"].n_unique() == 8
    assert ari(r, dict(zip(labels, groups))) >= 0.9
    assert r.clusters.equals(cluster_labels(stage1_of(labels), LocalEmbedder(dim=128), cfg).clusters)


# ---- criteria as the unit (cluster.unit) -----------------------------------------------
TOPICS = ["churn model", "payroll app", "weather map", "chess engine", "recipe site", "loan desk"]


def skill_corpus() -> pl.DataFrame:
    """Six tasks, each with one criterion per skill of GROUPS, worded from that skill's vocabulary."""
    rows = []
    for t, topic in enumerate(TOPICS):
        for g, words in enumerate(GROUPS.values()):
            picked = np.random.default_rng(100 * t + g).choice(words, size=3, replace=False)
            rows.append(
                {"criterion_id": f"{t}/{g}", "task_id": f"task{t}", "text": f"The {' '.join(picked)} of the {topic}."}
            )
    return pl.DataFrame(rows)


def worded_sample(frame: pl.DataFrame, seed: int) -> pl.DataFrame:
    """One sample of Stage 1: two labels a criterion, each one word of its skill among verbs and fillers drawn
    afresh, as a model words the same check differently from one sample to the next."""
    rng = np.random.default_rng(seed)
    labels = []
    for cid in frame["criterion_id"].to_list():
        words = list(GROUPS.values())[int(cid.split("/")[1])]
        parts = [[rng.choice(VERBS), rng.choice(FILLERS), rng.choice(VERBS), rng.choice(words)] for _ in range(2)]
        labels.append(list(dict.fromkeys("_".join([*(p for p in ps if p), "capability"]) for ps in parts)))
    return pl.DataFrame({"criterion_id": frame["criterion_id"], "labels": labels, "status": ["ok"] * frame.height})


def criterion_partitions(unit: str) -> list[list[int]]:
    frame = skill_corpus()
    out = []
    for seed in (1, 2, 3):
        r = cluster_labels(
            worded_sample(frame, seed), LocalEmbedder(dim=64), ClusterConfig(k=8, unit=unit), criteria=frame
        )
        dominant = dict(r.criterion_clusters.iter_rows())
        out.append([dominant[c] for c in frame["criterion_id"].to_list()])
    return out


def test_criteria_worded_apart_by_each_sample_keep_their_micro_clusters():
    parts = criterion_partitions("criteria")
    truth = [int(c.split("/")[1]) for c in skill_corpus()["criterion_id"].to_list()]
    assert all(adjusted_rand_score(parts[0], p) >= 0.9 for p in parts[1:])
    assert all(adjusted_rand_score(truth, p) >= 0.9 for p in parts)


def test_label_strings_stay_selectable_as_the_papers_design():
    frame, stage1 = skill_corpus(), worded_sample(skill_corpus(), 1)
    paper = cluster_labels(stage1, LocalEmbedder(dim=64), ClusterConfig(k=8, unit="labels"), criteria=frame)
    assert paper.method.startswith("agglomerative")
    assert paper.clusters.equals(cluster_labels(stage1, LocalEmbedder(dim=64), ClusterConfig(k=8)).clusters)
    # The label strings follow the wording: the three samples' partitions of the criteria disagree.
    parts = criterion_partitions("labels")
    assert min(adjusted_rand_score(parts[0], p) for p in parts[1:]) < 0.5


def test_criteria_unit_keeps_the_cluster_result_shape():
    frame = skill_corpus()
    r = cluster_labels(worded_sample(frame, 1), LocalEmbedder(dim=64), ClusterConfig(k=8), criteria=frame)
    assert r.method.startswith("criteria:")
    assert r.clusters.schema == {"label": pl.Utf8, "frequency": pl.Int64, "cluster_id": pl.Int64}
    assert r.criterion_clusters.height == frame.height and r.embeddings.shape[0] == r.clusters.height
    # Every cluster a criterion sits in holds a label (Stage 2b names a cluster from its labels), ids 0..k-1.
    held = set(r.clusters["cluster_id"].to_list())
    assert set(r.criterion_clusters["dominant_cluster"].to_list()) <= held == set(range(len(held)))
    np.testing.assert_allclose(np.linalg.norm(r.embeddings, axis=1), 1.0, atol=1e-5)


def devai_partition(keep_task) -> dict[str, int]:
    """Criteria of the bundled DevAI (those of the tasks `keep_task` keeps) clustered at k = 40, labelled as the test
    server's model labels them (from each criterion's own text)."""
    from taxonomy.corpus import load_corpus
    from taxonomy.config import load_config
    from tests.responders import discovery_item

    cfg = load_config(ROOT / "pipelines" / "devai.toml")
    frame = load_corpus(cfg.corpus, cfg.base_dir).frame.filter(pl.col("task_id").map_elements(keep_task, pl.Boolean))
    labels = [discovery_item(0, t)["capabilities"] for t in frame["text"].to_list()]
    stage1 = pl.DataFrame({"criterion_id": frame["criterion_id"], "labels": labels, "status": ["ok"] * frame.height})
    r = cluster_labels(stage1, LocalEmbedder(dim=256), ClusterConfig(k=40), criteria=frame)
    return dict(r.criterion_clusters.iter_rows())


def test_criteria_clusters_stay_when_a_tenth_of_the_tasks_go():
    full = devai_partition(lambda task: True)
    less = devai_partition(lambda task: zlib.crc32(f"drop {task}".encode()) % 10 != 0)
    shared = sorted(set(full) & set(less))
    assert 0.8 * len(full) < len(shared) < len(full)
    assert adjusted_rand_score([full[c] for c in shared], [less[c] for c in shared]) >= 0.78
