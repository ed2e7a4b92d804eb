"""`taxonomy diff`: capabilities matched by the criteria they hold, renames, splits, merges, moved criteria, ARI/NMI."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import polars as pl
import pytest

from taxonomy.diff import Side, diff_runs, diff_sides
from tests import run_fixture
from tests.conftest import ROOT, invoke
from tests.test_report import Page

FILE, CODE, NUMERIC, LOG = list(run_fixture.CAPS)
RENAMED = "saved_output_file_check_capability"


def _edited_copy(src: Path, dst: Path) -> Path:
    """B = A with the file capability renamed, the log capability merged into the numeric one,
    and one criterion (t1-c1) moved from code to numeric."""
    shutil.copytree(src, dst)
    raw = json.loads((dst / "taxonomy.json").read_text())
    caps = {c["name"]: c for c in raw["capabilities"]}
    caps[FILE]["name"] = RENAMED
    caps[NUMERIC]["members"] += caps[LOG]["members"]
    raw["capabilities"] = [c for c in raw["capabilities"] if c["name"] != LOG]
    (dst / "taxonomy.json").write_text(json.dumps(raw))
    rename = {FILE: RENAMED, LOG: NUMERIC}

    def edit(cid: str, tags: list[str]) -> list[str]:
        tags = list(dict.fromkeys(rename.get(t, t) for t in tags))
        return [NUMERIC] if cid == "t1-c1" else tags

    tags = pl.read_parquet(dst / "stage3_tags.parquet")
    new = [edit(c, t) for c, t in zip(tags["criterion_id"], tags["tags"])]
    tags.with_columns(
        tags=pl.Series(new, dtype=pl.List(pl.Utf8)),
        primary=pl.Series([t[0] if t else None for t in new], dtype=pl.Utf8),
    ).write_parquet(dst / "stage3_tags.parquet")
    return dst


@pytest.fixture
def runs(tmp_path):
    a = run_fixture.write_run(tmp_path / "a")
    return a, _edited_copy(a, tmp_path / "b")


def test_identical_runs_agree_fully(tmp_path):
    a = run_fixture.write_run(tmp_path / "a")
    d = diff_runs(a, a)
    assert d.ari == pytest.approx(1.0) and d.nmi == pytest.approx(1.0)
    assert d.moved.height == 0 and not d.splits and not d.merges and not d.only_a and not d.only_b
    assert {m.kind for m in d.matches} == {"same"} and len(d.matches) == 4


def test_rename_merge_and_moved_criteria_are_named(runs):
    a, b = runs
    d = diff_runs(a, b)
    assert d.n_shared == 19  # t5-c2 has no tag in either
    assert 0 < d.ari < 1 and 0 < d.nmi < 1
    assert [(m.a, m.b) for m in d.renamed] == [(FILE, RENAMED)]
    assert [n for n, _ in d.merges[NUMERIC]] == [NUMERIC, LOG]
    assert d.only_a == [LOG] and d.only_b == []
    moved = dict(zip(d.moved["criterion_id"], zip(d.moved["from"], d.moved["to"])))
    assert moved["t1-c1"] == (CODE, NUMERIC)
    log_criteria = pl.read_parquet(a / "stage3_tags.parquet").filter(pl.col("primary") == LOG)["criterion_id"].to_list()
    assert set(moved) == {"t1-c1", *log_criteria}  # the merged capability's criteria moved with it
    md = d.to_markdown()
    assert "| ARI |" in md and f"`{FILE}` → `{RENAMED}`" in md and f"→ `{NUMERIC}`" in md


def test_the_other_way_round_is_a_split(runs):
    a, b = runs
    d = diff_runs(b, a)
    assert [n for n, _ in d.splits[NUMERIC]] == [NUMERIC, LOG]
    assert d.only_b == [LOG]
    assert diff_runs(a, b).ari == pytest.approx(d.ari)  # symmetric


def test_diff_command_and_report_against(runs, tmp_path):
    a, b = runs
    result = invoke("diff", a, b, "--out", tmp_path / "d.md")
    assert "| ARI |" in result.output and "## Renamed" in result.output
    assert (tmp_path / "d.md").read_text().startswith("# Taxonomy diff")
    result = invoke("report", b, "--against", a)
    written = list((b / "diff").glob("*-vs-*.md"))
    assert len(written) == 1 and str(written[0]) in result.output.replace("\n", "")
    page = Page((b / "report.html").read_text(encoding="utf-8"))
    text = page.section("diff")
    assert "ARI" in text and RENAMED in text and "<table" in (b / "report.html").read_text().split('id="diff"', 1)[1]


def test_diff_of_runs_without_shared_criteria_is_one_line(runs, tmp_path):
    a, b = runs
    crit = pl.read_parquet(b / "criteria.parquet")
    crit.with_columns(criterion_id=pl.lit("x-") + pl.col("criterion_id")).write_parquet(b / "criteria.parquet")
    tags = pl.read_parquet(b / "stage3_tags.parquet")
    tags.with_columns(criterion_id=pl.lit("x-") + pl.col("criterion_id")).write_parquet(b / "stage3_tags.parquet")
    result = invoke("diff", a, b, ok=False)
    assert result.exit_code == 2 and "no criterion id in common" in result.output
    result = invoke("diff", a, tmp_path / "nowhere", ok=False)
    assert result.exit_code == 2 and "not a run directory" in result.output


def test_diff_refuses_tags_made_with_another_taxonomy(runs):
    a, b = runs
    manifest = {"stages": {"tag": {"taxonomy_hash": "0123456789abcdef"}}}
    (b / "manifest.json").write_text(json.dumps(manifest))
    result = invoke("diff", a, b, ok=False)
    assert result.exit_code == 2 and "re-tag" in result.output


def test_an_edit_split_reads_as_a_split_not_a_rename(offline_env, tmp_path):
    """After `edit … split`, diff listed the split capability as renamed to its larger piece."""
    a, b = tmp_path / "a", tmp_path / "b"
    invoke("run", ROOT / "tests" / "fixtures" / "scripts" / "support_en_120.csv", "--run-dir", a, "-q", "--no-report")
    shutil.copytree(a, b)
    largest = max(json.loads((a / "taxonomy.json").read_text())["capabilities"], key=lambda c: c["share"])["name"]
    invoke("edit", b, "split", largest, "--allow-violations", "-q")
    d = diff_runs(a, b)
    parts = {c["name"] for c in json.loads((b / "taxonomy.json").read_text())["capabilities"]} - {
        c["name"] for c in json.loads((a / "taxonomy.json").read_text())["capabilities"]
    }
    assert {n for n, _ in d.splits[largest]} == parts and not d.renamed
    assert [d.verdict(m) for m in d.matches if m.a == largest] == ["split"]
    assert f"- `{largest}` → " in d.to_markdown().split("## Splits", 1)[1].split("## Merges", 1)[0]


def _side(path: Path, primaries: dict[str, str]) -> Side:
    ids = sorted(primaries)
    frame = pl.DataFrame({"criterion_id": ids, "task_id": "t", "text": ids, "primary": [primaries[i] for i in ids]})
    return Side(path, sorted(set(primaries.values())), path.name, frame)


def test_a_small_piece_cut_off_is_a_split_and_a_small_capability_taken_in_is_a_merge(tmp_path):
    """One criterion in ten cut off into a capability of its own holds 10% of the old one, under the 20% a part
    of a spread needs; it is all of the new capability, so the old one was split."""
    whole = {f"c{i}": "x_capability" for i in range(10)} | {f"d{i}": "y_capability" for i in range(5)}
    cut = whole | {"c9": "x_piece_capability"}
    d = diff_sides(_side(tmp_path / "a", whole), _side(tmp_path / "b", cut))
    assert [n for n, _ in d.splits["x_capability"]] == ["x_capability", "x_piece_capability"] and not d.merges
    back = diff_sides(_side(tmp_path / "b", cut), _side(tmp_path / "a", whole))
    assert [n for n, _ in back.merges["x_capability"]] == ["x_capability", "x_piece_capability"] and not back.splits


def test_a_diff_after_folding_a_big_capability_into_a_small_one(offline_run, offline_env):
    run = offline_run
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
