"""The uses of a tagged corpus through the CLI, on an offline run over the bundled DevAI data."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import ROOT, invoke, offline_devai_run


@pytest.fixture(scope="module")
def devai_run(tmp_path_factory) -> Path:
    return offline_devai_run(tmp_path_factory.mktemp("uses"))


@pytest.fixture(autouse=True)
def _offline(offline_env):
    return offline_env


def test_breakdown_of_the_agent_judge_against_humans(devai_run):
    result = invoke("breakdown", devai_run, "--verdicts", f"devai:{ROOT / 'data' / 'devai'}", "--boot", "200")
    assert "agent_as_a_judge" in result.output and "FN minus FP" in result.output
    header = next(line for line in result.output.splitlines() if line.startswith("| verifier | capability"))
    assert header.endswith("| ci_lo | ci_hi |")  # a markdown row is never wrapped
    pooled = pl.read_csv(devai_run / "breakdown" / "breakdown.csv")
    overall = pooled.filter(pl.col("capability") == "ALL").row(0, named=True)
    assert overall["n"] == 1095 and abs(overall["error_rate"] - (overall["fp_rate"] + overall["fn_rate"])) < 1e-9
    assert overall["ci_lo"] <= overall["error_rate"] <= overall["ci_hi"]
    by_system = pl.read_csv(devai_run / "breakdown" / "by_system.csv")
    assert {"agent_as_a_judge @ GPT-Pilot", "agent_as_a_judge @ MetaGPT", "agent_as_a_judge @ OpenHands"} <= set(
        by_system.columns
    )
    assert (devai_run / "breakdown" / "gap_agent_as_a_judge.csv").exists()
    assert (devai_run / "breakdown" / "breakdown_weighted.csv").exists()


def test_breakdown_with_unmatched_verdicts_is_one_clear_line(devai_run, tmp_path):
    table = tmp_path / "verdicts.csv"
    table.write_text("criterion_id,verifier,verdict\nnope/1,human,met\nnope/1,judge,unmet\n")
    result = invoke("breakdown", devai_run, "--verdicts", str(table), ok=False)
    assert (
        result.exit_code == 2 and "no verdict matches a tagged criterion" in result.output and "fix:" in result.output
    )


def test_audit_of_a_corpus_against_the_frozen_taxonomy(devai_run, tmp_path):
    result = invoke(
        "audit",
        ROOT / "pipelines" / "paperbench.toml",
        "--taxonomy",
        devai_run / "taxonomy.json",
        "--run-dir",
        tmp_path / "audit-run",
        "-q",
    )
    assert "# Coverage audit" in result.output
    shares = pl.read_csv(tmp_path / "audit-run" / "audit" / "shares.csv")
    assert abs(shares["share"].sum() - 1) < 1e-6 and "reference_share" in shares.columns
    for name in ("task_matrix", "missing", "unmapped", "duplicates", "bundled"):
        assert (tmp_path / "audit-run" / "audit" / f"{name}.csv").exists()


def test_guidance_files_and_routing(devai_run, tmp_path):
    notes = tmp_path / "notes.md"
    notes.write_text("Plots must have labelled axes and a legend.\nSaved models live under models/saved_models.\n")
    result = invoke("guidance", devai_run, "--notes", notes, "-q")
    assert "capability files" in result.output
    routing = pl.read_csv(devai_run / "guidance" / "routing.csv")
    assert routing.height == 365 and routing["guidance_files"].null_count() == 0
    taxonomy = json.loads((devai_run / "taxonomy.json").read_text())
    for cap in taxonomy["capabilities"]:
        assert (devai_run / "guidance" / f"{cap['name']}.md").exists()
    assert len(list((devai_run / "guidance" / "tasks").glob("*.md"))) == 55
    missing = invoke("guidance", devai_run, "--notes", tmp_path / "absent.md", ok=False)
    assert missing.exit_code == 2 and "no such domain-notes file" in missing.output


def test_report_command(devai_run):
    result = invoke("report", devai_run)
    html = (devai_run / "report.html").read_text()
    assert "Report:" in result.output and 'id="taxonomy"' in html and "<svg" in html


def test_distill_then_tag_with_the_distilled_model(devai_run, tmp_path):
    result = invoke("distill", devai_run)
    assert "Held-out agreement" in result.output and (devai_run / "distilled.joblib").exists()
    out = tmp_path / "distilled-run"
    invoke(
        "tag",
        ROOT / "pipelines" / "devai.toml",
        "--taxonomy",
        devai_run / "taxonomy.json",
        "--distilled",
        devai_run / "distilled.joblib",
        "--run-dir",
        out,
        "-q",
    )
    tags = pl.read_parquet(out / "stage3_tags.parquet")
    assert tags.height == 365 and set(tags["source"]) <= {"distilled", "offline"} and "distilled" in set(tags["source"])
