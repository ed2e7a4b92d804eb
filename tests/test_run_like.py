"""`taxonomy run FILE --like RUN`: where the corpus agrees, a rerun keeps the earlier run's capability names."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from taxonomy.diff import SAME, diff_sides
from taxonomy.like import check_like
from tests.conftest import ROOT, invoke, llm_devai_run, offline_devai_run, refused, write_pipeline

INSTANCES = ROOT / "data" / "devai" / "devai" / "instances"


def _ninety_percent(tmp: Path) -> Path:
    """DevAI without every tenth task (the 10%-drop perturbation of benchmarks/stability.py), as a corpus folder."""
    folder = tmp / "devai90"
    (folder / "devai" / "instances").mkdir(parents=True)
    for i, task in enumerate(sorted(INSTANCES.iterdir())):
        if i % 10 != 3:
            shutil.copy(task, folder / "devai" / "instances" / task.name)
    return folder


def _subset_toml(tmp: Path, source: Path) -> Path:
    text = source.read_text().replace(source.read_text().split("path = ", 1)[1].split("\n", 1)[0], "PATH")
    toml = tmp / "devai90.toml"
    output = "" if "[output]" in text else f'\n[output]\ndir = "{tmp}"\n'
    toml.write_text(text.replace("PATH", json.dumps(str(_ninety_percent(tmp)))) + output)
    return toml


def _names(run: Path) -> list[str]:
    return [c["name"] for c in json.loads((run / "taxonomy.json").read_text())["capabilities"]]


def _matched_names_equal(full: Path, subset: Path) -> int:
    """Every capability the two runs share (matched as diff matches, by criterion text) has one name; how many."""
    matches = [m for m in diff_sides(check_like(full), check_like(subset)).matches if m.jaccard >= SAME]
    assert all(m.a == m.b for m in matches), [(m.a, m.b, round(m.jaccard, 2)) for m in matches if m.a != m.b]
    return len(matches)


def test_offline_rerun_on_ninety_percent_of_the_tasks_keeps_the_names(tmp_path, offline_env):
    full = offline_devai_run(tmp_path / "full", pipeline=ROOT / "pipelines" / "devai.toml")
    toml = _subset_toml(tmp_path, ROOT / "pipelines" / "devai.toml")
    plain = tmp_path / "plain"
    invoke("run", toml, "--run-dir", plain, "-q", "--no-report")
    with pytest.raises(AssertionError):  # without --like, the capabilities both runs hold are named anew
        _matched_names_equal(full, plain)
    like = tmp_path / "like"
    result = invoke("run", toml, "--run-dir", like, "-q", "--no-report", "--like", full)
    line = next(x for x in result.output.splitlines() if x.startswith("Names: kept "))
    assert f"of {len(_names(like))} capability names from {full}" in line
    matched = _matched_names_equal(full, like)
    assert matched >= 6 and int(line.split()[2]) >= matched
    # the rest of the run follows the names: tags, taxonomy.md, and a later run has nothing to redo
    assert f"`{_names(like)[0]}`" in (like / "taxonomy.md").read_text()
    again = invoke("run", toml, "--run-dir", like, "-q", "--no-report", "--like", full)
    assert "recomputing" not in again.output and line in again.output


def test_llm_rerun_on_ninety_percent_of_the_tasks_keeps_the_names(tmp_path, gemini_env):
    (tmp_path / "full").mkdir()
    full = llm_devai_run(tmp_path / "full")
    toml = _subset_toml(tmp_path, write_pipeline(tmp_path / "full"))
    like = tmp_path / "like"
    result = invoke("run", toml, "--provider", "gemini", "--run-dir", like, "-q", "--no-report", "--like", full)
    assert any(x.startswith("Names: kept ") for x in result.output.splitlines())
    assert _matched_names_equal(full, like) >= 1
    invoke("report", like)  # the uses accept the renamed taxonomy's tags


def test_like_that_is_not_a_run_stops_before_anything_runs(tmp_path, offline_env):
    toml = write_pipeline(tmp_path)
    error = refused("run", toml, "--run-dir", tmp_path / "new", "-q", "--like", tmp_path)
    assert str(tmp_path) in error
    assert not (tmp_path / "new").exists()
