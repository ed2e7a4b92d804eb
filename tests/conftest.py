from __future__ import annotations

import ast
import functools
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
from filelock import FileLock
from typer.testing import CliRunner

from taxonomy.cli import app
from taxonomy.corpus import CorpusConfig, load_corpus
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


def devai_frame() -> pl.DataFrame:
    return load_corpus(CorpusConfig(path=str(ROOT / "data" / "devai"), format="devai"), ROOT).frame


def support_csv(path: Path, n: int | None = None) -> Path:
    """A user's own CSV: the DevAI criteria under the columns of a support team's rubric."""
    frame = devai_frame().select(
        pl.col("task_id"), pl.col("text").alias("criterion"), pl.lit(2).alias("weight"), pl.col("brief")
    )
    (frame if n is None else frame.head(n)).write_csv(path)
    return path


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


@pytest.fixture
def offline_run(tmp_path) -> Path:
    """This test's own copy of the session's offline DevAI run, in tmp_path/run (its TOML tmp_path/devai.toml)."""
    return offline_devai_run(tmp_path)


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


def _devai_named(folder: Path) -> None:
    """The LLM path's Stages 1 to 2b over DevAI, stopped before the merge."""
    with FakeGeminiServer(responder=responders.model) as srv, pytest.MonkeyPatch.context() as mp:
        mp.setenv("GOOGLE_GEMINI_BASE_URL", srv.url)
        mp.setenv("GEMINI_API_KEY", API_KEY)
        mp.delenv("GOOGLE_API_KEY", raising=False)
        invoke("discover", write_pipeline(folder), "--provider", "gemini", "--run-dir", folder / "run", "-q")
        for stage in ("cluster", "canonicalize"):
            invoke(stage, folder / "run", "--provider", "gemini", "-q")


def llm_devai_named(tmp: Path) -> Path:
    """tmp/run: a copy of the session's LLM DevAI run up to its named micro-clusters (Stage 2b), for tests of the
    merge and what follows; `taxonomy run` on it sends only the merge and the tagging (its TOML tmp/devai.toml)."""
    write_pipeline(tmp)
    return copy_run(built_once("devai-llm-named", _devai_named) / "run", tmp)


@pytest.fixture(scope="session")
def llm_exported_run() -> Path:
    """One LLM-path DevAI run with every export and its report, shared by the report and export tests (read only)."""
    return built_once("devai-llm", lambda f: llm_devai_run(f, ("export", "--to", "all", "-q"), ("report",))) / "run"


# ---- the tiers: `make test` runs everything, `make test-fast` leaves out what is marked slow or e2e ----------
# (the markers are declared in pyproject.toml). A file is marked whole ("*") or by the names of its test
# functions, each with all its parameters. Slow: about a second or more on a quiet two-core machine, mostly full
# pipeline runs; e2e: something outside the test process (a built wheel, a notebook kernel, headless Chromium,
# a benchmark script, a process killed and resumed).
ALL = "*"
MARKED: dict[str, dict[str, str | tuple[str, ...]]] = {
    "e2e": {
        "test_accounting.py": ALL,
        "test_heldout_benchmark.py": ALL,
        "test_install.py": ALL,
        "test_notebook.py": ("test_walkthrough_executes",),
        "test_readme.py": ALL,
        "test_resume.py": ALL,
        "test_scale_benchmark.py": ALL,
        "test_tokens_benchmark.py": ALL,
        "test_batch.py": ("test_kill_9_while_polling_then_the_same_command_polls_the_same_job",),
        "test_report.py": (
            "test_in_headless_chromium_search_filters_and_hover_shows_text",
            "test_in_headless_chromium_principle_filters_and_markers",
            "test_report_in_chromium_filters_a_folded_table_and_stays_short",
        ),
        "test_stability.py": ("test_report_shows_the_figures_and_the_least_sure_criteria_in_chromium",),
    },
    "slow": {
        "test_batch.py": ALL,
        "test_cli_inputs.py": ALL,
        "test_cluster_k.py": ALL,
        "test_small_rubrics.py": ALL,
        "test_context_cache.py": ALL,
        "test_discover.py": ALL,
        "test_edit.py": ALL,
        "test_every_rubric.py": ALL,
        "test_fit_apply.py": ALL,
        "test_lint_llm.py": ALL,
        "test_merge_candidates.py": ALL,
        "test_offline_run.py": ALL,
        "test_openai_run.py": ALL,
        "test_paper_tables.py": ALL,
        "test_provenance.py": ALL,
        "test_run_like.py": ALL,
        "test_runner_limits.py": ALL,
        "test_stability.py": ALL,
        "test_stages.py": ALL,
        "test_bad_input.py": (
            "test_a_failed_invocation_loses_nothing_written_before",
            "test_breakdown_unknown_column_and_negative_boot",
            "test_damaged_artifacts_from_run_report_breakdown_guidance",
            "test_run_from_a_newer_version_is_refused",
        ),
        "test_cli_corpus_file.py": (
            "test_outputs_go_to_the_folder_the_command_runs_in_not_beside_the_toml",
            "test_run_a_bare_csv_detects_columns_writes_its_toml_and_resumes_from_it",
            "test_tag_and_audit_take_a_bare_csv_whose_column_is_criterion",
            "test_summary_table_keeps_whole_names_when_not_a_terminal",
            "test_rename_rewrites_the_old_name_in_the_description_and_split_keeps_it",
        ),
        "test_cli_help.py": ("test_every_command_is_listed_and_has_help", "test_no_help_text_is_cut_off"),
        "test_cluster.py": ("test_two_level_path_matches_quality",),
        "test_corpus.py": ("test_pipeline_tomls_point_at_the_bundle",),
        "test_api.py": ("test_fit_a_file_with_a_pipelines_settings_and_overrides", "test_fit_through_the_llm_path"),
        "test_diff.py": ("test_diff_command_and_report_against", "test_an_edit_split_reads_as_a_split_not_a_rename"),
        "test_estimate.py": ALL,
        "test_export.py": ALL,
        "test_fuzz.py": ("test_two_hundred_malformed_inputs_never_end_in_a_traceback",),
        "test_guidance.py": ("test_llm_second_run_is_answered_from_cache",),
        "test_lint.py": (
            "test_taxonomy_run_finishes_on_a_criterion_scored_both_ways",
            "test_taxonomy_run_prints_the_lint_line",
        ),
        "test_providers.py": ("test_vertex_embeds_labels_with_text_embedding_005",),
        "test_quality.py": ("test_main_offline_devai_smoke",),
        "test_report.py": (
            "test_checked_in_fixture_matches_builder_and_renders",
            "test_constraint_status_reads_recorded_violations_and_tolerates_their_absence",
            "test_every_criterion_is_in_the_table_data",
            "test_low_confidence_none_of_the_above_and_stage1_failures",
        ),
        "test_validate.py": ("test_each_violation_is_reasked_with_its_fix",),
    },
}
# A test that asks for one of these fixtures needs a full run (or a whole bundled corpus) and is slow wherever it is.
SLOW_FIXTURES = frozenset(
    {
        "built",
        "corpora",
        "devai_run",
        "devai_split",
        "fitted",
        "llm_exported_run",
        "llm_run",
        "offline_run",
        "paperbench",
        "script_run",
        "stage1",
        "support_run",
        "trained",
    }
)
TIER_ORDER = ("e2e", "slow")  # longest first, so that under xdist no long file starts last


def _tier_marks(item: pytest.Item) -> list[str]:
    names = [(marker, files.get(item.path.name)) for marker, files in MARKED.items()]
    marks = [marker for marker, listed in names if listed == ALL or (listed and item.originalname in listed)]
    marks += [m.name for m in item.iter_markers() if m.name in TIER_ORDER]  # set in the file itself
    return marks + ["slow"] if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())) else marks


def _stale_names(items: list[pytest.Item]) -> list[str]:
    """Names listed in MARKED that a collected file no longer defines (renamed or removed tests)."""
    modules = {item.path.name: item.module for item in items if isinstance(item, pytest.Function)}
    return [
        f"{marker}: {file}::{name}"
        for marker, files in MARKED.items()
        for file, listed in files.items()
        if file in modules and listed != ALL
        for name in listed
        if not hasattr(modules[file], name)
    ]


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by the marks added here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks each test with its tier and puts the files with the longest tests first (a file's tests stay
    together and in their order), so that under xdist no long test starts last."""
    stale = _stale_names(items)
    if stale:
        raise pytest.UsageError(f"tests/conftest.py MARKED names tests that do not exist: {', '.join(stale)}")
    rank: dict[Path, int] = {}
    for item in items:
        marks = _tier_marks(item)
        for marker in marks:
            item.add_marker(marker)
        tier = min((TIER_ORDER.index(m) for m in marks), default=len(TIER_ORDER))
        rank[item.path] = min(rank.get(item.path, tier), tier)
    items.sort(key=lambda item: rank[item.path])


def _fixture_scope(node: ast.FunctionDef) -> str | None:
    """A fixture's scope as the scheduler needs it: "module", "autouse" (of module scope), "" (another fixture);
    None for a plain function."""
    for dec in node.decorator_list:
        if isinstance(dec, ast.Call) and ast.unparse(dec.func) in ("pytest.fixture", "fixture"):
            words = {k.arg: ast.unparse(k.value) for k in dec.keywords}
            if words.get("scope") == "'module'":
                return "autouse" if words.get("autouse") == "True" else "module"
            return ""
        if ast.unparse(dec) in ("pytest.fixture", "fixture"):
            return ""
    return None


@functools.cache
def _shared_tests(file: str) -> frozenset[str] | None:
    """The tests of a file that use one of its module-scoped fixtures (directly or through its other fixtures), so
    must share a worker; None when every test must (an autouse one)."""
    functions = [n for n in ast.parse((ROOT / file).read_text(encoding="utf-8")).body if isinstance(n, ast.FunctionDef)]
    scopes = {f.name: _fixture_scope(f) for f in functions}
    if "autouse" in scopes.values():
        return None
    # What a function asks for: its parameters, and the names it may pass to request.getfixturevalue.
    params = {
        f.name: {a.arg for a in f.args.args}
        | {c.value for c in ast.walk(f) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
        for f in functions
    }
    shared = {name for name, scope in scopes.items() if scope == "module"}
    grown = True
    while grown:  # a function-scoped fixture that asks for a shared one is shared too
        more = {n for n, scope in scopes.items() if scope == "" and params[n] & shared} - shared
        shared |= more
        grown = bool(more)
    return frozenset(n for n, scope in scopes.items() if scope is None and params[n] & shared)


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`-n N` (xdist's default `--dist load`) with one change: a file that defines a module-scoped fixture runs
    whole on one worker, so the fixture is built once; other tests go one by one to whichever worker is free.
    xdist's own `--dist loadgroup` would do this from marks, but its grouping is silently lost with pytest 9.2
    (pytest-xdist issue 1386). The queue keeps the collection's order, longest files first."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByFileWhereShared(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file, _, test = nodeid.partition("::")
            shared = _shared_tests(file)
            return file if shared is None or test.split("[", 1)[0] in shared else nodeid

    config.option.loadscopereorder = False  # LoadScopeScheduling would sort the queue by unit size instead
    return ByFileWhereShared(config, log)
