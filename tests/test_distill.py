"""The distilled Stage-3 tagger: trained on a finished offline run over DevAI, routed by confidence."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from taxonomy.config import load_config
from taxonomy.distill import DistillError, documents, load_distilled, predict_tags, tag_with_distilled, train_distilled
from taxonomy.pipeline import open_session
from taxonomy.run import RunDir
from taxonomy.stages.tag import SCHEMA
from taxonomy.taxonomy_io import load_taxonomy
from tests import responders
from tests.conftest import ROOT, invoke, offline_devai_run


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A finished offline run over the bundled DevAI corpus, with a distilled model trained on it."""
    tmp = tmp_path_factory.mktemp("distill")
    run_dir = offline_devai_run(tmp)
    report = train_distilled(RunDir(run_dir), holdout=0.25, seed=0)
    return tmp / "devai.toml", run_dir, report


def _session(pipeline: Path, run_dir: Path, provider: str = "offline"):
    return open_session(load_config(pipeline), provider=provider, run_dir=run_dir, show_progress=False)


def test_training_reports_agreement_on_held_out_tasks(trained):
    _, run_dir, report = trained
    for value in (
        report.agreement,
        report.macro_f1,
        report.primary_in_tags,
        report.majority_baseline,
        report.coverage_at_threshold,
    ):
        assert 0.0 <= value <= 1.0
    assert report.split == "task"
    assert report.train_tasks and report.holdout_tasks
    assert not set(report.train_tasks) & set(report.holdout_tasks)
    criteria = pl.read_parquet(run_dir / "criteria.parquet")
    ok = pl.read_parquet(run_dir / "stage3_tags.parquet").filter(pl.col("status") == "ok")
    tasks = set(criteria.filter(pl.col("criterion_id").is_in(ok["criterion_id"].to_list()))["task_id"].to_list())
    assert set(report.train_tasks) | set(report.holdout_tasks) == tasks
    assert report.n_train + report.n_holdout == report.n_criteria == ok.height
    assert sum(b["n"] for b in report.buckets) == report.n_holdout
    coverage = [t["coverage"] for t in report.tradeoff]
    assert coverage == sorted(coverage, reverse=True) and coverage[0] == 1.0
    assert all(t["agreement"] is None or 0 <= t["agreement"] <= 1 for t in report.tradeoff)
    assert 0.0 <= report.threshold <= 1.0
    # Artifacts: the model with its taxonomy hash, and the report as JSON and Markdown.
    assert json.loads((run_dir / "distill_report.json").read_text()) == json.loads(json.dumps(report.to_dict()))
    assert "Held-out agreement" in (run_dir / "distill_report.md").read_text()
    taxonomy = load_taxonomy(run_dir / "taxonomy.json")
    bundle = load_distilled(run_dir / "distilled.joblib", taxonomy)
    assert bundle["taxonomy_hash"] == taxonomy.content_hash and bundle["taxonomy_names"] == taxonomy.names()
    assert bundle["threshold"] == report.threshold
    assert RunDir(run_dir).manifest["stages"]["distill"]["taxonomy_hash"] == taxonomy.content_hash


def test_threshold_zero_keeps_everything_with_the_model(trained, tmp_path, offline_env):
    pipeline, run_dir, _ = trained
    session = _session(pipeline, tmp_path / "new")
    summary = tag_with_distilled(session, run_dir / "distilled.joblib", run_dir / "taxonomy.json", threshold=0.0)
    assert summary["share_distilled"] == 1.0 and summary["share_sent_to_llm"] == 0.0 and summary["calls"] == 0
    tags = pl.read_parquet(tmp_path / "new" / "stage3_tags.parquet")
    assert tags.schema == pl.Schema({**SCHEMA, "source": pl.Utf8})
    assert tags.height == summary["n"] == pl.read_parquet(tmp_path / "new" / "criteria.parquet").height
    assert set(tags["source"]) == {"distilled"} and set(tags["status"]) == {"ok"}
    names = load_taxonomy(run_dir / "taxonomy.json").names()
    for row in tags.iter_rows(named=True):
        assert 1 <= len(row["tags"]) <= session.cfg.tag.max_tags and len(set(row["tags"])) == len(row["tags"])
        assert row["primary"] == row["tags"][0] and set(row["tags"]) <= set(names) and 0 < row["score"] <= 1


def test_threshold_above_one_sends_everything_to_stage3(trained, tmp_path, offline_env):
    pipeline, run_dir, _ = trained
    session = _session(pipeline, tmp_path / "new")
    summary = tag_with_distilled(session, run_dir / "distilled.joblib", run_dir / "taxonomy.json", threshold=1.01)
    assert (
        summary["share_distilled"] == 0.0 and summary["share_sent_to_llm"] == 1.0 and summary["fallback"] == "offline"
    )
    tags = pl.read_parquet(tmp_path / "new" / "stage3_tags.parquet")
    assert set(tags["source"]) == {"offline"} and tags.height == summary["n"]


def test_only_low_confidence_criteria_reach_the_llm(trained, tmp_path, gemini_env):
    pipeline, run_dir, _ = trained
    session = _session(pipeline, tmp_path / "llm", provider="gemini")
    taxonomy = load_taxonomy(run_dir / "taxonomy.json")
    criteria = pl.read_parquet(run_dir / "criteria.parquet")
    bundle = load_distilled(run_dir / "distilled.joblib", taxonomy)
    _, conf = predict_tags(bundle["model"], documents(criteria), 3, 0.1)
    threshold = float(sorted(conf)[len(conf) // 4])  # about a quarter of the criteria fall below it
    low = criteria.filter(pl.Series(conf < threshold))
    assert 0 < low.height < criteria.height

    summary = tag_with_distilled(session, run_dir / "distilled.joblib", run_dir / "taxonomy.json", threshold=threshold)
    asked = [
        text
        for req in gemini_env.requests
        if responders.kind(req.texts[0]) == "tag"
        for _, text in responders.criteria(req.texts[0])
    ]
    assert Counter(asked) == Counter(low["text"].to_list())
    assert summary["share_sent_to_llm"] == pytest.approx(low.height / criteria.height)
    assert summary["calls"] == sum(responders.kind(r.texts[0]) == "tag" for r in gemini_env.requests) > 0
    tags = pl.read_parquet(tmp_path / "llm" / "stage3_tags.parquet")
    assert tags["criterion_id"].to_list() == criteria["criterion_id"].to_list()
    assert set(tags.filter(pl.col("source") == "llm")["criterion_id"]) == set(low["criterion_id"])
    assert set(tags.filter(pl.col("source") == "distilled")["criterion_id"]).isdisjoint(low["criterion_id"].to_list())


def test_taxonomy_mismatch_and_bad_model_files_are_clear_errors(trained, tmp_path, offline_env):
    pipeline, run_dir, _ = trained
    edited = json.loads((run_dir / "taxonomy.json").read_text())
    edited["capabilities"][0]["description"] += " Edited by hand."
    (tmp_path / "taxonomy.json").write_text(json.dumps(edited))
    session = _session(pipeline, tmp_path / "new")
    with pytest.raises(DistillError, match=r"trained for taxonomy \w+, but the taxonomy in use is \w+; fix:") as err:
        tag_with_distilled(session, run_dir / "distilled.joblib", tmp_path / "taxonomy.json")
    assert "\n" not in str(err.value)
    with pytest.raises(DistillError, match="no such distilled model; fix:"):
        tag_with_distilled(session, tmp_path / "missing.joblib", run_dir / "taxonomy.json")
    (tmp_path / "corrupt.joblib").write_bytes(b"not a pickle at all")
    with pytest.raises(DistillError, match="not a readable distilled model"):
        tag_with_distilled(session, tmp_path / "corrupt.joblib", run_dir / "taxonomy.json")
    assert not (tmp_path / "new" / "stage3_tags.parquet").exists()


def test_stage3_tagged_with_another_taxonomy_is_refused(trained, tmp_path):
    _, run_dir, _ = trained
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    tags = pl.read_parquet(copy / "stage3_tags.parquet").with_columns(primary=pl.lit("not_in_taxonomy_capability"))
    tags.write_parquet(copy / "stage3_tags.parquet")
    with pytest.raises(DistillError, match="not in .*taxonomy.json; fix:"):
        train_distilled(RunDir(copy))


def test_taxonomy_edited_after_stage3_is_refused(trained, tmp_path):
    _, run_dir, _ = trained
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    edited = json.loads((copy / "taxonomy.json").read_text())
    edited["capabilities"][0]["description"] += " Edited by hand."
    (copy / "taxonomy.json").write_text(json.dumps(edited))
    with pytest.raises(DistillError, match=r"Stage 3 was tagged with taxonomy \w+, but taxonomy.json is \w+; fix:"):
        train_distilled(RunDir(copy))


def test_default_threshold_is_the_one_saved_at_training(trained, tmp_path, offline_env):
    pipeline, run_dir, report = trained
    summary = tag_with_distilled(
        _session(pipeline, tmp_path / "new"), run_dir / "distilled.joblib", run_dir / "taxonomy.json"
    )
    assert summary["threshold"] == report.threshold
    assert summary["distilled"] + summary["sent"] == summary["n"]
    assert RunDir(tmp_path / "new").manifest["stages"]["tag"]["share_distilled"] == summary["share_distilled"]


def test_distill_then_tag_with_the_distilled_model(offline_run, offline_env, tmp_path):
    result = invoke("distill", offline_run)
    assert "Held-out agreement" in result.output and (offline_run / "distilled.joblib").exists()
    out = tmp_path / "distilled-run"
    invoke(
        "tag",
        ROOT / "pipelines" / "devai.toml",
        "--taxonomy",
        offline_run / "taxonomy.json",
        "--distilled",
        offline_run / "distilled.joblib",
        "--run-dir",
        out,
        "-q",
    )
    tags = pl.read_parquet(out / "stage3_tags.parquet")
    assert tags.height == 365 and set(tags["source"]) <= {"distilled", "offline"} and "distilled" in set(tags["source"])
