"""A run folder that cannot be written: a file where a folder belongs, a folder where a file belongs, a
read-only folder. Each is one line naming the place and the fix, exit 2, and nothing already written is lost;
a finished run in a read-only folder still reruns and exports elsewhere."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import API_KEY, ROOT, invoke, refused, write_pipeline

RUBRIC = ROOT / "benchmarks" / "heldout" / "report_writing.csv"
TAXONOMY = Path(sys.executable).parent / "taxonomy"
AS_ROOT = pytest.mark.skipif(
    os.geteuid() == 0 and not shutil.which("setpriv"), reason="root ignores chmod without setpriv to drop that power"
)


@pytest.fixture(autouse=True)
def _offline(offline_env):
    return offline_env


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_run_into_a_folder_under_a_file_is_one_line(tmp_path):
    (tmp_path / "afile").write_text("not a folder")
    error = refused("run", RUBRIC, "--run-dir", tmp_path / "afile" / "run", "-q", "--no-report")
    assert f"{tmp_path / 'afile'} is a file, not a folder" in error and f"fix: move {tmp_path / 'afile'} away" in error


def test_report_where_a_folder_holds_its_place_is_one_line(tmp_path, offline_run):
    run = offline_run
    (run / "report.html").mkdir()
    before = _files(run)
    error = refused("report", run)
    assert f"{run / 'report.html'}: cannot be written (a folder is in the place of this file)" in error
    assert _files(run) == before


def test_an_edit_whose_backup_cannot_be_written_is_one_line(tmp_path, offline_run):
    run = offline_run
    (run / "edits").write_text("not a folder")
    old = json.loads((run / "taxonomy.json").read_text())["capabilities"][0]["name"]
    before = _files(run)
    error = refused("edit", run, "rename", old, "check_the_recommendation_made_capability")
    assert f"{run / 'edits'} is a file, not a folder" in error
    assert _files(run) == before  # the taxonomy, its tags and the manifest as they were


@AS_ROOT
@pytest.mark.parametrize("command", ["run", "report", "edit", "answer cache"])
def test_a_read_only_run_folder_is_one_line(tmp_path, offline_run, command):
    """The user's case: PermissionError. Root writes through chmod 555, so root runs the command without
    CAP_DAC_OVERRIDE (setpriv), as an ordinary user would meet it."""
    run = offline_run
    before = _files(run)
    old = json.loads((run / "taxonomy.json").read_text())["capabilities"][0]["name"]
    args = {
        "run": ["run", write_pipeline(tmp_path), "--run-dir", run, "-q", "--no-report", "--force", "tag"],
        "answer cache": [
            "run",
            write_pipeline(tmp_path),
            "--run-dir",
            tmp_path / "run2",
            "-q",
            "--no-report",
            "--provider",
            "gemini",
        ],
        "report": ["report", run],
        "edit": ["edit", run, "rename", old, "check_the_recommendation_made_capability"],
    }[command]
    if command == "answer cache":  # the run folder can be written, the answer cache's folder (output.dir/NAME) cannot
        run = tmp_path / "outputs" / "devai"
        run.mkdir(parents=True)
        before = _files(run)
    run.chmod(0o555)
    drop = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"] if os.geteuid() == 0 else []
    env = {k: v for k, v in os.environ.items() if k not in ("GEMINI_API_KEY", "GOOGLE_API_KEY")}
    if command == "answer cache":  # only a model's answers are cached; the cache stops the run before any call
        env.update(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=f"http://127.0.0.1:{_closed_port()}")
    try:
        done = subprocess.run(
            [*drop, str(TAXONOMY), *map(str, args)], capture_output=True, text=True, timeout=120, env=env
        )
    finally:
        run.chmod(0o755)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert len(errors) == 1 and "cannot be written (permission denied); fix: make" in errors[0], done.stderr
    assert _files(run) == before


def _as_a_user(args: list, cwd: Path) -> subprocess.CompletedProcess:
    """The command as an ordinary user meets a folder without write permission (root drops CAP_DAC_OVERRIDE)."""
    drop = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"] if os.geteuid() == 0 else []
    env = {k: v for k, v in os.environ.items() if k not in ("GEMINI_API_KEY", "GOOGLE_API_KEY")}
    return subprocess.run(
        [*drop, str(TAXONOMY), *map(str, args)], capture_output=True, text=True, timeout=300, env=env, cwd=cwd
    )


@AS_ROOT
@pytest.mark.e2e
def test_a_finished_run_in_a_read_only_folder_reruns_and_exports_elsewhere(tmp_path, offline_run, offline_env):
    run = offline_run
    pipeline = write_pipeline(tmp_path)
    rerun = ["run", pipeline, "--run-dir", run, "-q"]
    for args in (rerun, ["guidance", run, "-q"], rerun):  # finished, its report listing the guidance
        invoke(*args)
    before = _files(run)
    for folder in [run, *(p for p in run.rglob("*") if p.is_dir())]:
        folder.chmod(0o555)
    try:
        again = _as_a_user(rerun, tmp_path)
        export = _as_a_user(["export", run, "--to", "jsonl", "--out", tmp_path / "elsewhere"], tmp_path)
    finally:
        for folder in [run, *(p for p in run.rglob("*") if p.is_dir())]:
            folder.chmod(0o755)
    assert again.returncode == 0 and "Done in" in again.stdout, again.stderr[-2000:]
    assert export.returncode == 0, export.stderr[-2000:]
    assert (tmp_path / "elsewhere" / "routing.jsonl").is_file()
    assert "not listed in the run's manifest" in export.stdout + export.stderr
    assert _files(run) == before
