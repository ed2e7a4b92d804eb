"""Where the key-less merge starts (taxonomy/offline/start.py): the grouping the criteria agree on across cuts that
each leave out a fold of the tasks, and Ward over the micro-cluster centroids above CONSENSUS_MAX criteria."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import adjusted_rand_score

from taxonomy.config import PipelineConfig
from taxonomy.offline import start
from taxonomy.schemas import MicroCapability


def _blobs(n_groups: int = 9, per_task: int = 3, tasks: int = 24, seed: int = 0):
    """Rows in n_groups well-apart directions; each task holds per_task rows of every group."""
    rng = np.random.default_rng(seed)
    centres = np.eye(n_groups * 2)[:n_groups] * 3
    rows, truth, task_ids = [], [], []
    for t in range(tasks):
        for g in range(n_groups):
            for _ in range(per_task):
                rows.append(centres[g] + rng.normal(scale=0.3, size=centres.shape[1]))
                truth.append(g)
                task_ids.append(f"task-{t}")
    return np.array(rows), np.array(truth), task_ids


def test_agreed_groups_recover_well_apart_groups():
    x, truth, tasks = _blobs()
    got = start.agreed_groups(x, tasks, 9)
    assert adjusted_rand_score(truth, got) == pytest.approx(1.0)


def test_agreed_groups_keep_the_rest_when_a_tenth_of_the_tasks_go():
    x, truth, tasks = _blobs(seed=1)
    whole = start.agreed_groups(x, tasks, 9)
    kept = np.array([t not in {"task-0", "task-5", "task-11"} for t in tasks])
    less = start.agreed_groups(x[kept], [t for t, k in zip(tasks, kept) if k], 9)
    assert adjusted_rand_score(whole[kept], less) == pytest.approx(1.0)


def test_agreed_groups_of_one_task_cut_it_whole():
    x, truth, _ = _blobs(n_groups=3, tasks=1, per_task=4)
    got = start.agreed_groups(x, ["only"] * len(x), 3)
    assert adjusted_rand_score(truth, got) == pytest.approx(1.0)


def _micro(n: int) -> list[MicroCapability]:
    return [
        MicroCapability(
            name=f"check_kind_{chr(97 + i)}_capability",
            description="d",
            diagnostic_signal="s",
            example_pattern="e",
            non_examples=[],
            cluster_id=i,
            n_criteria=5,
            member_labels=[f"label_{i}"],
        )
        for i in range(n)
    ]


def test_criterion_owners_weigh_first_labels_fully_and_skip_failed_rows():
    micro = _micro(3)
    criteria = pl.DataFrame({"criterion_id": ["a", "b", "c"]})
    stage1 = pl.DataFrame(
        {
            "criterion_id": ["a", "b", "c"],
            "labels": [["label_0", "label_2"], ["label_1"], ["label_0"]],
            "status": ["ok", "ok", "failed"],
        }
    )
    owners = start.criterion_owners(criteria, stage1, micro)
    assert owners.tolist() == [[1.0, 0.0, 0.5], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]


def test_merge_start_groups_micro_clusters_by_their_criteria():
    cfg = PipelineConfig(name="t", corpus={"path": "t.csv"})
    micro = _micro(12)
    texts = [f"the report states the {w} figure" for w in ("first", "second", "third")] * 40
    criteria = pl.DataFrame(
        {
            "criterion_id": [str(i) for i in range(len(texts))],
            "task_id": [f"t{i % 12}" for i in range(len(texts))],
            "text": texts,
        }
    )
    owners = np.eye(12)[np.arange(len(texts)) % 12]
    got = start.merge_start(micro, np.eye(12), criteria, pl.DataFrame(), cfg, owners)
    assert got is not None
    members = sorted(n for cap in got for n in cap.member_input_names)
    assert members == sorted(m.name for m in micro)  # every micro-cluster in exactly one start capability
    assert (
        start.merge_start(micro[:5], np.eye(12)[:5], criteria, pl.DataFrame(), cfg, owners[:, :5]) is None
    )  # fewer than k


def test_merge_start_above_consensus_max_is_ward_over_centroids(monkeypatch):
    monkeypatch.setattr(start, "CONSENSUS_MAX", 10)
    cfg = PipelineConfig(name="t", corpus={"path": "t.csv"})
    micro = _micro(12)
    centroids = np.eye(12)
    centroids[1] = centroids[0]  # micro-clusters 0 and 1 alike: Ward merges them first
    criteria = pl.DataFrame({"criterion_id": ["x"] * 20, "task_id": ["t"] * 20, "text": ["a b"] * 20})
    got = start.merge_start(micro, centroids, criteria, pl.DataFrame(), cfg, np.ones((20, 12)))
    groups = {frozenset(cap.member_input_names) for cap in got}
    assert frozenset({micro[0].name, micro[1].name}) in groups
