"""`taxonomy edit RUN rename | merge | split`: a new taxonomy hash, constraints re-checked, tags propagated."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import polars as pl
import pytest
import yaml
from openjudge.graders.llm_grader import LLMGrader

from taxonomy.diff import diff_runs
from taxonomy.guidance.vally import validate_eval
from taxonomy.schemas import Taxonomy
from tests import responders
from tests.conftest import ROOT, devai_frame, invoke, offline_devai_run, write_pipeline
from tests.test_report import Page


def _taxonomy(run) -> Taxonomy:
    return Taxonomy.model_validate_json((run / "taxonomy.json").read_text())


def _tags(run) -> pl.DataFrame:
    return pl.read_parquet(run / "stage3_tags.parquet")


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory):
    return offline_devai_run(tmp_path_factory.mktemp("edit"), ("report",))


@pytest.fixture
def run(offline_run, tmp_path, offline_env):
    copy = tmp_path / "run"
    shutil.copytree(offline_run, copy)
    return copy


def test_rename_writes_a_new_hash_and_renames_the_tags(run):
    before, tags_before = _taxonomy(run), _tags(run)
    old = before.capabilities[0].name
    invoke(
        "breakdown", run, "--verdicts", f"devai:{ROOT / 'data' / 'devai'}", "--boot", "0"
    )  # built from the old taxonomy
    result = invoke("edit", run, "rename", old, "renamed_result_checking_capability")
    after, tags_after = _taxonomy(run), _tags(run)
    assert after.content_hash == after.compute_hash() != before.content_hash
    assert after.names()[0] == "renamed_result_checking_capability" and old not in after.names()
    assert tags_after["tags"].to_list() == [
        [("renamed_result_checking_capability" if t == old else t) for t in ts] for ts in tags_before["tags"].to_list()
    ]
    assert not any(old in ne for c in after.capabilities for ne in c.non_examples)
    assert f"{before.content_hash} -> {after.content_hash}" in result.output
    assert f"stale: breakdown/ was computed with taxonomy {before.content_hash}" in " ".join(result.output.split())
    manifest = json.loads((run / "manifest.json").read_text())
    assert (
        manifest["edits"][-1]["from_hash"] == before.content_hash
        and manifest["stages"]["tag"]["taxonomy_hash"] == after.content_hash
    )
    report = Page((run / "report.html").read_text())  # redrawn: new hash, old breakdown not shown as current
    assert after.content_hash in " ".join(report.text) and "not computed" in report.section("breakdown")
    invoke("breakdown", run, "--verdicts", f"devai:{ROOT / 'data' / 'devai'}", "--boot", "0")  # the tags are accepted
    # The replaced taxonomy stays as a run of its own: the diff sees a pure rename.
    d = diff_runs(run / "edits" / before.content_hash, run)
    assert d.ari == pytest.approx(1.0) and [(m.a, m.b) for m in d.renamed] == [
        (old, "renamed_result_checking_capability")
    ]


def test_merge_that_breaks_a_constraint_is_refused_unless_allowed(run):
    # Merges within the 8-10 range go through; the one that would leave 7 capabilities is refused.
    while len(_taxonomy(run).capabilities) > 8:
        a, b = _taxonomy(run).names()[-2:]
        invoke("edit", run, "merge", a, b)
    before = _taxonomy(run)
    a, b = before.names()[-2:]
    raw_before = (run / "taxonomy.json").read_text()
    result = invoke("edit", run, "merge", a, b, ok=False)
    assert result.exit_code == 2 and "breaks" in result.output and "--accept-violations" in result.output
    assert (run / "taxonomy.json").read_text() == raw_before  # nothing written

    invoke("edit", run, "merge", a, b, "--accept-violations")
    after = _taxonomy(run)
    assert b not in after.names() and len(after.capabilities) == 7
    merged = after.capabilities[after.names().index(a)]
    assert set(merged.members) == set(before.capabilities[-2].members) | set(before.capabilities[-1].members)
    assert sum(c.share for c in after.capabilities) == pytest.approx(1.0, abs=1e-4)
    recorded = getattr(after, "violations", None) or [r.removeprefix("unresolved: ") for r in after.repairs]
    assert any(r.startswith("you gave 7 capabilities") for r in recorded)
    assert all(b not in ts for ts in _tags(run)["tags"].to_list())
    assert "Some constraints do not hold" in (run / "report.html").read_text()


def test_split_offline_names_the_parts_from_their_own_criteria_and_retags(run):
    before, tags_before = _taxonomy(run), _tags(run)
    target = max((c for c in before.capabilities if len(c.members) >= 2), key=lambda c: c.share)
    affected = tags_before.filter(pl.col("tags").list.contains(target.name)).height
    result = invoke("edit", run, "split", target.name)
    after, tags_after = _taxonomy(run), _tags(run)
    assert len(after.capabilities) == len(before.capabilities) + 1
    parts = [c for c in after.capabilities if set(c.members) <= set(target.members)]
    assert len(parts) == 2 and sorted(parts[0].members + parts[1].members) == sorted(target.members)
    # offline: each part titled and named from its own criteria's phrases, as the merge names a capability
    assert all(p.name not in before.names() and p.title and p.description.startswith("Criteria such as") for p in parts)
    assert parts[0].name != parts[1].name and parts[0].title != parts[1].title
    assert f"{affected} criteria re-tagged" in result.output
    assert set(tags_after["primary"].drop_nulls()) <= set(after.names()) and tags_after.height == tags_before.height
    untouched = tags_before.filter(~pl.col("tags").list.contains(target.name))
    assert (
        tags_after.join(untouched.select("criterion_id"), on="criterion_id")["tags"].to_list()
        == untouched["tags"].to_list()
    )
    assert not [r for r in after.repairs if r.startswith("unresolved")], after.repairs


def _header(run) -> str:
    return next(line for line in (run / "taxonomy.md").read_text().splitlines() if line.startswith("| capability |"))


def test_taxonomy_md_keeps_its_columns_through_a_split(run):
    """A key-less run's taxonomy.md says once that P2/P3 are unknown; after a split its parts came with no
    answer and the table grew P1/P2/P3 columns of "?"."""
    before = _header(run)
    target = max((c for c in _taxonomy(run).capabilities if len(c.members) >= 2), key=lambda c: c.share)
    invoke("edit", run, "split", target.name, "--allow-violations", "-q")
    assert "P2" not in before and _header(run) == before.replace("stability | ", "")
    parts = [c for c in _taxonomy(run).capabilities if set(c.members) < set(target.members)]
    assert all(p.needs_native_inspection_reason == target.needs_native_inspection_reason for p in parts)


def test_bad_edits_are_one_line_and_change_nothing(run):
    raw = (run / "taxonomy.json").read_text()
    names = _taxonomy(run).names()
    for args, expected in (
        (
            ("rename", "no_such_thing_capability", "other_new_name_capability"),
            "no capability `no_such_thing_capability`",
        ),
        (("rename", names[0], "Bad Name"), "`Bad Name`"),
        (("rename", names[0], names[1]), "already a capability"),
        (("merge", names[0]), "takes 2 capability name(s)"),
        (("squash", names[0]), "unknown edit"),
    ):
        result = invoke("edit", run, *args, ok=False)
        assert result.exit_code == 2 and expected in result.output, (args, result.output)
        assert len(result.output.strip().splitlines()) <= 2  # the Backend line and the error
    assert (run / "taxonomy.json").read_text() == raw


def test_split_on_the_llm_path_names_parts_through_the_runner(gemini_env, tmp_path):
    run = tmp_path / "run"
    invoke("run", write_pipeline(tmp_path), "--run-dir", run, "-q", "--no-report")
    before, tags_before = _taxonomy(run), _tags(run)
    target = max((c for c in before.capabilities if len(c.members) >= 2), key=lambda c: c.share)
    affected = tags_before.filter(pl.col("tags").list.contains(target.name)).height
    gemini_env.reset()
    result = invoke("edit", run, "split", target.name)
    asked = [r for r in gemini_env.requests if r.kind == "generate" and responders.kind(r.texts[0]) == "split"]
    assert len(asked) == 1
    named = [p["name"] for p in responders.split_names(asked[0].texts[0])["parts"]]
    after = _taxonomy(run)
    assert set(named) <= set(after.names()) and len(after.capabilities) == len(before.capabilities) + 1
    retag_calls = [r for r in gemini_env.requests if r.kind == "generate" and responders.kind(r.texts[0]) == "tag"]
    tagged_in_calls = sum(len(responders.criteria(r.texts[0])) for r in retag_calls)
    assert tagged_in_calls == affected and f"{affected} criteria re-tagged" in result.output
    assert set(_tags(run)["primary"].drop_nulls()) <= set(after.names())


def test_edit_refuses_tags_made_with_another_taxonomy(run):
    raw = json.loads((run / "taxonomy.json").read_text())
    raw["capabilities"][0]["description"] = "Hand-edited since the tags were made."
    (run / "taxonomy.json").write_text(json.dumps(raw))
    names = _taxonomy(run).names()
    result = invoke("edit", run, "rename", names[0], "renamed_result_checking_capability", ok=False)
    assert result.exit_code == 2 and "re-tag" in result.output


def test_describe_says_what_a_capability_checks_wherever_its_description_goes(run, tmp_path, monkeypatch):
    """The offline texts quote and count the criteria; a person who has read them states what a capability checks.
    taxonomy.md, the report and every export carry the sentence, marked as the person's; tags and list stay."""
    before, tags_before = _taxonomy(run), _tags(run)
    assert 'describe NAME "what it checks"' in (run / "taxonomy.md").read_text()  # the offline file says how
    name = before.capabilities[1].name
    sentence = "Checks that each output file is saved at the path the task names"
    invoke("edit", run, "describe", name, f"  {sentence}\n")
    after = _taxonomy(run)
    assert after.capabilities[1].checks == sentence + "." and not any(
        c.checks for c in after.capabilities if c.name != name
    )
    assert after.content_hash == after.compute_hash() != before.content_hash
    assert _tags(run).equals(tags_before)
    stated = f"What it checks, as stated by a person:** {sentence}."
    md = (run / "taxonomy.md").read_text()
    assert md.count(stated) == 2  # the table and its section
    assert f"What it checks, as stated by a person: {sentence}." in " ".join(
        " ".join(Page((run / "report.html").read_text()).text).split()
    )

    out = tmp_path / "export"
    invoke("export", run, "--to", "all", "--out", out, "-q")
    said = f"What it checks, as stated by a person: {sentence}."
    graders = {c["name"]: c for c in json.loads((out / "openjudge" / "graders.json").read_text(encoding="utf-8"))}
    assert said in graders[name]["description"] and not any(
        said in c["description"] for n, c in graders.items() if n != name
    )
    sections = [json.loads(line) for line in (out / "guidance_sections.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [s["capability"] for s in sections if said in s["description"]] == [name]
    # in the judge prompts of the graders that check it, through the real loaders
    doc = yaml.safe_load((out / "vally" / "eval.yaml").read_text(encoding="utf-8"))
    assert validate_eval(doc) == []
    prompts = [g["config"]["prompt"] for st in doc["stimuli"] for g in st["graders"]]
    assert [p for p in prompts if said in " ".join(p.split())] == [p for p in prompts if f"(`{name}`)" in p] != []
    monkeypatch.setenv(
        "OPENAI_API_KEY", "local-test-key"
    )  # OpenAIChatModel builds its client (and wants a key) on load
    assert said in LLMGrader.from_config(copy.deepcopy(graders[name])).description
    assert said in "".join(p.read_text(encoding="utf-8") for p in (out / "gandalf").rglob("*.md"))

    # taken back with an empty statement: the taxonomy is the one before, hash and all
    invoke("edit", run, "describe", name, "")
    assert (
        _taxonomy(run).content_hash == before.content_hash
        and "as stated by a person" not in (run / "taxonomy.md").read_text()
    )


def test_bad_describe_edits_are_one_line_and_change_nothing(run):
    raw = (run / "taxonomy.json").read_text()
    name = _taxonomy(run).names()[0]
    for args, expected in (
        (("describe", name), "takes a capability name and a sentence in quotes"),
        (("describe", "no_such_thing_capability", "Checks totals."), "no capability `no_such_thing_capability`"),
        (("describe", name, "word " * 80), "at most 300"),
        (("describe", name, "   "), "would not change"),  # nothing stated, nothing to take back
    ):
        result = invoke("edit", run, *args, ok=False)
        assert result.exit_code == 2 and expected in " ".join(result.output.split()), (args, result.output)
    assert (run / "taxonomy.json").read_text() == raw


def test_on_the_llm_path_the_tagging_prompt_carries_the_statement(gemini_env, tmp_path):
    pipeline = write_pipeline(tmp_path)
    run = tmp_path / "run"
    invoke("run", pipeline, "--run-dir", run, "-q", "--no-report")
    name = _taxonomy(run).names()[0]
    invoke("edit", run, "describe", name, "Checks that the trained model is saved where the task says")
    gemini_env.reset()
    invoke("run", pipeline, "--run-dir", run, "-q", "--no-report", "--force", "tag")
    asked = [r.texts[0] for r in gemini_env.requests if r.kind == "generate" and responders.kind(r.texts[0]) == "tag"]
    assert asked and all(
        "What it checks, as stated by a person: Checks that the trained model is saved where the task says."
        in " ".join(text.split())
        for text in asked
    )


# ---- an edit keeps tags, shares and a frozen-taxonomy audit in agreement


def primaries(run: Path) -> dict[str, str]:
    tags = pl.read_parquet(run / "stage3_tags.parquet")
    return dict(zip(tags["criterion_id"].to_list(), tags["primary"].to_list()))


def test_merge_keeps_tags_shares_and_a_frozen_audit_in_agreement(run, tmp_path, here):
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


def test_split_shares_are_those_of_the_tags(run):
    before = Taxonomy.model_validate_json((run / "taxonomy.json").read_text())
    target = max((c for c in before.capabilities if len(c.members) >= 2), key=lambda c: c.share)
    invoke("edit", run, "split", target.name, "--allow-violations")
    after, tags = Taxonomy.model_validate_json((run / "taxonomy.json").read_text()), primaries(run)
    assert len(after.capabilities) == len(before.capabilities) + 1
    for cap in after.capabilities:
        assert cap.share == pytest.approx(sum(p == cap.name for p in tags.values()) / len(tags), abs=1e-6), cap.name
