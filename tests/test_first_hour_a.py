"""What a new user hits in the first hour (issue 38, part A), each through the CLI."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import polars as pl
import pytest

from taxonomy.corpus import CorpusConfig, load_corpus
from taxonomy.schemas import Taxonomy
from tests.conftest import refused, ROOT, invoke, offline_devai_run


@pytest.fixture(autouse=True)
def _offline(offline_env):
    return offline_env


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    return offline_devai_run(tmp_path_factory.mktemp("first-hour-a"))


def devai_frame() -> pl.DataFrame:
    return load_corpus(CorpusConfig(path=str(ROOT / "data" / "devai"), format="devai"), ROOT).frame


def support_csv(path: Path, n: int | None = None) -> Path:
    """A user's own CSV: the DevAI criteria under the columns of the issue's support rubric."""
    frame = devai_frame().select(
        pl.col("task_id"), pl.col("text").alias("criterion"), pl.lit(2).alias("weight"), pl.col("brief")
    )
    (frame if n is None else frame.head(n)).write_csv(path)
    return path


def primaries(run: Path) -> dict[str, str]:
    tags = pl.read_parquet(run / "stage3_tags.parquet")
    return dict(zip(tags["criterion_id"].to_list(), tags["primary"].to_list()))


# ---- item 1: an edit keeps tags, shares and a frozen-taxonomy audit in agreement -----------------
def test_merge_keeps_tags_shares_and_a_frozen_audit_in_agreement(built, tmp_path, here):
    run = tmp_path / "run"
    shutil.copytree(built, run)
    new = here / "new.csv"  # criteria the taxonomy has not seen as a corpus of their own
    devai_frame().sample(40, seed=3).select(
        pl.col("task_id").alias("task"), pl.col("text").alias("criterion"), "weight"
    ).write_csv(new)
    invoke("audit", new, "--taxonomy", run / "taxonomy.json", "--run-dir", tmp_path / "audit-before", "-q")
    before, tags_before = Taxonomy.model_validate_json((run / "taxonomy.json").read_text()), primaries(run)
    keep, gone = before.names()[4], before.names()[5]
    result = invoke("edit", run, "merge", keep, gone, "--allow-violations")
    after, tags_after = Taxonomy.model_validate_json((run / "taxonomy.json").read_text()), primaries(run)
    moved = {cid: (keep if p == gone else p) for cid, p in tags_before.items()}
    assert tags_after == moved  # the merged pair's criteria go to the merged capability, the rest keep theirs
    assert " 0 criteria re-tagged" not in result.output
    # shares say what the tags say, capability by capability
    n = len(tags_after)
    for cap in after.capabilities:
        assert cap.share == pytest.approx(sum(p == cap.name for p in tags_after.values()) / n, abs=1e-6), cap.name
    md = (run / "taxonomy.md").read_text()
    untouched = after.capabilities[0]
    assert f"| {100 * before.capabilities[0].share:.1f}% |" in md.split(f"`{untouched.name}`", 1)[1].split("\n", 1)[0]
    # the placement list taxonomy.md gives readers (where the backend writes one) still holds, B's lines sending to A
    if getattr(before, "placement", None):
        assert after.placement and after.placement_hash == after.content_hash
        assert not any(r.capability == gone for r in after.placement)
        assert gone not in md.split("## Placing a criterion")[1].split("\n## ")[0]
    # an audit against the edited taxonomy places the new criteria as the one before did, B read as A (nearly
    # all: the offline tagger re-reads a new corpus against the capabilities, and the merged one is broader)
    invoke("audit", new, "--taxonomy", run / "taxonomy.json", "--run-dir", tmp_path / "audit-after", "-q")
    audit_before, audit_after = primaries(tmp_path / "audit-before"), primaries(tmp_path / "audit-after")
    expected = {cid: (keep if p == gone else p) for cid, p in audit_before.items()}
    assert sum(audit_after[cid] == p for cid, p in expected.items()) >= 0.9 * len(expected)


def test_split_shares_are_those_of_the_tags(built, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(built, run)
    before = Taxonomy.model_validate_json((run / "taxonomy.json").read_text())
    target = max((c for c in before.capabilities if len(c.members) >= 2), key=lambda c: c.share)
    invoke("edit", run, "split", target.name, "--allow-violations")
    after, tags = Taxonomy.model_validate_json((run / "taxonomy.json").read_text()), primaries(run)
    assert len(after.capabilities) == len(before.capabilities) + 1
    for cap in after.capabilities:
        assert cap.share == pytest.approx(sum(p == cap.name for p in tags.values()) / len(tags), abs=1e-6), cap.name


# ---- item 3: a TOML with only [corpus] -----------------------------------------------------------
def test_a_toml_with_only_corpus_names_the_pipeline_and_detects_columns(here):
    support_csv(here / "support.csv", 60)
    (here / "support.toml").write_text('[corpus]\npath = "support.csv"\n')
    invoke("discover", "support.toml", "-q")
    run = here / "outputs" / "support" / "offline"  # named after the corpus file
    assert json.loads((run / "manifest.json").read_text())["pipeline"] == "support"
    criteria = pl.read_parquet(run / "criteria.parquet")
    assert criteria["text"].to_list() == devai_frame()["text"].head(60).to_list()
    assert criteria["weight"].unique().to_list() == [2.0] and criteria["brief"].str.len_chars().min() > 0
    # a column the TOML names still wins over detection
    (here / "brief.toml").write_text('[corpus]\npath = "support.csv"\n[corpus.columns]\ntext = "brief"\n')
    invoke("discover", "brief.toml", "--run-dir", "brief-run", "-q")
    named = pl.read_parquet(here / "brief-run" / "criteria.parquet")
    assert set(named["text"]) == set(devai_frame()["brief"].head(60))  # one brief a task: repeats collapsed


# ---- item 4: audit takes a run directory like its siblings, and prints no merge note ----------
def test_audit_takes_the_run_directory_and_prints_no_merge_note(built, here):
    support_csv(here / "small.csv", 20)  # under the size whose merge bounds a run relaxes
    by_dir = invoke("audit", "small.csv", "--taxonomy", built, "-q")
    assert "# Coverage audit" in by_dir.output and "merge" not in by_dir.output.lower()
    by_file = invoke("audit", "small.csv", "--taxonomy", built / "taxonomy.json", "-q")
    assert by_file.output == by_dir.output
    tagged = invoke("tag", "small.csv", "--taxonomy", built, "-q")  # tag takes it alike
    assert "Share of criteria by primary capability" in tagged.output and "merge" not in tagged.output.lower()


# ---- item 7: a misspelt provider writes nothing ------------------------------------------------
@pytest.mark.parametrize("command", ["run", "estimate", "discover"])
def test_a_misspelt_provider_stops_before_anything_is_written(here, command):
    support_csv(here / "support.csv", 20)
    line = refused(command, "support.csv", "--provider", "gemni")
    assert "gemni" in line and all(p in line for p in ("gemini", "vertex", "openai", "offline"))
    assert sorted(p.name for p in here.iterdir()) == ["support.csv"]


def test_a_missing_key_stops_before_a_run_folder_is_made(here, monkeypatch):
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    support_csv(here / "support.csv", 20)
    line = refused("run", "support.csv", "--provider", "gemini")
    assert "GEMINI_API_KEY" in line
    assert not list(here.glob("outputs/support/gemini*")), "an empty run folder was left behind"


# ---- item 10: the run folder's pipeline.toml travels with it -----------------------------------
def test_the_run_folders_pipeline_toml_holds_relative_paths_and_moves(here, tmp_path, monkeypatch):
    support_csv(here / "support.csv", 60)
    invoke("run", "support.csv", "-q", "--no-report")
    toml = here / "outputs" / "support" / "offline" / "pipeline.toml"
    raw = tomllib.loads(toml.read_text())
    assert not Path(raw["corpus"]["path"]).is_absolute() and not Path(raw["output"]["dir"]).is_absolute()
    assert str(tmp_path) not in toml.read_text()
    moved = tmp_path / "elsewhere" / "support"
    monkeypatch.chdir(tmp_path)
    shutil.move(here, moved)  # the folder with its corpus and its outputs
    again = invoke("run", moved / "outputs" / "support" / "offline" / "pipeline.toml", "-q", "--no-report")
    assert again.output.count("already on disk and up to date, skipped") == 5, again.output
    assert str(moved / "outputs" / "support" / "offline") in again.output


# ---- item 6: bad rows are said once, with counts, and exact repeats are collapsed ----------------
def test_repeated_near_duplicate_and_overlong_rows_are_said_once_and_repeats_collapsed(here):
    base = devai_frame().head(40)
    rows = [
        {"task_id": r["task_id"], "criterion": r["text"] + ("  " if k == 2 else ""), "weight": 1}
        for r in base.iter_rows(named=True)
        for k in range(3)
    ]  # each criterion three times
    rows += [
        {"task_id": "t1", "criterion": "The agent greets the customer.", "weight": 1},
        {"task_id": "t1", "criterion": "THE AGENT greets  the customer", "weight": 1},
        {"task_id": "t1", "criterion": "The agent explains the refund policy. " * 525, "weight": 1},
    ]
    pl.DataFrame(rows).write_csv(here / "support.csv")
    env = {k: v for k, v in os.environ.items() if k not in ("GEMINI_API_KEY", "GOOGLE_API_KEY")}
    done = subprocess.run(
        [sys.executable, "-m", "taxonomy", "run", "support.csv", "-q", "--no-report"],
        cwd=here,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    said = [
        line for line in done.stderr.splitlines() if "support.csv: " in line and "taxonomy lint support.csv" in line
    ]
    assert len(said) == 3, done.stderr  # once each, though the command reads the corpus twice
    repeats, near, long = said
    assert "80 criteria repeat" in repeats and "collapsed" in repeats and "43 criteria left" in repeats
    assert "1 criterion differs" in near and "case, spaces" in near
    assert "1 criterion is over 5,000 characters" in long and "the longest 19,950" in long
    criteria = pl.read_parquet(here / "outputs" / "support" / "offline" / "criteria.parquet")
    assert criteria.height == 43 and criteria["text"].n_unique() == 43


# ---- item 9: a report a person can use -----------------------------------------------------------
def _section(html: str, sid: str) -> str:
    return html.split(f'<section id="{sid}">', 1)[1].split("</section>", 1)[0]


def _body_rows(table_html: str) -> int:
    return table_html.split("<tbody>", 1)[1].split("</tbody>", 1)[0].count("<tr>")


def test_report_folds_long_tables_says_shared_reasons_once_and_how_to_get_a_breakdown(built, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(built, run)
    invoke("report", run)
    html = (run / "report.html").read_text(encoding="utf-8")
    # the least confident tags (40) show their first rows; the rest open under <details>, all of them filterable
    low = _section(html, "confidence").split("Least confident tags", 1)[1].split("<h3", 1)[0]
    shown, rest = low.split('<details class="rest">', 1)
    assert _body_rows(shown) == 10 and _body_rows(rest) == 30 and 'class="row-filter"' in shown
    assert "Show the other 30 rows" in rest
    # the reason every capability gives alike for P2/P3 is said once, above the table
    taxonomy = Taxonomy.model_validate_json((run / "taxonomy.json").read_text())
    reason = taxonomy.capabilities[0].needs_native_inspection_reason
    assert all(c.needs_native_inspection_reason == reason for c in taxonomy.capabilities)
    assert re.sub(r"<[^>]+>", " ", _section(html, "taxonomy")).count(reason.split(";")[0]) == 1  # hover titles aside
    # no breakdown yet: the section says which command makes one
    breakdown = " ".join(re.sub(r"<[^>]+>", "", _section(html, "breakdown")).split())
    assert f"taxonomy breakdown {run} --verdicts FILE" in breakdown


def test_report_in_chromium_filters_a_folded_table_and_stays_short(built, tmp_path):
    from tests.chromium import Browser, find_chromium

    if find_chromium() is None:
        pytest.skip("Chromium not installed (apt-get install chromium)")
    run = tmp_path / "run"
    shutil.copytree(built, run)
    invoke("report", run)
    with Browser(tmp_path / "profile", width=1280, height=900) as b:
        b.open((run / "report.html").resolve().as_uri())
        heights = b.eval(
            "JSON.stringify(Object.fromEntries(Array.from(document.querySelectorAll('section'))"
            ".map(s => [s.id, s.offsetHeight])))"
        )
        heights = json.loads(heights)
        assert heights["confidence"] < 2500 and heights["criteria"] < 2500, heights  # 40 and 365 rows folded
        wrap = "document.querySelector('#confidence .long')"
        word = b.eval(
            f"{wrap}.querySelector('details.rest tbody tr td').textContent.split(/\\s+/).filter(w => w.length > 6)[0]"
        )
        b.type_into("#confidence input.row-filter", word)
        visible = b.eval(
            f"Array.from({wrap}.querySelectorAll('tbody tr')).filter(tr => !tr.hidden).map(tr => tr.textContent)"
        )
        assert visible and all(word.lower() in t.lower() for t in visible)
        assert b.eval(f"{wrap}.querySelector('details.rest').open") is True


def test_report_renders_inline_code_in_the_taxonomy_table(tmp_path):
    from taxonomy.analysis.report import render_report
    from tests import run_fixture

    run = run_fixture.write_run(tmp_path / "run")
    taxonomy = Taxonomy.model_validate_json((run / "taxonomy.json").read_text())
    other = taxonomy.capabilities[1].name
    taxonomy.capabilities[
        0
    ].diagnostic_signal = f"The trace opens the file; where it only reads the text, prefer `{other}`."
    taxonomy.content_hash = taxonomy.compute_hash()
    (run / "taxonomy.json").write_text(taxonomy.model_dump_json())
    html = render_report(run).read_text(encoding="utf-8")
    first = "_<wbr>".join(taxonomy.capabilities[0].name.split("_"))
    rows = _section(html, "taxonomy").split("<tbody>", 1)[1].split("</tr>")
    row = next(r for r in rows if f"<td>{first}</td>" in r)  # the table lists the largest first
    assert "`" not in row and f"<code>{'_<wbr>'.join(other.split('_'))}</code>" in row
