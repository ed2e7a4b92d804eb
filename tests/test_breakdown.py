"""Verifier error breakdown: paper tables, hand-computed metrics, bootstrap, loaders."""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import polars as pl
import pytest

from taxonomy.analysis import (
    ALL,
    VerdictError,
    capability_breakdown,
    devai_drift,
    gap_table,
    join_report,
    join_verdicts,
    load_devai_judgments,
    load_paperbench_grades,
    load_verdict_table,
    load_verdicts,
    paired_test,
    side_by_side,
    to_markdown,
    write_csv,
)
from taxonomy.analysis.verdicts import read_json
from taxonomy.taxonomy_io import load_taxonomy
from tests.conftest import ROOT, invoke, refused

DATA = Path(__file__).resolve().parents[1] / "data"

# Table A6 (Archipelago on BVB) in the paper's order: capability, n, FP %, FN %, FN-FP as
# printed; the last column is Archipelago's error rate in Table A3.
TABLE_A6 = [
    ("Inspect visual presentation and style", 373, 10.5, 16.1, +5.6, 26.5),
    ("Validate document labeling and metadata", 207, 4.8, 10.1, +5.3, 15.0),
    ("Reconcile cross-component data linkage", 478, 7.5, 12.8, +5.2, 20.3),
    ("Verify structural component inventory", 388, 4.1, 8.5, +4.4, 12.6),
    ("Audit accounting logic and convention", 244, 7.4, 6.6, -0.8, 13.9),
    ("Verify literal data point accuracy", 497, 8.2, 7.0, -1.2, 15.3),
    ("Audit governance and strategic narrative", 174, 12.1, 9.8, -2.3, 21.8),
    ("Audit quantitative metric calculation", 736, 10.6, 5.0, -5.6, 15.6),
    ("Validate temporal and sequential integrity", 107, 12.1, 5.6, -6.5, 17.8),
]


def _frames(rows):
    """rows: (criterion_id, task_id, primary, tags, weight, human, {verifier: verdict})."""
    tags = pl.DataFrame(
        [(c, t, p, tg, w) for c, t, p, tg, w, _, _ in rows],
        schema=["criterion_id", "task_id", "primary", "tags", "weight"],
        orient="row",
    )
    verdicts = [(c, "human", "sys", h) for c, *_, h, _ in rows]
    verdicts += [(c, v, "sys", x) for c, *_, vs in rows for v, x in vs.items()]
    return tags, pl.DataFrame(verdicts, schema=["criterion_id", "verifier", "system", "verdict"], orient="row")


def _table_a6_rows():
    rows = []
    for cap, n, fp_pct, fn_pct, *_ in TABLE_A6:
        fp, fn = round(fp_pct * n / 100), round(fn_pct * n / 100)
        n_met = n // 2
        for i in range(n):
            met = i < n_met
            wrong = i < fp if met else i - n_met < fn
            rows.append((f"{cap}/{i}", f"{cap[:12]}-{i % 7}", cap, [cap], 1.0, met, {"archipelago": met != wrong}))
    return rows


def test_gap_table_reproduces_table_a6():
    tags, verdicts = _frames(_table_a6_rows())
    breakdown = capability_breakdown(join_verdicts(tags, verdicts), n_boot=0)
    gaps = gap_table(breakdown, "archipelago")
    assert gaps["capability"].to_list() == [row[0] for row in TABLE_A6]  # sorted by FN-FP, largest first
    for got, (cap, n, fp, fn, gap, err) in zip(gaps.iter_rows(named=True), TABLE_A6):
        assert got["n"] == n
        assert abs(100 * got["fp_rate"] - fp) <= 0.05 + 1e-9
        assert abs(100 * got["fn_rate"] - fn) <= 0.05 + 1e-9
        assert abs(100 * got["fn_minus_fp"] - gap) <= 0.1  # printed from unrounded rates
    # FP and FN are shares of all n in the row, so they add up to Table A3's error rate.
    errors = dict(breakdown.select("capability", "error_rate").iter_rows())
    for cap, *_, err in TABLE_A6:
        assert abs(100 * errors[cap] - err) <= 0.1
    assert breakdown.filter(pl.col("capability") == ALL)["n"].item() == 3204
    assert abs(100 * errors[ALL] - 17.4) <= 0.1
    md = to_markdown(gaps)
    assert "| Inspect visual presentation and style | 373 | 10.5 | 16.1 | +5.6 |" in md


# A hand-computed example. t1: three met criteria (one over-rejected), t2: three unmet
# (one passed) and one met, correctly passed. Weights: |-3| counts as 3.
SMALL = [
    ("t1/0", "t1", "a", ["a", "c"], 1.0, True, {"v": True}),
    ("t1/1", "t1", "a", ["a"], 2.0, True, {"v": False}),  # FP
    ("t1/2", "t1", "a", ["a"], 1.0, True, {"v": True}),
    ("t2/0", "t2", "b", ["b"], 1.0, False, {"v": False}),  # unmet caught
    ("t2/1", "t2", "b", ["b"], -3.0, False, {"v": True}),  # FN
    ("t2/2", "t2", "b", ["b"], 2.0, False, {"v": False}),  # unmet caught
    ("t2/3", "t2", "c", ["c"], 1.0, True, {"v": True}),
]


def _row(frame, cap):
    return frame.filter(pl.col("capability") == cap).row(0, named=True)


def test_metrics_by_hand():
    tags, verdicts = _frames(SMALL)
    joined = join_verdicts(tags, verdicts)
    assert joined.height == 7 and set(joined["verifier"]) == {"v"}
    bd = capability_breakdown(joined, n_boot=0)
    total = _row(bd, ALL)
    assert (total["n"], total["n_unmet"], total["fp"], total["fn"]) == (7, 3, 1, 1)
    assert total["error_rate"] == pytest.approx(2 / 7)
    assert total["fp_rate"] == pytest.approx(1 / 7) and total["fn_rate"] == pytest.approx(1 / 7)
    assert total["accuracy"] == pytest.approx(5 / 7)
    assert total["f1_unmet"] == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))  # 2 unmet caught, 1 FP, 1 FN
    a, b, c = _row(bd, "a"), _row(bd, "b"), _row(bd, "c")
    assert (a["n"], a["error_rate"], a["fp_rate"], a["fn_rate"], a["f1_unmet"]) == (
        3,
        pytest.approx(1 / 3),
        pytest.approx(1 / 3),
        0,
        0,
    )
    assert b["error_rate"] == pytest.approx(1 / 3) and b["fn_rate"] == pytest.approx(1 / 3)
    assert b["f1_unmet"] == pytest.approx(4 / 5)
    assert c["f1_unmet"] is None  # no unmet criterion and no error: F1 undefined
    assert bd["capability"].to_list() == ["a", "b", "c", ALL]

    weighted = capability_breakdown(joined, weighted=True, n_boot=0)
    total = _row(weighted, ALL)
    assert total["weight"] == pytest.approx(11)
    assert total["error_rate"] == pytest.approx(5 / 11)  # FP weighs 2, FN weighs |-3|
    assert total["fp_rate"] == pytest.approx(2 / 11) and total["fn_rate"] == pytest.approx(3 / 11)
    assert total["accuracy"] == pytest.approx(6 / 11)
    assert total["f1_unmet"] == pytest.approx(2 * 3 / (2 * 3 + 2 + 3))
    assert _row(weighted, "b")["error_rate"] == pytest.approx(3 / 6)

    any_tag = capability_breakdown(joined, by="any", n_boot=0)
    assert _row(any_tag, "c")["n"] == 2 and _row(any_tag, "a")["n"] == 3
    assert _row(any_tag, ALL)["n"] == 7  # the aggregate counts each criterion once


def test_bootstrap_ci_contains_estimate():
    tags, verdicts = _frames(_table_a6_rows())
    bd = capability_breakdown(join_verdicts(tags, verdicts), n_boot=300, seed=1)
    for r in bd.iter_rows(named=True):
        assert r["ci_lo"] <= r["error_rate"] <= r["ci_hi"]
    again = capability_breakdown(join_verdicts(tags, verdicts), n_boot=300, seed=1)
    assert again.equals(bd)  # seeded
    small = capability_breakdown(join_verdicts(*_frames(SMALL)), n_boot=100)
    assert _row(small, "a")["ci_lo"] is None  # seen in one task only: no interval
    assert _row(small, ALL)["ci_lo"] is not None


def test_bootstrap_resamples_tasks():
    # 20 tasks x 10 criteria; the verifier is wrong on every criterion of task 0 only.
    rows = [(f"t{t}/{i}", f"t{t}", "cap", ["cap"], 1.0, True, {"v": t != 0}) for t in range(20) for i in range(10)]
    joined = join_verdicts(*_frames(rows))
    by_task = _row(capability_breakdown(joined, n_boot=2000), "cap")
    by_criterion = _row(capability_breakdown(joined, n_boot=2000, cluster="criterion_id"), "cap")
    assert by_task["error_rate"] == pytest.approx(0.05)
    assert by_task["ci_lo"] <= 0.05 <= by_task["ci_hi"]
    width_task = by_task["ci_hi"] - by_task["ci_lo"]
    width_crit = by_criterion["ci_hi"] - by_criterion["ci_lo"]
    assert width_task > 1.8 * width_crit, (width_task, width_crit)
    assert by_task["ci_lo"] == 0.0  # a third of the draws (0.95**20) miss task 0 altogether


def test_side_by_side_marks_best_and_ties():
    rows = [
        (
            f"t{i % 3}/{i}",
            f"t{i % 3}",
            "x" if i < 4 else "y",
            ["x"],
            1.0,
            True,
            {"g": i != 0, "a": i not in (0, 1), "b": i != 0},
        )
        for i in range(8)
    ]
    bd = capability_breakdown(join_verdicts(*_frames(rows)), n_boot=0)
    table = side_by_side(bd)
    assert table.columns == ["capability", "n", "a", "b", "g", "best"]
    best = dict(table.select("capability", "best").iter_rows())
    assert best == {"x": "b, g", "y": "a, b, g", ALL: "b, g"}
    assert table["capability"].to_list()[-1] == ALL


def test_paired_mcnemar():
    rows = []
    for i in range(30):  # a alone wrong on 10, b alone wrong on 1, both wrong on 2
        a_wrong, b_wrong = i < 10 or 11 <= i < 13, i == 10 or 11 <= i < 13
        rows.append((f"t{i % 5}/{i}", f"t{i % 5}", "p", ["p"], 1.0, True, {"a": not a_wrong, "b": not b_wrong}))
    rows += [(f"t9/{i}", "t9", "q", ["q"], 1.0, False, {"a": False, "b": False}) for i in range(4)]
    out = paired_test(join_verdicts(*_frames(rows)), "a", "b")
    p, q, total = (_row(out, c) for c in ("p", "q", ALL))
    assert (p["n"], p["a_errors"], p["b_errors"], p["only_a_wrong"], p["only_b_wrong"]) == (30, 12, 3, 10, 1)
    assert p["p_value"] == pytest.approx(24 / 2048)  # 2 * P(X >= 10), X ~ Bin(11, 1/2)
    assert q["p_value"] == 1.0 and q["n"] == 4
    assert total["n"] == 34 and total["p_holm"] is None
    assert p["p_holm"] == pytest.approx(2 * 24 / 2048)


def test_join_reports_missing(tmp_path):
    tags, verdicts = _frames(SMALL)
    extra = pl.DataFrame(
        [("t3/0", "v", "sys", True), ("t1/0", "v", "other", True)], schema=verdicts.schema, orient="row"
    )
    verdicts = pl.concat([verdicts, extra])
    report = join_report(tags, verdicts)
    assert (report.n_verdicts, report.n_joined, report.no_tag, report.no_reference) == (9, 7, 1, 2)
    with pytest.warns(UserWarning, match="1 had no capability tag"):
        join_verdicts(tags, verdicts)
    with pytest.raises(VerdictError, match="fix:"):
        join_verdicts(tags, verdicts, on_missing="raise")
    with pytest.raises(VerdictError, match="second verdict"):
        join_verdicts(tags, pl.concat([verdicts, verdicts.head(1)]))
    out = write_csv(join_verdicts(tags, verdicts, on_missing="ignore"), tmp_path / "j.csv")
    assert pl.read_csv(out)["tags"][0] == "a;c"


# ---- loaders on the real data ------------------------------------------------------------
def _devai_tags():
    rows = []
    for path in sorted((DATA / "devai/devai/instances").glob("*.json*")):
        stem = path.name.split(".json")[0]
        for req in read_json(path)["requirements"]:
            cat = req.get("category") or "(none)"
            rows.append((f"{stem}/{req['requirement_id']}", stem, cat, [cat], 1.0))
    return pl.DataFrame(rows, schema=["criterion_id", "task_id", "primary", "tags", "weight"], orient="row")


def test_devai_judgments(caplog):
    with caplog.at_level(logging.WARNING), warnings.catch_warnings():
        warnings.simplefilter("error")  # said as a log line, never as a Python warning
        verdicts = load_devai_judgments(DATA / "devai")
    assert "52_Devin_AI_Trains_an_AI" in caplog.text
    assert verdicts.columns == ["criterion_id", "verifier", "system", "verdict"]
    counts = verdicts.group_by("system", "verifier").len()
    assert set(counts["system"]) == {"GPT-Pilot", "MetaGPT", "OpenHands"}
    assert set(counts["verifier"]) == {"human", "agent_as_a_judge"}
    # Each system has 366 judged requirements: the 365 of the instances, except that task 52
    # was judged on a 5-requirement draft of its 4 (see devai_drift).
    assert counts["len"].to_list() == [366] * 6
    assert devai_drift(DATA / "devai") == [f"52_Devin_AI_Trains_an_AI/{i}" for i in range(5)]

    tags = _devai_tags()
    assert tags.height == 365
    everything = pl.DataFrame({"criterion_id": verdicts["criterion_id"].unique()}).with_columns(primary=pl.lit("x"))
    assert join_verdicts(everything, verdicts).height == 1098  # the README's (human, judge) pairs
    report = join_report(tags, verdicts)
    assert (report.n_joined, report.no_tag, report.no_reference) == (1095, 3, 0)
    bd = capability_breakdown(join_verdicts(tags, verdicts, on_missing="ignore"), by="primary", n_boot=200)
    total = _row(bd, ALL)
    assert total["n"] == 1095 and 0.05 < total["error_rate"] < 0.2


def test_paperbench_grades():
    grades = load_paperbench_grades(DATA / "paperbench")
    assert grades.height == 2693
    assert grades["verdict"].sum() == 1189 and (~grades["verdict"]).sum() == 1504
    assert set(grades["verifier"]) == {"human"} and grades["system"].n_unique() == 5
    assert grades["criterion_id"].n_unique() == 2693
    first = grades.row(0, named=True)
    assert first["criterion_id"].startswith(first["system"] + "/")
    assert load_verdicts(f"paperbench:{DATA / 'paperbench'}").equals(grades)


# ---- generic tables and one-line errors --------------------------------------------------
def test_verdict_table_spellings(tmp_path):
    csv = tmp_path / "v.csv"
    csv.write_text(
        "id,judge,label\nc/1,g,met\nc/2,g,Unmet\nc/3,g,PASS\nc/4,g,fail\nc/5,g,yes\nc/6,g,no\nc/7,g,1\n"
        "c/8,g,0\nc/9,g,true\n"
    )
    out = load_verdict_table(
        csv, {"criterion_id": "id", "verifier": "judge", "verdict": "label"}, defaults={"system": "run"}
    )
    assert out["verdict"].to_list() == [True, False, True, False, True, False, True, False, True]
    assert set(out["system"]) == {"run"}
    jsonl = tmp_path / "v.jsonl"
    jsonl.write_text(
        "\n".join(
            json.dumps({"criterion_id": f"c/{i}", "verifier": "g", "system": "s", "verdict": i % 2}) for i in range(4)
        )
    )
    assert load_verdicts(str(jsonl))["verdict"].to_list() == [False, True, False, True]
    pq = tmp_path / "v.parquet"
    out.write_parquet(pq)
    assert load_verdict_table(pq, {}).equals(out)


def _one_line_error(fn, *args, **kwargs) -> str:
    with pytest.raises(VerdictError) as info:
        fn(*args, **kwargs)
    msg = str(info.value)
    assert "\n" not in msg and "fix:" in msg, msg
    return msg


def test_errors_are_one_line(tmp_path):
    csv = tmp_path / "bad.csv"
    csv.write_text("criterion_id,verifier,system,verdict\nc/1,g,s,met\nc/2,g,s,maybe\n")
    assert "bad.csv: row 2 (line 3): verdict 'maybe'" in _one_line_error(load_verdict_table, csv, {})
    assert "no column `label`" in _one_line_error(load_verdict_table, csv, {"verdict": "label"})
    csv.write_text("criterion_id,verifier,system,verdict\nc/1,g,s,met\nc/1,g,s,unmet\n")
    assert "row 2 (line 3): second verdict" in _one_line_error(load_verdict_table, csv, {})
    csv.write_text("criterion_id,verifier,system,verdict\n,g,s,met\n")
    assert "row 1 (line 2): criterion_id is empty" in _one_line_error(load_verdict_table, csv, {})
    _one_line_error(load_verdict_table, tmp_path / "missing.csv", {})
    _one_line_error(load_verdict_table, csv, {"score": "x"})
    _one_line_error(load_verdicts, "devai:")
    assert "unknown verdict source" in _one_line_error(load_verdicts, "judgebench:x.csv")
    _one_line_error(load_devai_judgments, tmp_path)
    _one_line_error(load_paperbench_grades, tmp_path)

    judged = tmp_path / "devai/judgment/S/human_as_a_judge"
    judged.mkdir(parents=True)
    (judged / "01_x.json").write_text(
        json.dumps(
            {"requirements": [{"requirement_id": 0, "satisfied": True}, {"requirement_id": 1, "satisfied": None}]}
        )
    )
    assert "01_x.json: row 2: `satisfied`" in _one_line_error(load_devai_judgments, tmp_path / "devai")

    paper = tmp_path / "pb/judge_eval/p"
    paper.mkdir(parents=True)
    (paper / "expected_result.json").write_text(
        json.dumps({"id": "root", "sub_tasks": [{"id": "a", "score": 1.0, "sub_tasks": []}, {"id": "b", "score": 0.5}]})
    )
    assert "row 2: score 0.5" in _one_line_error(load_paperbench_grades, tmp_path / "pb")
    (paper / "expected_result.json").write_text("{not json")
    assert "unreadable JSON" in _one_line_error(load_paperbench_grades, tmp_path / "pb")


@pytest.mark.parametrize("kind", ["devai", "paperbench"])
def test_a_relative_benchmark_folder_that_fails_is_answered_with_one_that_works(tmp_path, monkeypatch, kind):
    monkeypatch.chdir(tmp_path)  # outside the clone, where data/<kind> is no folder
    msg = _one_line_error(load_verdicts, f"{kind}:data/{kind}")
    fix = msg.split("; fix: ", 1)[1]
    assert f"{kind}:data/{kind}" not in fix and "holds" in fix
    works = fix.split("--verdicts ", 1)[1]
    assert works == f"{kind}:{DATA / kind}" and load_verdicts(works).height > 0


# ---- verdict files through the CLI: their encodings, parse errors and missing pieces, each one line


def test_utf16_verdicts_taxonomy_and_notes_are_read(tmp_path, offline_run, offline_env):
    """Every other text a user hands in: verdict tables, a hand-edited taxonomy.json, domain notes."""
    run = offline_run
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


@pytest.mark.parametrize(
    "name, data, where",
    [
        ("v.csv", "criterion_id,verdict\na,1\nb,1,extra\n", "v.csv: line 3: 3 fields where the header (line 1) has 2"),
        ("v.jsonl", '{"criterion_id": "a", "verdict": 1}\n{"criterion_id": "b",\n', "v.jsonl: line 2: invalid JSON"),
    ],
)
def test_a_verdict_file_parse_error_names_its_line(tmp_path, offline_run, offline_env, name, data, where):
    (tmp_path / name).write_text(data)
    assert where in refused("breakdown", offline_run, "--verdicts", f"human={tmp_path / name}")


@pytest.mark.parametrize("source", ["devai", "paperbench"])
def test_breakdown_of_a_missing_folder_names_it_plainly(tmp_path, offline_run, offline_env, source):
    error = refused("breakdown", offline_run, "--verdicts", f"{source}:{tmp_path / 'nowhere'}")
    assert f"{tmp_path / 'nowhere'}: no such folder; fix: pass the" in error
    assert "row -" not in error and "<" not in error


def test_a_verdict_file_without_a_verifier_column_gets_the_command_line_fix(tmp_path, offline_run, offline_env):
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


# ---- the agent judge against human verdicts on a run over the bundled DevAI data


def test_breakdown_of_the_agent_judge_against_humans(offline_run, offline_env):
    result = invoke("breakdown", offline_run, "--verdicts", f"devai:{ROOT / 'data' / 'devai'}", "--boot", "200")
    assert "agent_as_a_judge" in result.output and "FN minus FP" in result.output
    header = next(line for line in result.output.splitlines() if line.startswith("| verifier | capability"))
    assert header.endswith("| ci_lo | ci_hi |")  # a markdown row is never wrapped
    pooled = pl.read_csv(offline_run / "breakdown" / "breakdown.csv")
    overall = pooled.filter(pl.col("capability") == "ALL").row(0, named=True)
    assert overall["n"] == 1095 and abs(overall["error_rate"] - (overall["fp_rate"] + overall["fn_rate"])) < 1e-9
    assert overall["ci_lo"] <= overall["error_rate"] <= overall["ci_hi"]
    by_system = pl.read_csv(offline_run / "breakdown" / "by_system.csv")
    assert {"agent_as_a_judge @ GPT-Pilot", "agent_as_a_judge @ MetaGPT", "agent_as_a_judge @ OpenHands"} <= set(
        by_system.columns
    )
    assert (offline_run / "breakdown" / "gap_agent_as_a_judge.csv").exists()
    assert (offline_run / "breakdown" / "breakdown_weighted.csv").exists()


def test_breakdown_with_unmatched_verdicts_is_one_clear_line(offline_run, offline_env, tmp_path):
    table = tmp_path / "verdicts.csv"
    table.write_text("criterion_id,verifier,verdict\nnope/1,human,met\nnope/1,judge,unmet\n")
    result = invoke("breakdown", offline_run, "--verdicts", str(table), ok=False)
    assert (
        result.exit_code == 2 and "no verdict matches a tagged criterion" in result.output and "fix:" in result.output
    )
