"""The wheel carries everything the package reads, and the installed package runs from a folder that is
not the checkout: the LLM path (prompts rendered from the wheel, the real SDK against the local
Gemini-shaped server) and the offline path on a bare CSV, writing nowhere else.

.ci/run does the same with a fresh venv and `pip install` of the wheel with its dependencies; here the
wheel is installed with --no-deps into a folder put first on the path of this interpreter, so the test
takes seconds."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import polars as pl
import pytest

from taxonomy.corpus import CorpusConfig, load_corpus
from tests import responders
from tests.conftest import API_KEY, ROOT
from tests.fake_gemini import FakeGeminiServer


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    # Built from a copy of the tracked files, so the checkout gets no build/ folder and nothing untracked ships.
    src = tmp_path_factory.mktemp("src")
    tracked = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    )
    for name in filter(None, tracked):
        if (ROOT / name).is_file() and not name.startswith(("data/", "benchmarks/", "notebooks/")):
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            (src / name).write_bytes((ROOT / name).read_bytes())
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "-q", "-w", str(dist)],
        check=True,
        capture_output=True,
        text=True,
    )
    (dist / "build.log").write_text(built.stdout + built.stderr)
    (found,) = dist.glob("rubric_taxonomy-*.whl")
    return found


def test_the_build_is_quiet(wheel):
    """`make demo` installs the package first: setuptools' 40-line warnings about the packaging metadata
    (a data folder not in `packages`, a license or readme form it cannot read) are the user's first output."""
    log = (wheel.parent / "build.log").read_text()
    for warning in ("BuildBackendWarning", "SetuptoolsDeprecationWarning", "SetuptoolsWarning", "!!"):
        assert warning not in log, log


def test_wheel_carries_every_package_template_and_schema(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in sorted((ROOT / "prompts").glob("*.j2")):
        assert f"taxonomy_prompts/{path.name}" in names
    for pattern in ("taxonomy/**/*.py", "taxonomy/**/*.j2", "taxonomy/**/*.json"):
        for path in (ROOT / "taxonomy").glob(pattern.removeprefix("taxonomy/")):
            if "__pycache__" not in path.parts:
                assert path.relative_to(ROOT).as_posix() in names, f"{path} is not in the wheel"
    assert not any(n.startswith(("data/", "tests/", "pipelines/")) for n in names)


@pytest.fixture(scope="module")
def site(wheel, tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    return target


def installed(site: Path, cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`taxonomy ARGS` from the installed wheel: its folder first on the path, the checkout nowhere on it."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import taxonomy, taxonomy_prompts; "
        "assert taxonomy.__file__.startswith(sys.argv[1]) and taxonomy_prompts.__file__.startswith(sys.argv[1]), "
        "taxonomy.__file__; "
        "from taxonomy.cli import main; sys.argv = ['taxonomy'] + sys.argv[2:]; main()"
    )
    full = {k: v for k, v in os.environ.items() if k not in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "PYTHONPATH")}
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", code, str(site), *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=600
    )


@pytest.fixture
def user_csv(tmp_path) -> Path:
    frame = load_corpus(CorpusConfig(path=str(ROOT / "data" / "devai"), format="devai"), ROOT).frame.head(80)
    work = tmp_path / "work"
    work.mkdir()
    frame.select(pl.col("task_id").alias("task"), pl.col("text").alias("criterion")).write_csv(work / "support.csv")
    return work / "support.csv"


def _checkout_state() -> str:
    """Every changed, new or ignored path of the checkout (ignored folders collapsed)."""
    return subprocess.run(
        ["git", "status", "--porcelain", "--ignored"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def test_installed_wheel_runs_the_llm_path_from_another_folder(site, user_csv):
    work = user_csv.parent
    with FakeGeminiServer(responder=responders.model) as srv:
        env = {"GOOGLE_GEMINI_BASE_URL": srv.url, "GEMINI_API_KEY": API_KEY}
        estimate = installed(site, work, "estimate", "support.csv", "--provider", "gemini", env=env)
        assert estimate.returncode == 0, estimate.stderr
        assert "TemplateNotFound" not in estimate.stderr and "| total |" in estimate.stdout
        run = installed(site, work, "run", "support.csv", "--provider", "gemini", "-q", env=env)
        assert run.returncode == 0, run.stdout + run.stderr
        assert srv.count("generate") > 0
    out = work / "outputs" / "support" / "gemini-gemini-3-flash-preview"
    assert (out / "report.html").is_file() and (out / "taxonomy.md").is_file() and (out / "pipeline.toml").is_file()
    assert {p.name for p in work.iterdir()} == {"support.csv", "outputs"}
    assert API_KEY not in "".join(p.read_bytes().decode("utf-8", "replace") for p in work.rglob("*") if p.is_file())


def test_installed_wheel_runs_a_bare_csv_offline_and_writes_only_there(site, user_csv):
    work = user_csv.parent
    before = _checkout_state()
    run = installed(site, work, "run", "support.csv")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Backend: offline" in run.stderr and 'columns used: text = "criterion", task_id = "task"' in run.stderr
    assert (work / "outputs" / "support" / "offline" / "report.html").is_file()
    assert _checkout_state() == before  # the checkout is not the user's folder: nothing lands in it
