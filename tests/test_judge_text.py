"""What judges read from a key-less run carries no internals: every exported format of an
offline run over a customer-support rubric the tool never saw, read through its real loader, holds the criteria,
the grading rule, P2/P3 as unknown, one line saying no model drafted guidance and how to get it, and a person's
`describe` sentence; never corpus statistics, opening shares, boundary lines or figures its task's criteria do not
state."""

from __future__ import annotations

import copy
import csv
import json
import re
from pathlib import Path

import pytest
import yaml
from openjudge.graders.llm_grader import LLMGrader

from taxonomy.guidance import NO_DRAFT
from taxonomy.guidance.routes import BINARY, RULES
from taxonomy.guidance.vally import validate_eval
from tests.conftest import invoke

# A support rubric: each task quotes its own policy and figures, and some criteria are penalties.
TEMPLATES = [
    ("The response is polite and acknowledges the customer's frustration.", 2),
    ("The response is concise, under {words} words.", 1),
    ("The response explains {policy} accurately.", 3),
    ("The agent confirms the details of {thing} before acting.", 2),
    ("The agent offers a concrete next step within {days} business days.", 2),
    ("The agent does not promise anything outside {policy}.", 2),
    ("Uses the customer's name at least once.", 1),
    ("Apologizes without blaming the customer.", 1),
    ("The agent asks for verification before discussing {thing}.", 2),
    ("The response blames the customer for the problem.", -3),
    ("The agent shares another customer's personal information.", -5),
    ("The response uses a rude or sarcastic tone.", -2),
    ("The agent gives a reference number for {thing}.", 1),
    ("The response is short and uses plain language without jargon.", 1),
    ("The agent links to the help-center article on {policy}.", 1),
    ("The agent escalates to a supervisor if the customer asks twice.", 1),
]
TASKS = [
    ("refund_late_order", "A refund for an order that arrived late.", "the refund policy", "order 4471", 120, 3),
    ("password_reset", "A locked-out user cannot reset a password.", "the reset procedure", "the account", 90, 1),
    ("billing_double_charge", "A subscription was charged twice.", "the billing policy", "the invoice", 150, 5),
    (
        "shipping_address_change",
        "A customer wants a new shipping address.",
        "the shipping terms",
        "the shipment",
        100,
        2,
    ),
    ("product_defect", "A blender broke after two weeks.", "the warranty", "the replacement", 200, 10),
    ("cancel_subscription", "A user wants to cancel a premium plan.", "the cancellation terms", "the plan", 80, 7),
    ("angry_escalation", "An angry customer demands a manager.", "the escalation policy", "the case", 130, 4),
    (
        "data_privacy_request",
        "A user asks what data is held about them.",
        "the privacy policy",
        "the data request",
        250,
        30,
    ),
    ("promo_code_invalid", "A promo code is rejected at checkout.", "the promotion terms", "the discount", 60, 6),
    (
        "delivery_missing",
        "A parcel marked delivered never arrived.",
        "the delivery guarantee",
        "the carrier trace",
        170,
        14,
    ),
]
STATISTICS = (
    "%",
    "open with",
    "opens with",
    "Tagged here by mistake",
    "Criteria like this one",
    "prefer `",
    "Few open",
    "offline backend",
    "LLM merge",
)
FIGURE = re.compile(r"(?<![\w.#-])\d+(?:[.,]\d+)*(?![\w-])")
SENTENCE = "Checks that the reply is courteous and blames no one"


def write_corpus(path: Path) -> Path:
    """120 criteria: each task takes 12 of the 16 templates (rotating which 4 it leaves out)."""
    rows = []
    for i, (task, brief, policy, thing, words, days) in enumerate(TASKS):
        skipped = {(i + k * 4) % 16 for k in range(4)}
        for j, (text, weight) in enumerate(TEMPLATES):
            if j not in skipped:
                rows.append(
                    {
                        "task": task,
                        "criterion": text.format(policy=policy, thing=thing, words=words, days=days),
                        "weight": weight,
                        "brief": brief,
                    }
                )
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["task", "criterion", "weight", "brief"])
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def support_run(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("support")
    with pytest.MonkeyPatch.context() as mp:
        for key in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
            mp.delenv(key, raising=False)
        invoke("run", write_corpus(tmp / "support.csv"), "--run-dir", tmp / "run", "-q", "--no-report")
        invoke("guidance", tmp / "run", "-q")
        invoke("export", tmp / "run", "--to", "all", "-q")
    return tmp / "run"


@pytest.fixture(autouse=True)
def _offline(offline_env):
    return offline_env


def vally_prompts(folder: Path) -> list[str]:
    doc = yaml.safe_load((folder / "vally" / "eval.yaml").read_text(encoding="utf-8"))
    assert validate_eval(doc) == []
    return [g["config"]["prompt"] for s in doc["stimuli"] for g in s["graders"]]


def openjudge_texts(folder: Path, monkeypatch) -> dict[str, str]:
    """Each grader as the real library loads it: its description and its prompt."""
    monkeypatch.setenv("OPENAI_API_KEY", "local-test-key")  # OpenAIChatModel wants a key to build its client
    configs = json.loads((folder / "openjudge" / "graders.json").read_text(encoding="utf-8"))
    graders = {c["name"]: LLMGrader.from_config(copy.deepcopy(c)) for c in configs}
    return {name: g.description + "\n" + g.template.to_messages()[-1].content for name, g in graders.items()}


def judge_texts(folder: Path, monkeypatch) -> dict[str, str]:
    """Everything a judge reads from an export folder, by where it comes from."""
    texts = {f"vally {i}": p for i, p in enumerate(vally_prompts(folder))}
    texts |= {f"openjudge {n}": t for n, t in openjudge_texts(folder, monkeypatch).items()}
    texts |= {f"gandalf {p.name}": p.read_text(encoding="utf-8") for p in (folder / "gandalf").rglob("*.md")}
    for line in (folder / "guidance_sections.jsonl").read_text(encoding="utf-8").splitlines():
        section = json.loads(line)
        texts[f"jsonl {section['id']}"] = section["description"] + "\n" + section["markdown"]
    return texts


def split_prompt(prompt: str) -> tuple[str, str]:
    """(the guidance part, the criteria part) of a vally prompt."""
    guidance, rest = prompt.split("\n## How to check", 1)[1].split("\n## Criteria\n", 1)
    return guidance, rest.split("\n## How to grade\n", 1)[0]


def test_offline_exports_carry_no_corpus_statistics(support_run, monkeypatch):
    texts = judge_texts(support_run / "export", monkeypatch)
    assert len([k for k in texts if k.startswith("gandalf")]) > len(TASKS)  # capability files and one per task
    for where, text in texts.items():
        for word in STATISTICS:
            assert word not in text, (where, word)


def test_every_figure_a_judge_reads_is_one_its_criteria_state(support_run, monkeypatch):
    for prompt in vally_prompts(support_run / "export"):
        guidance, criteria = split_prompt(prompt)
        stated = set(FIGURE.findall(criteria))
        assert set(FIGURE.findall(guidance)) <= stated, (set(FIGURE.findall(guidance)) - stated, guidance[:300])
    for name, text in openjudge_texts(support_run / "export", monkeypatch).items():
        assert FIGURE.findall(text.split("## The task")[0]) == [], name  # a grader serves every task: no task's figures


def test_offline_prompts_say_in_one_line_that_no_model_drafted_guidance(support_run):
    prompts = vally_prompts(support_run / "export")
    for prompt in prompts:
        said = [line for line in prompt.splitlines() if "No model drafted" in line]
        assert said == [NO_DRAFT], said
        assert "**Native inspection (P2):** unknown" in prompt and "**Domain conventions (P3):** unknown" in prompt
        assert RULES in prompt and BINARY in prompt
        assert "### Procedure" not in prompt and "### Pitfalls" not in prompt
    assert (
        "`taxonomy guidance RUN_DIR`" in NO_DRAFT and "GEMINI_API_KEY" in NO_DRAFT and "--provider openai" in NO_DRAFT
    )
    # every criterion reaches a judge with its weight, penalties marked
    joined = "\n".join(prompts)
    assert "[weight -5, penalty] The agent shares another customer's personal information." in joined
    assert "[weight +3] The response explains the warranty accurately." in joined
    gandalf = (support_run / "export" / "gandalf" / "tasks" / "refund_late_order.md").read_text(encoding="utf-8")
    assert gandalf.count(NO_DRAFT) == 1


def test_a_persons_describe_sentence_reaches_every_format(support_run, tmp_path, monkeypatch):
    name = json.loads((support_run / "taxonomy.json").read_text(encoding="utf-8"))["capabilities"][0]["name"]
    invoke("edit", support_run, "describe", name, SENTENCE)
    try:
        out = tmp_path / "export"
        invoke("export", support_run, "--to", "all", "--out", out, "-q")
        said = f"What it checks, as stated by a person: {SENTENCE}."
        texts = {k: " ".join(t.split()) for k, t in judge_texts(out, monkeypatch).items()}
        prompts = [k for k in texts if k.startswith("vally ")]
        assert [k for k in prompts if said in texts[k]] == [k for k in prompts if f"(`{name}`)" in texts[k]] != []
        assert [k for k in texts if k.startswith("openjudge ") and said in texts[k]] == [f"openjudge {name}"]
        assert [k for k in texts if k.startswith("jsonl ") and said in texts[k]] == [f"jsonl {name}"]
        gandalf = [k for k in texts if k.startswith("gandalf ")]
        assert [k for k in gandalf if said in texts[k]] == [k for k in gandalf if f"`{name}`" in texts[k]] != []
        for where, text in texts.items():
            for word in STATISTICS:
                assert word not in text, (where, word)
    finally:
        invoke("edit", support_run, "describe", name, "")  # the module's run as it was
