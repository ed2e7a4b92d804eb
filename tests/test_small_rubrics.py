"""Small rubrics with no key (issue 41 item 3): the merge bounds hold wherever they can, and where a rubric is
too small for them the run says why in one line and still writes the taxonomy it can, exit 0."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import polars as pl

from tests.conftest import ROOT, invoke

SUPPORT = ROOT / "tests" / "fixtures" / "scripts" / "support_en_120.csv"


def _slice(n: int, folder: Path) -> Path:
    path = folder / f"support_first{n}.csv"
    pl.read_csv(SUPPORT).head(n).write_csv(path)
    return path


def _shares(run_dir: Path) -> list[float]:
    primary = pl.read_parquet(run_dir / "stage3_tags.parquet")["primary"]
    return primary.value_counts(normalize=True)["proportion"].to_list()


def test_forty_criteria_make_eight_to_ten_capabilities_under_forty_percent(offline_env, tmp_path):
    """The first 40 rows got 2 capabilities holding 85% and 15% under the relaxed bounds."""
    run_dir = tmp_path / "run"
    result = invoke("run", _slice(40, tmp_path), "--run-dir", run_dir, "-q", "--no-report")
    shares = _shares(run_dir)
    assert 8 <= len(shares) <= 10 and max(shares) <= 0.40 and min(shares) >= 0.02, shares
    assert "merge" not in tomllib.loads((run_dir / "pipeline.toml").read_text()), "no relaxed bounds"
    assert "cannot make" not in result.output and "relaxed" not in result.output


def test_a_slice_that_was_refused_runs(offline_env, tmp_path):
    """The first 80 rows: 34 criteria got the fallback label `unmarked`, which held 42.5%, and the run exited 2."""
    run_dir = tmp_path / "run"
    invoke("run", _slice(80, tmp_path), "--run-dir", run_dir, "-q", "--no-report")
    labels = pl.read_parquet(run_dir / "stage1_labels.parquet")["labels"].explode()
    assert "unmarked" not in " ".join(labels.to_list()) and labels.n_unique() >= 20
    assert max(_shares(run_dir)) <= 0.40


def test_a_rubric_too_small_for_the_bounds_says_why_and_gets_its_taxonomy(offline_env, tmp_path):
    run_dir = tmp_path / "run"
    result = invoke("run", _slice(5, tmp_path), "--run-dir", run_dir, "--no-report")
    notes = [line for line in result.output.splitlines() if line.startswith("note: 5 criteria cannot make 8-10")]
    assert len(notes) == 1 and "so this run allows" in notes[0], result.output
    taxonomy = json.loads((run_dir / "taxonomy.json").read_text())
    assert 1 <= len(taxonomy["capabilities"]) <= 5 and not taxonomy.get("violations")
    merge = tomllib.loads((run_dir / "pipeline.toml").read_text())["merge"]
    assert merge["min_caps"] <= 5 and merge["max_share"] <= 1.0
