"""benchmarks/quality.py: its metrics on constructed partitions, and one offline smoke run on DevAI."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load():
    name = "benchmarks_quality"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / "quality.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


q = _load()


def test_identical_partitions_score_one_under_any_names():
    gold = ["a"] * 5 + ["b"] * 3 + ["c"] * 2
    pred = [{"a": 7, "b": 1, "c": 4}[g] for g in gold]  # same partition, other names
    s = q.gold_scores(gold, pred)
    assert s["nmi"] == pytest.approx(1.0)
    assert s["ari"] == pytest.approx(1.0)
    assert s["h"] == pytest.approx(1.0) and s["purity"] == s["inverse_purity"] == pytest.approx(1.0)


def test_harmonic_purity_by_hand_and_one_cluster_reference():
    gold = ["a"] * 6 + ["b"] * 4
    # Clusters {a,a,a,a,b} and {a,a,b,b,b}: purity (4 + 3) / 10; inverse purity: a's best cluster 4, b's 3.
    pred = [0, 0, 0, 0, 1, 1, 0, 1, 1, 1]
    h, purity, inverse = q.harmonic_purity(gold, pred)
    assert purity == pytest.approx(0.7) and inverse == pytest.approx(0.7) and h == pytest.approx(0.7)
    # One cluster: purity = largest class share p = 0.6, inverse purity = 1, so H = 2p / (1 + p).
    one = q.harmonic_purity(gold, [0] * 10)
    assert one[1] == pytest.approx(0.6) and one[2] == pytest.approx(1.0)
    assert one[0] == pytest.approx(2 * 0.6 / 1.6) == pytest.approx(q.one_cluster_harmonic_purity(gold))
    # ... and the chance-corrected scores give it nothing.
    s = q.gold_scores(gold, [0] * 10)
    assert s["nmi"] == pytest.approx(0.0) and s["ari"] == pytest.approx(0.0)


def test_gold_scores_skip_rows_without_gold():
    gold = ["a", "a", None, "b", "b"]
    pred = [1, 1, 9, 2, 2]
    s = q.gold_scores(gold, pred)
    assert s["n"] == 4 and s["nmi"] == pytest.approx(1.0)


def test_topic_leak_is_ami_with_the_task():
    task = ["t1"] * 20 + ["t2"] * 20 + ["t3"] * 20
    assert q.topic_leak(task, task) == pytest.approx(1.0)  # clusters = tasks: all topic
    assert q.topic_leak(task, [f"c{t}" for t in task]) == pytest.approx(1.0)
    # Each task spread evenly over the same two check kinds: nothing about the task leaks.
    kinds = ["x", "y"] * 30
    assert q.topic_leak(task, kinds) == pytest.approx(0.0, abs=0.05)
    # The score function reports the same number beside the gold ones.
    row = q.score_partition(kinds, {"category": kinds}, task)
    assert row["leak"] == pytest.approx(q.topic_leak(task, kinds))
    assert row["category:nmi"] == pytest.approx(1.0) and row["k"] == 2


def test_breakdowns_sum_to_the_mutual_information():
    from sklearn.metrics import mutual_info_score

    task = ["t1"] * 10 + ["t2"] * 10 + ["t3"] * 10
    pred = ["a"] * 8 + ["b"] * 2 + ["b"] * 9 + ["a"] + ["a", "b"] * 5
    mi = mutual_info_score(task, pred)
    assert sum(r["mi"] for r in q.leak_breakdown(task, pred)) == pytest.approx(mi)
    assert sum(r["mi"] for r in q.task_breakdown(task, pred)) == pytest.approx(mi)
    assert q.task_breakdown(task, pred)[-1]["task"] == "t3"  # the evenly split task carries least


def test_random_same_sizes_keeps_cluster_sizes():
    pred = ["a"] * 7 + ["b"] * 2 + ["c"]
    shuffled = q.random_same_sizes(pred, seed=3)
    assert sorted(shuffled) == sorted(pred)
    assert q.random_same_sizes(pred, seed=3) == shuffled  # seeded


def test_main_offline_devai_smoke(tmp_path, monkeypatch, capsys):
    for key in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    results = q.main(["--corpus", "devai", "--work-dir", str(tmp_path), "--seeds", "1"])
    out = capsys.readouterr().out
    assert len(results) == 1
    res = results[0]
    assert res["corpus"] == "devai" and res["n"] > 300
    expected = [
        "offline taxonomy primary",
        "baseline kmeans-embed",
        "baseline kmeans-tfidf-svd",
        "random, same sizes",
        "one cluster",
    ]
    assert list(res["rows"]) == expected
    k = res["rows"]["offline taxonomy primary"]["k"]
    assert 2 <= k <= 12
    for name, row in res["rows"].items():
        assert name in out
        for metric, value in row.items():
            assert not math.isnan(value), (name, metric)
            if metric == "k":
                continue
            lo = -0.5 if metric.endswith(":ari") or metric == "leak" else 0.0  # ARI and AMI dip below 0 by chance
            assert lo <= value <= 1.0 + 1e-9, (name, metric, value)
    assert res["rows"]["baseline kmeans-embed"]["k"] == k == res["rows"]["baseline kmeans-tfidf-svd"]["k"]
    assert res["rows"]["one cluster"]["category:nmi"] == pytest.approx(0.0)
    assert res["rows"]["one cluster"]["category:h"] == pytest.approx(res["one_cluster_h"]["category"])
    assert "NMI category > best plain baseline" in out and ("PASS" in out or "FAIL" in out)
    assert "leak AMI" in out and "harmonic purity" in out
    run = res["runs"][0]
    assert run.seconds is not None and run.peak_rss_mb > 0
    # The pipeline never saw the gold field: the snapshot every stage read has it blank, while
    # the scores above used the loader's values.
    import polars as pl

    snapshot = pl.read_parquet(run.run_dir / "criteria.parquet")
    assert (
        snapshot["category"].null_count() == snapshot.height
        and res["rows"]["offline taxonomy primary"]["category:nmi"] > 0.2
    )
    assert "constraints hold on every seed" in out
