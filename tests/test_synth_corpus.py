"""benchmarks/synth_corpus.py: deterministic, the requested size, read by the table loader,
and made of the real criteria (recombined, not invented)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import polars as pl
import pytest

from taxonomy.config import load_config
from taxonomy.corpus import load_corpus

ROOT = Path(__file__).resolve().parent.parent


def _load():
    name = "benchmarks_synth_corpus"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / "synth_corpus.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


sc = _load()


@pytest.fixture(scope="module")
def sources() -> pl.DataFrame:
    return sc.load_sources([ROOT / "pipelines" / "devai.toml"])


def test_same_seed_same_corpus_other_seed_other_corpus(sources):
    a = sc.synth_corpus(sources, n=600, tasks=20, seed=3)
    assert a.equals(sc.synth_corpus(sources, n=600, tasks=20, seed=3))
    assert not a.equals(sc.synth_corpus(sources, n=600, tasks=20, seed=4))


def test_size_tasks_and_unique_texts_within_each_task(sources):
    frame = sc.synth_corpus(sources, n=1_000, tasks=25, seed=0)
    assert frame.height == 1_000
    assert frame["task_id"].n_unique() == 25
    assert frame.group_by("task_id").agg(dup=pl.len() - pl.col("text").n_unique())["dup"].sum() == 0
    sizes = frame.group_by("task_id").len()["len"]
    assert sizes.min() >= 1 and sizes.max() > sizes.min()  # rubrics of different sizes, as in real corpora


def test_criteria_come_from_the_real_ones(sources):
    frame = sc.synth_corpus(sources, n=1_000, tasks=25, seed=0)
    real = set(sources["text"].to_list())
    kept = frame.filter(pl.col("operation") == "keep")
    assert kept.height and set(kept["text"].to_list()) <= real | {t for t in kept["text"] if t.endswith(")")}
    changed = frame.filter(pl.col("operation") != "keep")
    assert changed.height > frame.height // 2
    assert sum(t in real for t in changed["text"]) < changed.height // 10  # re-worded, not copied
    # Every criterion names the real criteria it was made from, and they exist.
    real_ids = set((sources["task_id"] + "/" + sources["criterion_id"].str.split("/").list.last()).to_list())
    origins = {o for cell in frame["origin"] for o in cell.split(" + ")}
    assert origins <= real_ids
    # A task's brief is a real task's brief.
    assert set(frame["brief"].to_list()) <= set(sources["brief"].to_list())


def test_written_corpus_and_pipeline_load_through_the_table_format(tmp_path):
    out = tmp_path / "synth.jsonl"
    toml = tmp_path / "synth.toml"
    sc.main(
        [
            str(out),
            "--n",
            "300",
            "--tasks",
            "10",
            "--sources",
            str(ROOT / "pipelines" / "devai.toml"),
            "--pipeline",
            str(toml),
        ]
    )
    cfg = load_config(toml)
    corpus = load_corpus(cfg.corpus, cfg.base_dir)
    assert corpus.frame.height == 300
    assert corpus.frame["task_id"].n_unique() == 10
    assert {"origin", "operation"} <= set(corpus.frame.columns)
    assert corpus.frame["brief"].str.len_chars().min() > 0


def test_more_tasks_than_criteria_is_refused(sources):
    with pytest.raises(ValueError, match="at least one criterion per task"):
        sc.synth_corpus(sources, n=5, tasks=10)
