"""`taxonomy export` on an offline run over the bundled DevAI data, each format checked through the real
parser or library: vally's eval.yaml through PyYAML and its JSON Schema, OpenJudge's graders.json through
py-openjudge (LLMGrader.from_config, then a grade through OpenAIChatModel against the local OpenAI-shaped
server), the Gandalf markdown against `taxonomy guidance`, and routing.jsonl joined back to the run."""

from __future__ import annotations

import asyncio
import copy
import json
import re
import shutil
from pathlib import Path

import jsonschema
import polars as pl
import pytest
import yaml
from openjudge.graders.llm_grader import LLMGrader
from openjudge.graders.schema import GraderScore

from taxonomy.config import ExportConfig
from taxonomy.guidance import NO_DRAFT, GuidanceAnswer
from taxonomy.guidance.openjudge import build_graders, grader_config
from taxonomy.guidance.files import task_filename
from taxonomy.guidance.routes import ExportError, load_tasks
from taxonomy.guidance.vally import SCHEMA_PATH, build_eval, eval_yaml, validate_eval
from taxonomy.schemas import Taxonomy, TaxonomyCapability
from taxonomy.taxonomy_io import load_taxonomy
from tests.conftest import ROOT, invoke, offline_devai_run
from tests.test_judge_text import FIGURE, split_prompt
from tests.fake_gemini import FakeGeminiServer


@pytest.fixture(scope="module")
def devai_run(tmp_path_factory) -> Path:
    # The bundled pipeline itself (`taxonomy run pipelines/devai.toml`), run offline into a temporary folder.
    return offline_devai_run(
        tmp_path_factory.mktemp("export"),
        ("guidance", "-q"),
        ("export", "--to", "all", "-q"),
        pipeline=ROOT / "pipelines" / "devai.toml",
    )


@pytest.fixture(autouse=True)
def _offline(offline_env):
    return offline_env


def _run_tables(run: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    return pl.read_parquet(run / "criteria.parquet"), pl.read_parquet(run / "stage3_tags.parquet")


# ---- vally -----------------------------------------------------------------------------
def test_vally_eval_parses_validates_and_routes_every_criterion(devai_run):
    path = devai_run / "export" / "vally" / "eval.yaml"
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    jsonschema.validate(doc, json.loads(SCHEMA_PATH.read_text()))  # the schema file itself, not only our wrapper
    criteria, tags = _run_tables(devai_run)
    briefs = dict(criteria.group_by("task_id", maintain_order=True).agg(pl.col("brief").first()).iter_rows())
    assert [s["name"] for s in doc["stimuli"]] == list(briefs)  # one stimulus per task, corpus order
    routed: set[tuple[str, str]] = set()
    for stimulus in doc["stimuli"]:
        assert stimulus["prompt"] == briefs[stimulus["name"]]
        for grader in stimulus["graders"]:
            cfg = grader["config"]
            assert grader["type"] == "prompt" and cfg["scoring"] == "binary" and cfg["threshold"] == 0.5
            assert "model" not in cfg  # no judge model configured: vally's own default applies
            cap = re.search(r"one kind of check: .*?\(`(\w+)`\)", cfg["prompt"]).group(1)
            assert (
                "# Judge guidance" not in cfg["prompt"]
                and "## How to check" in cfg["prompt"]
                and "### What the check needs" in cfg["prompt"]
            )
            for cid in re.findall(
                r"^\d+\. \[weight [+-][\d.e+]+(?:, penalty)?\] .* \(criterion (\S+)\)$", cfg["prompt"], flags=re.M
            ):
                routed.add((cid, cap))
            assert len(cfg["prompt"]) <= ExportConfig().max_prompt_chars
    expected = {(r["criterion_id"], t) for r in tags.iter_rows(named=True) for t in r["tags"]}
    assert routed == expected  # each criterion reaches exactly the graders of the capabilities it is tagged with


def test_offline_devai_guidance_states_no_figure_its_criteria_do_not(devai_run):
    """DevAI names things with numbers ("20 Newsgroups", "ResNet-18"): a judge is never told to compare a figure
    that the criteria in front of it do not state."""
    doc = yaml.safe_load((devai_run / "export" / "vally" / "eval.yaml").read_text(encoding="utf-8"))
    prompts = [g["config"]["prompt"] for s in doc["stimuli"] for g in s["graders"]]
    for prompt in prompts:
        guidance, criteria = split_prompt(prompt)
        assert set(FIGURE.findall(guidance)) <= set(FIGURE.findall(criteria)), guidance[:300]
    assert any("20 Newsgroups" in p for p in prompts) and not any("Compare each figure" in p for p in prompts)


def test_a_broken_eval_fails_the_schema(devai_run):
    doc = yaml.load((devai_run / "export" / "vally" / "eval.yaml").read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
    assert validate_eval(doc) == []
    doc["stimuli"] = doc["stimuli"][:3]  # each breakage below is in the first three
    breakages = {
        "scoring": lambda d: d["stimuli"][0]["graders"][0]["config"].update(scoring="pass_fail"),
        "threshold": lambda d: d["stimuli"][0]["graders"][0]["config"].update(threshold=1.5),
        "rubric": lambda d: d["stimuli"][0]["graders"][0]["config"].update(rubric="an undocumented field"),
        "name": lambda d: d["stimuli"][1].pop("name"),
        "graders": lambda d: d["stimuli"][2].update(graders=[]),
    }
    for word, breakage in breakages.items():
        broken = copy.deepcopy(doc)
        breakage(broken)
        problems = validate_eval(broken)
        assert problems and word in " ".join(problems), (word, problems)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, json.loads(SCHEMA_PATH.read_text()))
    small = {
        "stimuli": [
            {"name": "t", "prompt": "p", "graders": [{"type": "prompt", "config": {"prompt": "x", "scoring": "stars"}}]}
        ]
    }
    with pytest.raises(ExportError, match="does not match"):  # the exporter refuses to write a file that fails it
        eval_yaml(small, "header")


def _small_run() -> tuple[Taxonomy, list, dict]:
    caps = [
        TaxonomyCapability(
            name=f"{w}_check_capability",
            description=f"Check the {w}.",
            diagnostic_signal="",
            example_pattern="",
            non_examples=[],
            members=[],
        )
        for w in ("file", "number")
    ]
    taxonomy = Taxonomy(capabilities=caps)
    rows = [
        (
            "t1",
            f"t1-c{i}",
            f"Criterion {i} about {'files' if i % 2 else 'numbers'} " + "x" * 300,
            2.0 if i else -3.0,
            "penalty" if i == 0 else "reward",
            "The brief of t1.",
        )
        for i in range(12)
    ]
    criteria = pl.DataFrame(
        rows, schema=["task_id", "criterion_id", "text", "weight", "direction", "brief"], orient="row"
    )
    tags = pl.DataFrame(
        {"criterion_id": [r[1] for r in rows], "tags": [[caps[i % 2].name] if i < 11 else [] for i in range(12)]}
    )
    drafts = {
        c.name: GuidanceAnswer(
            summary=f"How to check {c.name}.", procedure=["Open it."], evidence=["The file."], pitfalls=["None."]
        )
        for c in caps
    }
    return taxonomy, load_tasks(taxonomy, criteria, tags), drafts


def test_vally_splits_long_graders_and_signs_weights_and_penalties():
    taxonomy, tasks, drafts = _small_run()
    whole = build_eval(tasks, taxonomy, drafts, ExportConfig(threshold=0.75, judge_model="judge-x"))
    graders = whole["stimuli"][0]["graders"]
    # two capabilities, plus the untagged criterion in a grader of its own (never dropped)
    assert len(graders) == 3 and all(
        g["config"]["model"] == "judge-x" and g["config"]["threshold"] == 0.75 for g in graders
    )
    text = "\n".join(g["config"]["prompt"] for g in graders)
    assert "1. [weight -3, penalty] Criterion 0 about numbers" in text and "[weight +2] Criterion 1 about files" in text
    assert "t1-c11" in graders[-1]["config"]["prompt"] and "no capability tag" in graders[-1]["config"]["prompt"]

    split = build_eval(tasks, taxonomy, drafts, ExportConfig(max_prompt_chars=2000))
    parts = split["stimuli"][0]["graders"]
    assert len(parts) > 3 and all(len(g["config"]["prompt"]) <= 2000 for g in parts)
    assert "(part 1 of " in parts[0]["config"]["prompt"]
    ids = re.findall(r"\(criterion (\S+)\)", "\n".join(g["config"]["prompt"] for g in parts))
    assert sorted(ids) == sorted(c.criterion_id for c in tasks[0].criteria)  # split, none lost or doubled
    assert validate_eval(split) == []
    with pytest.raises(ExportError, match="max_prompt_chars"):
        build_eval(tasks, taxonomy, drafts, ExportConfig(max_prompt_chars=500))


# ---- OpenJudge -------------------------------------------------------------------------
def _judge(req) -> dict:
    """The local judge: passes the work only when the agent's work shows the saved model file."""
    prompt = req.texts[-1]
    ok = "fashionnet.pt saved" in prompt
    return {
        "reason": "the saved model file is shown" if ok else "no evidence of the saved model",
        "score": 1 if ok else 0,
    }


def test_openjudge_graders_load_and_grade_through_the_real_library(devai_run, monkeypatch):
    folder = devai_run / "export" / "openjudge"
    configs = json.loads((folder / "graders.json").read_text(encoding="utf-8"))
    taxonomy = json.loads((devai_run / "taxonomy.json").read_text(encoding="utf-8"))
    assert [c["name"] for c in configs] == [c["name"] for c in taxonomy["capabilities"]]
    monkeypatch.setenv(
        "OPENAI_API_KEY", "local-test-key"
    )  # OpenAIChatModel builds its client (and wants a key) on load
    graders = {c["name"]: LLMGrader.from_config(copy.deepcopy(c)) for c in configs}
    for name, grader in graders.items():
        user = grader.template.to_messages()[-1].content
        assert grader.name == name and grader.mode == "pointwise" and grader.description
        assert {"{task}", "{criteria}", "{response}"} <= set(re.findall(r"(?<!\{)\{\w+\}(?!\})", user))

    lines = [json.loads(line) for line in (folder / "inputs.jsonl").read_text(encoding="utf-8").splitlines()]
    criteria, tags = _run_tables(devai_run)
    assert {(cid, line["grader"]) for line in lines for cid in line["criterion_ids"]} == {
        (r["criterion_id"], t) for r in tags.iter_rows(named=True) for t in r["tags"]
    }
    sample = lines[0]

    with FakeGeminiServer(responder=_judge) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        grader = LLMGrader.from_config(copy.deepcopy(next(c for c in configs if c["name"] == sample["grader"])))

        async def grade_two():  # one event loop: the SDK's async client keeps its connections on it
            return (
                await grader.aevaluate(
                    **sample["inputs"], response="Training finished; models/saved_models/fashionnet.pt saved."
                ),
                await grader.aevaluate(**sample["inputs"], response="I could not finish training."),
            )

        good, bad = asyncio.run(grade_two())
        sent = server.requests
    assert isinstance(good, GraderScore) and good.score == 1 and good.reason == "the saved model file is shown"
    assert isinstance(bad, GraderScore) and bad.score == 0 and bad.reason == "no evidence of the saved model"
    assert len(sent) == 2 and sent[0].mode == "openai" and sent[0].model == configs[0]["model"]["model"]
    user = sent[0].texts[-1]
    assert (
        sample["inputs"]["criteria"] in user and sample["inputs"]["task"] in user and "### What the check needs" in user
    )


def test_openjudge_untagged_criteria_get_a_grader_of_their_own(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "local-test-key")
    taxonomy, tasks, drafts = _small_run()
    graders, lines = build_graders(tasks, taxonomy, drafts, "judge-model")
    assert [g["name"] for g in graders] == [*taxonomy.names(), "untagged"]
    assert {line["grader"] for line in lines} == {*taxonomy.names(), "untagged"}
    assert [line["criterion_ids"] for line in lines if line["grader"] == "untagged"] == [["t1-c11"]]
    assert (
        "[weight -3, penalty] Criterion 0"
        in next(line for line in lines if "t1-c0" in line["criterion_ids"])["inputs"]["criteria"]
    )
    for g in graders:
        assert LLMGrader.from_config(copy.deepcopy(g)).model.model == "judge-model"


def test_openjudge_template_keeps_braces_in_guidance_literal(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "local-test-key")
    cfg = grader_config("cap", "d", "Cap", 'Compare the {placeholder} in `f"{x}"` literally.', "judge-model")
    grader = LLMGrader.from_config(copy.deepcopy(cfg))
    messages = grader.template.format(task="T", criteria="1. [weight +1] C", response="R")
    assert 'Compare the {placeholder} in `f"{x}"` literally.' in messages[-1]["content"]
    assert '{"reason"' in messages[0]["content"]


# ---- Gandalf and jsonl -------------------------------------------------------------------
def test_gandalf_is_the_run_guidance_with_its_routing_table(devai_run):
    gandalf, guidance = devai_run / "export" / "gandalf", devai_run / "guidance"
    names = sorted(p.relative_to(guidance).as_posix() for p in guidance.rglob("*.md"))
    assert names == sorted(p.relative_to(gandalf).as_posix() for p in gandalf.rglob("*.md")) and len(names) == 9 + 55
    for name in names:
        assert (gandalf / name).read_text(encoding="utf-8") == (guidance / name).read_text(encoding="utf-8")
    routing = pl.read_csv(gandalf / "routing.csv")
    assert routing.height == 365 and routing.equals(pl.read_csv(guidance / "routing.csv"))
    assert all((gandalf / f).exists() for f in routing["task_file"].unique())


def test_routing_jsonl_lines_join_to_the_run(devai_run):
    out = devai_run / "export"
    lines = [json.loads(line) for line in (out / "routing.jsonl").read_text(encoding="utf-8").splitlines()]
    sections = {
        s["id"]: s for s in map(json.loads, (out / "guidance_sections.jsonl").read_text(encoding="utf-8").splitlines())
    }
    criteria, tags = _run_tables(devai_run)
    joined = (
        pl.DataFrame(lines)
        .join(criteria, on="criterion_id", how="inner", suffix="_run")
        .join(tags, on="criterion_id", suffix="_tag")
    )
    assert joined.height == len(lines) == criteria.height
    for r in joined.iter_rows(named=True):
        assert r["criterion"] == r["text"] and r["task_id"] == r["task_id_run"] and r["weight"] == r["weight_run"]
        assert r["capabilities"] == r["tags"] and r["capabilities"][:1] == [r["primary"]]
        assert r["guidance_sections"] and all(s in sections for s in r["guidance_sections"])
    # an offline run: no model drafted any section, and each says so first
    assert all(
        not s["drafted"] and not s["procedure"] and s["markdown"].startswith(NO_DRAFT) for s in sections.values()
    )


# ---- the command ---------------------------------------------------------------------------
def test_out_folder_and_subset_of_formats(devai_run, tmp_path):
    result = invoke("export", devai_run, "--to", "vally,jsonl", "--out", tmp_path / "x")
    assert "vally:" in result.output and "jsonl:" in result.output and "openjudge" not in result.output
    assert sorted(p.name for p in (tmp_path / "x").iterdir()) == ["guidance_sections.jsonl", "routing.jsonl", "vally"]
    manifest = json.loads((devai_run / "manifest.json").read_text())
    assert set(manifest["stages"]["export"]["formats"]) == {"vally", "jsonl"}


def test_bad_requests_are_one_line_with_exit_2(devai_run, tmp_path):
    unknown = invoke("export", devai_run, "--to", "yaml", ok=False)
    assert unknown.exit_code == 2 and "unknown export format" in unknown.output and "fix:" in unknown.output

    run = tmp_path / "run"
    shutil.copytree(devai_run, run, ignore=shutil.ignore_patterns("export", "report.html"))
    tags = pl.read_parquet(run / "stage3_tags.parquet")
    tags.with_columns(
        pl.when(pl.int_range(pl.len()) == 0)
        .then(pl.lit(["made_up_capability"]))
        .otherwise(pl.col("tags"))
        .alias("tags")
    ).write_parquet(run / "stage3_tags.parquet")
    stray = invoke("export", run, ok=False)
    assert stray.exit_code == 2 and "made_up_capability" in stray.output and "taxonomy tag" in stray.output
    assert not (run / "export" / "vally").exists()  # nothing half-written

    tags.write_parquet(run / "stage3_tags.parquet")
    (run / "guidance" / "drafts.json").write_text("{not json")
    damaged = invoke("export", run, ok=False)
    assert damaged.exit_code == 2 and "drafts.json" in damaged.output and "fix:" in damaged.output


def test_other_domain_notes_draft_the_guidance_again(devai_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(devai_run, run, ignore=shutil.ignore_patterns("export", "report.html"))
    notes = tmp_path / "notes.md"
    notes.write_text("- A saved model file must be opened and loaded, not only listed in the directory.\n")
    first = invoke("export", run, "--to", "jsonl", "--notes", notes)
    again = invoke("export", run, "--to", "jsonl", "--notes", notes)
    assert "drafted for this export" in first.output and "drafted for this export" not in again.output
    # no model ran to weave them in, so no line of them is placed in a section as if one had
    sections = (run / "export" / "guidance_sections.jsonl").read_text(encoding="utf-8")
    assert "A saved model file must be opened and loaded" not in sections


def test_drafts_from_other_inputs_are_drafted_again(devai_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(devai_run, run, ignore=shutil.ignore_patterns("export", "report.html"))
    reused = invoke("export", run, "--to", "jsonl")
    assert "drafted for this export" not in reused.output
    drafts = json.loads((run / "guidance" / "drafts.json").read_text())
    drafts["inputs"] = "0" * 64  # as if drafted before a re-tag
    (run / "guidance" / "drafts.json").write_text(json.dumps(drafts))
    redrafted = invoke("export", run, "--to", "jsonl")
    assert "drafted for this export" in redrafted.output
    assert json.loads((run / "guidance" / "drafts.json").read_text())["inputs"] != "0" * 64


# ---- design principles P2/P3 in every format ---------------------------------------
HEADS = {
    "needs_native_inspection": "**Native inspection (P2):**",
    "needs_domain_conventions": "**Domain conventions (P3):**",
}
SAYS = {True: "needed", False: "not needed", None: "unknown"}
WORDS = {True: "yes", False: "no", None: "unknown"}


def _judge_text(cap: dict) -> list[str]:
    """What a grader must be told for one capability: each principle's value, and the reason of a decided one
    (an unknown one's reason says why the tool could not decide, which no grader can act on)."""
    out = []
    for field, head in HEADS.items():
        out.append(f"{head} {SAYS[cap[field]]}")
        if cap[field] is not None:
            out.append(" ".join(cap[f"{field}_reason"].split()))
    return out


def _criterion_value(values: list[bool | None]) -> bool | None:
    return True if True in values else False if values and all(v is False for v in values) else None


def assert_principles_exported(run: Path) -> None:
    caps = {c["name"]: c for c in json.loads((run / "taxonomy.json").read_text(encoding="utf-8"))["capabilities"]}
    out = run / "export"
    criteria, tags = _run_tables(run)
    tags_of = dict(tags.select("criterion_id", "tags").iter_rows())
    expected = {
        cid: {f: _criterion_value([caps[t][f] for t in tags_of.get(cid) or []]) for f in HEADS}
        for cid in criteria["criterion_id"]
    }

    # vally: in every grader's prompt, still valid against the schema; the header lists them.
    text = (out / "vally" / "eval.yaml").read_text(encoding="utf-8")
    doc = yaml.safe_load(text)
    jsonschema.validate(doc, json.loads(SCHEMA_PATH.read_text()))
    assert text.splitlines()[1].startswith("# Native inspection (P2): ")
    for grader in (g for s in doc["stimuli"] for g in s["graders"]):
        prompt = " ".join(grader["config"]["prompt"].split())
        found = re.search(r"one kind of check: .*?\(`(\w+)`\)", prompt)
        if found is None:  # untagged criteria: no capability, so no principle to state
            assert "Native inspection (P2)" not in prompt
            continue
        for piece in _judge_text(caps[found.group(1)]):
            assert piece in prompt, (found.group(1), piece)

    # OpenJudge: in the prompt the real library loads, at the end of the description, and on each inputs line.
    configs = json.loads((out / "openjudge" / "graders.json").read_text(encoding="utf-8"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_API_KEY", "local-test-key")
        for cfg in configs:
            user = " ".join(LLMGrader.from_config(copy.deepcopy(cfg)).template.to_messages()[-1].content.split())
            if cfg["name"] in caps:
                cap = caps[cfg["name"]]
                assert all(piece in user for piece in _judge_text(cap)), cfg["name"]
                assert cfg["description"].endswith(
                    f"P2 needs native inspection: {WORDS[cap['needs_native_inspection']]}; "
                    f"P3 needs domain conventions: {WORDS[cap['needs_domain_conventions']]}."
                )
    for line in map(json.loads, (out / "openjudge" / "inputs.jsonl").read_text(encoding="utf-8").splitlines()):
        for field in HEADS:
            assert line[field] == (caps[line["grader"]][field] if line["grader"] in caps else None)

    # Gandalf: in each capability file and task section, and as routing.csv columns (yes / no / unknown).
    for name, cap in caps.items():
        body = " ".join((out / "gandalf" / f"{name}.md").read_text(encoding="utf-8").split())
        assert all(piece in body for piece in _judge_text(cap)), name
    task_md = " ".join(
        (out / "gandalf" / "tasks" / f"{task_filename(criteria['task_id'][0])}.md").read_text(encoding="utf-8").split()
    )
    assert task_md.count(HEADS["needs_native_inspection"]) == len(
        {
            t
            for cid in criteria.filter(pl.col("task_id") == criteria["task_id"][0])["criterion_id"]
            for t in tags_of.get(cid) or []
        }
    )
    routing = pl.read_csv(out / "gandalf" / "routing.csv")
    for r in routing.iter_rows(named=True):
        assert {f: r[f] for f in HEADS} == {f: WORDS[v] for f, v in expected[r["criterion_id"]].items()}, r[
            "criterion_id"
        ]

    # routing.jsonl: per criterion; guidance_sections.jsonl: per capability, with the reasons.
    lines = [json.loads(line) for line in (out / "routing.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(lines) == criteria.height
    for line in lines:
        assert {f: line[f] for f in HEADS} == expected[line["criterion_id"]], line["criterion_id"]
    for section in map(json.loads, (out / "guidance_sections.jsonl").read_text(encoding="utf-8").splitlines()):
        cap = caps[section["capability"]]
        for field in HEADS:
            assert section[field] == cap[field] and section[f"{field}_reason"] == cap[f"{field}_reason"]


def test_llm_run_exports_carry_decided_principles(llm_exported_run):
    caps = json.loads((llm_exported_run / "taxonomy.json").read_text(encoding="utf-8"))["capabilities"]
    assert all(
        isinstance(c["needs_native_inspection"], bool) and isinstance(c["needs_domain_conventions"], bool) for c in caps
    )
    assert_principles_exported(llm_exported_run)
    lines = [
        json.loads(line)
        for line in (llm_exported_run / "export" / "routing.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert any({line[f] for line in lines} == {True, False} for f in HEADS)  # both values reach criteria


def test_offline_run_exports_say_unknown(devai_run):
    caps = json.loads((devai_run / "taxonomy.json").read_text(encoding="utf-8"))["capabilities"]
    assert any(c["needs_native_inspection"] is None for c in caps)
    assert_principles_exported(devai_run)
    prompt = (devai_run / "export" / "vally" / "eval.yaml").read_text(encoding="utf-8")
    assert "**Native inspection (P2):** unknown: not decided for this kind of check" in prompt
    assert "offline backend" not in prompt and "LLM merge" not in prompt


def test_the_vally_header_names_the_hash_taxonomy_json_has(tmp_path, offline_run):
    run = offline_run
    invoke("export", run, "--to", "vally", "-q")
    content_hash = load_taxonomy(run / "taxonomy.json").content_hash
    header = (run / "export" / "vally" / "eval.yaml").read_text().split("\n\n", 1)[0]
    named = re.findall(r"taxonomy ([0-9a-f]{16})", header)
    assert named == [content_hash], header
    assert f"content hash `{content_hash}`" in (run / "taxonomy.md").read_text()
