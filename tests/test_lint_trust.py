"""`taxonomy lint` findings a rubric author can trust, through the CLI: repeats grouped, compound noise left
alone, what was not checked said, --out and --min-severity, real file names and JSON pointers, the rule
table in docs/LINT.md generated from the registry."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from taxonomy.lint.rules import table
from tests.test_lint import _offline, base_rows, findings, lint, only, write  # noqa: F401 (_offline: autouse, no key, tmp_path as cwd)

ROOT = Path(__file__).resolve().parents[1]


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
