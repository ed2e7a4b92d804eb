"""Issue 43: the paper cuts a new user met. Each test goes through the CLI (or the public API) and
holds the house form: one line naming the file, the row where there is one, and the fix; exit 2."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import polars as pl
import pytest

from taxonomy.config import LabelRules, LLMConfig, load_config
from taxonomy.corpus import load_corpus
from taxonomy.shares import primary_shares
from taxonomy.prompts import render
from taxonomy.taxonomy_io import load_taxonomy
from taxonomy.validate import label_problems
from tests.conftest import API_KEY, ROOT, invoke, llm_devai_run, offline_devai_run, refused, write_pipeline

RUBRIC = ROOT / "benchmarks" / "heldout" / "report_writing.csv"
TAXONOMY = Path(sys.executable).parent / "taxonomy"


@pytest.fixture(autouse=True)
def _offline(offline_env):
    return offline_env


# ---- 4. a misspelt TOML key ---------------------------------------------------------------------------------


@pytest.mark.parametrize("named", [True, False])
def test_a_misspelt_key_is_named_with_the_known_one(tmp_path, named):
    toml = tmp_path / "p.toml"
    toml.write_text(('name = "p"\n' if named else "") + f'[corpus]\npth = "{RUBRIC}"\n')
    error = refused("run", toml)
    assert "key corpus.pth: not a setting; did you mean corpus.path?" in error and "fix: rename pth to path" in error
    assert "remove corpus.path" not in error and "key name" not in error


def test_a_missing_path_is_asked_for_not_removed(tmp_path):
    toml = tmp_path / "p.toml"
    toml.write_text('[corpus]\nformat = "table"\n')
    error = refused("run", toml)
    assert "key corpus.path: required and missing; fix: add path = ... under [corpus]" in error


# ---- 5. UTF-16 and UTF-32 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32", "utf-32-le"])
@pytest.mark.parametrize("suffix", ["csv", "jsonl"])
def test_utf16_and_utf32_files_with_a_bom_are_read(tmp_path, encoding, suffix):
    rows = [("t1", f"The report states the measured accuracy of experiment {i}.") for i in range(6)]
    text = (
        "task_id,criterion\n" + "".join(f'{t},"{c}"\n' for t, c in rows)
        if suffix == "csv"
        else "".join(json.dumps({"task_id": t, "criterion": c}) + "\n" for t, c in rows)
    )
    # "utf-16"/"utf-32" write a native-order mark; the -be/-le codecs write none, so it is added by hand.
    data = text.encode(encoding) if encoding.count("-") == 1 else ("\ufeff" + text).encode(encoding)
    corpus = tmp_path / f"r.{suffix}"
    corpus.write_bytes(data)
    toml = tmp_path / "p.toml"
    toml.write_text(f'name = "p"\n[corpus]\npath = "{corpus}"\n', encoding="utf-16")
    result = invoke("init", corpus, "--out", tmp_path / "init.toml")
    assert "(6 criteria)" in result.output
    frame = load_corpus(load_config(toml).corpus, toml.parent).frame
    assert frame["text"].to_list() == [c for _, c in rows]


def test_utf16_verdicts_taxonomy_and_notes_are_read(tmp_path, offline_run):
    """Every other text a user hands in: verdict tables, a hand-edited taxonomy.json, domain notes."""
    run = _copy(offline_run, tmp_path)
    saved = json.loads((run / "taxonomy.json").read_text())
    (run / "taxonomy.json").write_text(json.dumps(saved), encoding="utf-16")
    assert load_taxonomy(run / "taxonomy.json").content_hash == saved["content_hash"]
    ids = pl.read_parquet(run / "criteria.parquet")["criterion_id"].head(20).to_list()
    for name, verdicts in (("people", [i % 2 for i in range(20)]), ("judge", [1] * 20)):
        (tmp_path / f"{name}.csv").write_text(
            "criterion_id,verdict\n" + "".join(f"{c},{v}\n" for c, v in zip(ids, verdicts)), encoding="utf-16"
        )
    result = invoke(
        "breakdown",
        run,
        "--verdicts",
        f"human={tmp_path / 'people.csv'}",
        "--verdicts",
        f"judge={tmp_path / 'judge.csv'}",
        "--boot",
        "0",
    )
    assert "joined 20 of 20 verifier verdicts" in result.output
    (tmp_path / "notes.md").write_text("Units are SI unless stated.\n", encoding="utf-32")
    invoke("guidance", run, "--notes", tmp_path / "notes.md", "-q")


def test_utf16_without_a_bom_gets_a_fix_that_keeps_it(tmp_path):
    corpus = tmp_path / "r.csv"
    corpus.write_bytes("criterion\nThe report states the value.\n".encode("utf-16-le"))
    error = refused("init", corpus, "--out", tmp_path / "p.toml")
    assert "r.csv: line 1: holds NUL bytes: UTF-16 or UTF-32 written without a byte-order mark" in error
    assert "iconv -f utf-16le -t utf-8" in error and "latin1" not in error


# ---- 6. parse errors name the line -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, data, where",
    [
        (
            "extra.csv",
            "task_id,criterion\nt,The report states one value.\nt,The report states two,extra\nt,Three.\n",
            "extra.csv: line 3: 3 fields where the header (line 1) has 2",
        ),
        (
            "extra.tsv",
            'task_id\tcriterion\nt\tOne value.\nt\t"A quoted\nfield"\nt\tTwo\textra\n',
            "extra.tsv: line 5: 3 fields where the header (line 1) has 2",
        ),
        (
            "open.csv",
            'task_id,criterion\nt,The report states one value.\nt,"The report states two\nt,three\n',
            "open.csv: line 3: a quoted field starts on this line and its closing quote never comes",
        ),
    ],
)
def test_a_table_parse_error_names_its_line(tmp_path, name, data, where):
    (tmp_path / name).write_text(data)
    error = refused("init", tmp_path / name, "--out", tmp_path / "p.toml")
    assert where in error and "fix: make every row have as many fields as the header" in error


def test_a_carriage_return_inside_a_field_is_read(tmp_path):
    """Old Mac line ends inside an unquoted field: polars keeps them as text; the line finder must not stop the run."""
    (tmp_path / "cr.csv").write_bytes(
        b"task_id,criterion\r\nt,The report states one value.\r\nt,The report states \rtwo\r\nt,three\r\n"
    )
    assert "(3 criteria)" in invoke("init", tmp_path / "cr.csv", "--out", tmp_path / "p.toml").output


@pytest.mark.parametrize(
    "name, data, where",
    [
        ("v.csv", "criterion_id,verdict\na,1\nb,1,extra\n", "v.csv: line 3: 3 fields where the header (line 1) has 2"),
        ("v.jsonl", '{"criterion_id": "a", "verdict": 1}\n{"criterion_id": "b",\n', "v.jsonl: line 2: invalid JSON"),
    ],
)
def test_a_verdict_file_parse_error_names_its_line(tmp_path, offline_run, name, data, where):
    (tmp_path / name).write_text(data)
    assert where in refused("breakdown", offline_run, "--verdicts", f"human={tmp_path / name}")


# ---- 1. an output folder that cannot be written ---------------------------------------------------------


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory) -> Path:
    """One finished offline run of the bundled DevAI corpus, copied by each test that changes it."""
    return offline_devai_run(tmp_path_factory.mktemp("paper-cuts"))


def _copy(run: Path, tmp_path: Path) -> Path:
    shutil.copytree(run, tmp_path / "run")
    return tmp_path / "run"


def test_a_run_into_a_folder_under_a_file_is_one_line(tmp_path):
    (tmp_path / "afile").write_text("not a folder")
    error = refused("run", RUBRIC, "--run-dir", tmp_path / "afile" / "run", "-q", "--no-report")
    assert f"{tmp_path / 'afile'} is a file, not a folder" in error and f"fix: move {tmp_path / 'afile'} away" in error


def test_report_where_a_folder_holds_its_place_is_one_line(tmp_path, offline_run):
    run = _copy(offline_run, tmp_path)
    (run / "report.html").mkdir()
    before = _files(run)
    error = refused("report", run)
    assert f"{run / 'report.html'}: cannot be written (a folder is in the place of this file)" in error
    assert _files(run) == before


def test_an_edit_whose_backup_cannot_be_written_is_one_line(tmp_path, offline_run):
    run = _copy(offline_run, tmp_path)
    (run / "edits").write_text("not a folder")
    old = json.loads((run / "taxonomy.json").read_text())["capabilities"][0]["name"]
    before = _files(run)
    error = refused("edit", run, "rename", old, "check_the_recommendation_made_capability")
    assert f"{run / 'edits'} is a file, not a folder" in error
    assert _files(run) == before  # the taxonomy, its tags and the manifest as they were


@pytest.mark.skipif(
    os.geteuid() == 0 and not shutil.which("setpriv"), reason="root ignores chmod without setpriv to drop that power"
)
@pytest.mark.parametrize("command", ["run", "report", "edit", "answer cache"])
def test_a_read_only_run_folder_is_one_line(tmp_path, offline_run, command):
    """The user's case: PermissionError. Root writes through chmod 555, so root runs the command without
    CAP_DAC_OVERRIDE (setpriv), as an ordinary user would meet it."""
    run = _copy(offline_run, tmp_path)
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


@pytest.mark.skipif(
    os.geteuid() == 0 and not shutil.which("setpriv"), reason="root ignores chmod without setpriv to drop that power"
)
def test_a_finished_run_in_a_read_only_folder_reruns_and_exports_elsewhere(tmp_path, offline_run):
    run = _copy(offline_run, tmp_path)
    pipeline = write_pipeline(tmp_path)
    rerun = ["run", pipeline, "--run-dir", run, "-q"]
    for args in (rerun, ["guidance", run, "-q"], rerun):  # finished, its report listing the guidance
        assert _as_a_user(args, tmp_path).returncode == 0
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


# ---- 2, 3. a server that cannot be reached, or never answers ----------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def _silent_server():
    """Accepts every connection and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()
        for conn in held:
            conn.close()


def _discover(tmp_path, base_url: str, monkeypatch, caplog, llm: str = "") -> tuple[int, list[str], float]:
    """Stage 1 of 60 DevAI criteria through the real SDK (its prompt prefix is long enough for a context cache)."""
    toml = write_pipeline(tmp_path, limit=60)
    toml.write_text(toml.read_text().replace("[llm]\n", f"[llm]\n{llm}"))
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", base_url)
    monkeypatch.setenv("GEMINI_API_KEY", API_KEY)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        result = invoke("discover", toml, "--provider", "gemini", "--run-dir", tmp_path / "run", "-q", ok=False)
    lines = [line for line in result.output.splitlines() if line.strip()] + [
        f"{r.levelname} {r.name}: {r.getMessage()}" for r in caplog.records
    ]
    return result.exit_code, lines, time.monotonic() - started


def test_an_unreachable_server_is_said_once_and_whole(tmp_path, monkeypatch, caplog):
    port = _closed_port()
    code, lines, _ = _discover(tmp_path, f"http://127.0.0.1:{port}", monkeypatch, caplog)
    said = [line for line in lines if f"127.0.0.1:{port}" in line]
    assert code == 2 and len(said) == 1 and said[0].startswith("error: gemini: cannot connect"), lines
    assert said[0].endswith("answers already received are cached"), said[0]
    assert not any("context cache" in line or "asyncio" in line or "Traceback" in line for line in lines), lines


def test_a_server_that_never_answers_says_what_timed_out_once(tmp_path, monkeypatch, caplog):
    with _silent_server() as url:
        code, lines, seconds = _discover(tmp_path, url, monkeypatch, caplog, llm="timeout_s = 1\n")
    errors = [line for line in lines if line.startswith("error:")]
    assert code == 2 and seconds < 30, (seconds, lines)
    assert len(errors) == 1 and "gemini: no answer within 1 s (llm.timeout_s); no call was answered for" in errors[0], (
        lines
    )
    assert "or raise llm.timeout_s if it is only slow" in errors[0]
    assert not any("ReadTimeout" in line or "TimeoutError" in line or "asyncio" in line for line in lines), lines
    # what ran meanwhile is said as it happens, never as a second copy of the error
    assert all("stopping if no call is answered for 2 s" in line for line in lines if line.startswith("WARNING")), lines


def test_the_default_settings_stop_a_silent_server_within_minutes():
    cfg = LLMConfig()
    assert (cfg.timeout_retries + 1) * cfg.timeout_s <= 300 and cfg.timeout_retries < cfg.max_retries


# ---- 7. one hash everywhere --------------------------------------------------------------------------------


def test_the_vally_header_names_the_hash_taxonomy_json_has(tmp_path, offline_run):
    run = _copy(offline_run, tmp_path)
    invoke("export", run, "--to", "vally", "-q")
    content_hash = load_taxonomy(run / "taxonomy.json").content_hash
    header = (run / "export" / "vally" / "eval.yaml").read_text().split("\n\n", 1)[0]
    named = re.findall(r"taxonomy ([0-9a-f]{16})", header)
    assert named == [content_hash], header
    assert f"content hash `{content_hash}`" in (run / "taxonomy.md").read_text()


# ---- 8. one figure for one share ---------------------------------------------------------------------------


def _table_shares(markdown: str) -> dict[str, str]:
    return {m[1]: m[2] for m in re.finditer(r"^\| `([^`]+)`[^|]* \| (\d+\.\d)% \|", markdown, re.M)}


def test_taxonomy_md_gives_the_stage3_share_once_tagged(tmp_path):
    run = llm_devai_run(tmp_path)
    tagged = primary_shares(pl.read_parquet(run / "stage3_tags.parquet"), pl.read_parquet(run / "criteria.parquet"))
    shares = {r["capability"]: f"{100 * r['share']:.1f}" for r in tagged.iter_rows(named=True)}
    expected = {name: shares.get(name, "0.0") for name in load_taxonomy(run / "taxonomy.json").names()}
    markdown = (run / "taxonomy.md").read_text()
    assert "| share (Stage 3) |" in markdown and _table_shares(markdown) == expected
    summary = (run / "stage3_summary.md").read_text()
    assert all(f"| {name} | " in summary and f"| {share}% |" in summary for name, share in expected.items())


def test_taxonomy_md_before_stage3_says_its_share_is_the_merge_estimate(tmp_path, offline_env):
    toml = write_pipeline(tmp_path)
    run = tmp_path / "run"
    for stage in ("discover", "cluster", "canonicalize", "merge"):
        invoke(stage, *([toml, "--run-dir", run] if stage == "discover" else [run]), "-q")
    markdown = (run / "taxonomy.md").read_text()
    assert "| share at merge |" in markdown and "Stage 2c's estimate" in markdown and "share (Stage 3)" not in markdown


# ---- 9. diff rows that contradict themselves ---------------------------------------------------------------


def test_a_diff_after_folding_a_big_capability_into_a_small_one(tmp_path, offline_run):
    run = _copy(offline_run, tmp_path)
    caps = sorted(json.loads((run / "taxonomy.json").read_text())["capabilities"], key=lambda c: c["share"])
    small, big = caps[0]["name"], caps[-1]["name"]
    invoke("edit", run, "merge", small, big, "--allow-violations", "-q")
    before = next((run / "edits").iterdir())
    markdown = invoke("diff", before, run).output
    gone = re.findall(r"^- only in A: `([^`]+)`", markdown, re.M)
    assert gone == [big], markdown  # the name B still holds is not "only in A"
    assert f"| `{small}` | `{small}` |" in markdown
    moved = re.findall(r"^\| [^|]+ \| [^|]+ \| `([^`]+)` \| `([^`]+)` \|", markdown, re.M)
    assert moved and all(src != dst for src, dst in moved), moved  # nothing moves from X to X


# ---- 10. breakdown messages --------------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["devai", "paperbench"])
def test_breakdown_of_a_missing_folder_names_it_plainly(tmp_path, offline_run, source):
    error = refused("breakdown", offline_run, "--verdicts", f"{source}:{tmp_path / 'nowhere'}")
    assert f"{tmp_path / 'nowhere'}: no such folder; fix: pass the" in error
    assert "row -" not in error and "<" not in error


def test_a_verdict_file_without_a_verifier_column_gets_the_command_line_fix(tmp_path, offline_run):
    ids = pl.read_parquet(offline_run / "criteria.parquet")["criterion_id"].head(40).to_list()
    (tmp_path / "people.csv").write_text(
        "criterion_id,verdict\n" + "".join(f"{c},{i % 2}\n" for i, c in enumerate(ids))
    )
    (tmp_path / "judge.csv").write_text(
        "criterion_id,verdict\n" + "".join(f"{c},{i % 3 == 0:d}\n" for i, c in enumerate(ids))
    )
    error = refused(
        "breakdown", offline_run, "--verdicts", tmp_path / "people.csv", "--verdicts", tmp_path / "judge.csv"
    )
    assert (
        "people.csv: no column `verifier` for verifier" in error and "row -" not in error and "columns={" not in error
    )
    assert f"--verdicts VERIFIER={tmp_path / 'people.csv'}" in error
    # the fix, as given, works: one verifier per file named on the command line
    result = invoke(
        "breakdown",
        offline_run,
        "--verdicts",
        f"human={tmp_path / 'people.csv'}",
        "--verdicts",
        f"judge={tmp_path / 'judge.csv'}",
        "--boot",
        "0",
    )
    assert "judge" in result.output and "joined 40 of 40 verifier verdicts" in result.output


# ---- 11. demo noise ------------------------------------------------------------------------------------------


def test_a_run_says_why_k_is_lower_and_whose_lint_errors_it_counts(here):
    """The rubric holds one criterion twice with opposite signs (a lint error); cluster.k asks for more clusters
    than labels."""
    rows = (
        RUBRIC.read_text().rstrip("\n")
        + "\n"
        + "".join(
            f'eu_ev_battery_market,"The report includes a table of gigafactory capacities by country.",{w},x\n'
            for w in (2, -2)
        )
    )
    (here / "rubric.csv").write_text(rows)
    (here / "rubric.toml").write_text(
        '[corpus]\npath = "rubric.csv"\n[cluster]\nk = 5000\n[merge]\naccept_violations = true\n'
    )
    output = invoke("run", "rubric.toml", "-q", "--no-report").output
    k = re.search(
        r"note: k = (\d+), not the pipeline config's cluster.k = 5000: Stage 1 gave only (\d+) unique labels", output
    )
    assert k and k[1] == k[2], output
    lines = output.splitlines()
    lint = next(i for i, line in enumerate(lines) if line.startswith("Lint: "))
    assert re.match(r"Lint: [1-9]\d* errors?", lines[lint]), lines[lint]
    assert "defects of the rubric itself" in lines[lint - 1] and "not errors of this run" in lines[lint - 1]


# ---- 12. naming rules a model found in conflict -----------------------------------------------------------


def test_a_one_label_cluster_may_keep_its_label_and_no_rule_says_otherwise():
    prompt = render(
        "stage2_canonicalize.j2",
        rules=LabelRules(),
        cluster_id=3,
        members=[{"label": "numeric_value_recomputation_capability", "frequency": 4}],
        examples=[],
        taken=[],
        nearby=[{"cluster_id": 5, "labels": ["unit_label_consistency_checking_capability"]}],
        max_non_examples=3,
    )
    assert "may keep that label as its name" in prompt
    forbidding = [s for s in re.split(r"(?<=[.!?])\s+", prompt) if re.search(r"\bno label of this cluster\b", s, re.I)]
    assert forbidding and all("non-example" in s.lower() for s in forbidding), (
        forbidding
    )  # only non-examples are barred from them


def test_the_plain_word_tool_is_allowed_in_the_prompt_and_by_the_validator():
    rules = LabelRules()
    text = render("_naming_rules.j2", rules=rules)
    rule = next(line for line in text.splitlines() if "tool, file format or data source" in line)
    assert "`tool`" in rule and "are allowed" in rule
    example = re.search(r"e\.g\. `(tool_[a-z_]+)`", rule)[1]
    assert label_problems(example, rules) == [] and label_problems("pdf_page_layout_inspection_capability", rules)
