from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock
from typer.testing import CliRunner

from taxonomy.cli import app
from taxonomy.run import RunDir
from tests import responders
from tests.fake_gemini import FakeGeminiServer

ROOT = Path(__file__).resolve().parent.parent
API_KEY = "gemini-test-key-must-never-leak-0123456789"


def discover_command(server, toml: Path, run_dir: Path, *extra: str) -> tuple[list[str], dict]:
    """`taxonomy discover` against the fake server as a process of its own (command, environment), so a
    test can kill it mid-run and start it again."""
    env = {**os.environ, "GOOGLE_GEMINI_BASE_URL": server.url, "GEMINI_API_KEY": API_KEY}
    cmd = [sys.executable, "-m", "taxonomy", "discover", str(toml), "--provider", "gemini", *extra]
    return [*cmd, "--run-dir", str(run_dir), "-q"], env


@pytest.fixture
def server():
    with FakeGeminiServer(responder=responders.model) as srv:
        yield srv


@pytest.fixture
def gemini_env(server, monkeypatch):
    """The SDK's own environment variables point it at the local server."""
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
    monkeypatch.setenv("GEMINI_API_KEY", API_KEY)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    return server


@pytest.fixture
def offline_env(monkeypatch):
    for key in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(key, raising=False)


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    """A user's folder, the current directory of every command."""
    work = tmp_path / "support"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def refused(*args) -> str:
    """The command stops on bad input: exit 2 and one error line with a fix."""
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "fix: " in errors[0], result.output
    return errors[0]


def write_pipeline(tmp_path: Path, corpus: str = "devai", extra: str = "", **corpus_keys) -> Path:
    """A pipeline TOML over a bundled corpus, with fast backoff so retry tests take milliseconds."""
    keys = "".join(f"{k} = {v!r}\n" if not isinstance(v, list) else f"{k} = {v!r}\n" for k, v in corpus_keys.items())
    path = tmp_path / f"{corpus}.toml"
    path.write_text(
        f'name = "{corpus}"\n'
        f'[corpus]\npath = "{ROOT / "data" / corpus}"\nformat = "{corpus}"\n{keys}'
        f"[llm]\nbackoff_initial_s = 0.01\nbackoff_max_s = 0.05\nconcurrency = 8\n"
        f'[output]\ndir = "{tmp_path / "outputs"}"\n{extra}'.replace("'", '"')
    )
    return path


def invoke(*args: str, ok: bool = True):
    result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, result.output
    return result


def files_text(folder: Path) -> str:
    """Everything written under a folder, as text (binary files decoded leniently)."""
    return "".join(p.read_bytes().decode("utf-8", "replace") for p in folder.rglob("*") if p.is_file())


def built_once(name: str, build: Callable[[Path], None]) -> Path:
    """The folder `build(folder)` fills, built once per test session and then only read.

    Under pytest-xdist the workers share the session's temporary root: the first to ask builds the folder under
    a file lock while the others wait, then all read it, so N workers do not build it N times. A build that
    failed is started again by the next test that asks."""
    base = _TMP["factory"].getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder, done = root / f"shared-{name}", root / f"shared-{name}.done"
    with FileLock(str(root / f"shared-{name}.lock")):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


_TMP: dict[str, pytest.TempPathFactory] = {}


@pytest.fixture(scope="session", autouse=True)
def _tmp_factory(tmp_path_factory):
    """Lets built_once, a plain function like the run helpers that call it, find the session's temporary root."""
    _TMP["factory"] = tmp_path_factory


def _offline(*commands: tuple) -> None:
    with pytest.MonkeyPatch.context() as mp:
        for key in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
            mp.delenv(key, raising=False)
        for args in commands:
            invoke(*args)


def copy_run(shared: Path, tmp: Path) -> Path:
    """A copy of a shared run in tmp/run for a test to change, its manifest pointed at tmp as if the run had been
    made there: commands that read the settings back write their outputs and answer cache under tmp, never into
    the shared folder."""
    shutil.copytree(shared, tmp / "run")
    run = RunDir(tmp / "run")
    run.manifest["config_dir"] = str(tmp)
    run.manifest["settings"]["output"]["dir"] = str(tmp / "outputs")
    run.save_manifest()
    return tmp / "run"


def _devai_offline(folder: Path) -> None:
    _offline(("run", write_pipeline(folder), "--run-dir", folder / "run", "-q", "--no-report"))


def offline_devai_run(tmp: Path, *then: tuple[str, ...], pipeline: Path | None = None) -> Path:
    """A full offline run over the bundled DevAI corpus in tmp/run (no key in the environment), then
    each command of `then` on it (the run directory is appended). `pipeline` defaults to a test TOML
    (tmp/devai.toml), whose run is built once per session and copied here."""
    if pipeline is None:
        write_pipeline(tmp)
        copy_run(built_once("devai-offline", _devai_offline) / "run", tmp)
    else:
        _offline(("run", pipeline, "--run-dir", tmp / "run", "-q", "--no-report"))
    _offline(*[(args[0], tmp / "run", *args[1:]) for args in then])
    return tmp / "run"


def llm_devai_run(tmp: Path, *then: tuple[str, ...]) -> Path:
    """A full LLM-path run over the bundled DevAI corpus in tmp/run: Gemini through the real SDK against
    the local test server (its merge answers decide P2/P3), then each command of `then` on it, the server
    still up (an export drafts its guidance with the LLM)."""
    with FakeGeminiServer(responder=responders.model) as srv, pytest.MonkeyPatch.context() as mp:
        mp.setenv("GOOGLE_GEMINI_BASE_URL", srv.url)
        mp.setenv("GEMINI_API_KEY", API_KEY)
        mp.delenv("GOOGLE_API_KEY", raising=False)
        invoke("run", write_pipeline(tmp), "--provider", "gemini", "--run-dir", tmp / "run", "-q", "--no-report")
        for args in then:
            invoke(args[0], tmp / "run", *args[1:])
    return tmp / "run"


@pytest.fixture(scope="session")
def llm_exported_run() -> Path:
    """One LLM-path DevAI run with every export and its report, shared by the report and export tests (read only)."""
    return built_once("devai-llm", lambda f: llm_devai_run(f, ("export", "--to", "all", "-q"), ("report",))) / "run"
