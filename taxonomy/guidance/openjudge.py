"""OpenJudge export: one LLMGrader config per capability (for `LLMGrader.from_config`), and the inputs
that route each task's criteria to them.

    graders.json   [{name, description, mode: pointwise, template: {messages}, model: {model}}]
    inputs.jsonl   one line per (task, capability): {grader, task_id, criterion_ids, needs_native_inspection,
                   needs_domain_conventions, inputs: {task, criteria}}

P2/P3 (does the check need native inspection of the artifacts, does it depend on conventions the criterion
does not state) are in each grader's prompt with their reasons and at the end of its description; on an
inputs line they are the grader's values (null: unknown), so a caller can send native-inspection checks to a
judge that can open the files. A config holds no other keys: from_config passes extra keys to the template.

A grader's template carries the capability's guidance and three placeholders, `{task}`, `{criteria}` and
`{response}` (the agent's work), and asks for a pointwise binary score: `grader.aevaluate(**line["inputs"],
response=...)`. OpenJudge fills placeholders with str.format, so braces in the guidance are doubled.
"""

from __future__ import annotations

import json
from typing import Any

from taxonomy.guidance.files import title
from taxonomy.guidance.model import GuidanceAnswer
from taxonomy.guidance.principles import FIELDS, WORD
from taxonomy.guidance.routes import (
    BINARY,
    RULES,
    UNTAGGED,
    ExportInputs,
    Task,
    Written,
    criteria_block,
    guidance_text,
    jsonl_text,
)
from taxonomy.run import RunDir
from taxonomy.schemas import Taxonomy, TaxonomyCapability

PLACEHOLDERS = ("task", "criteria", "response")
SYSTEM = (
    "You are a strict grader of an AI agent's work. Output ONLY a valid JSON object with this exact structure: "
    '{{"reason": "<brief explanation of the score>", "score": <0 or 1>}}'
)


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _principles(cap: TaxonomyCapability) -> str:
    return (
        f"P2 needs native inspection: {WORD[cap.needs_native_inspection]}; "
        f"P3 needs domain conventions: {WORD[cap.needs_domain_conventions]}."
    )


def _described(cap: TaxonomyCapability) -> str:
    # An offline taxonomy's card is left out of what judges read (inputs.judge_view): the criteria it tags are
    # named instead.
    return " ".join(cap.described().split()) or f"Criteria tagged `{cap.name}` ({title(cap.name, cap.title)})."


def grader_config(name: str, description: str, cap_title: str, guidance: str, model: str) -> dict[str, Any]:
    user = "\n".join(
        [
            f"Grade the agent's work on the criteria below, which all need one kind of check: {_escape(cap_title)}.",
            "",
            f"## How to check: {_escape(cap_title)}",
            "",
            _escape(guidance),
            "",
            "## The task",
            "",
            "{task}",
            "",
            "## Criteria",
            "",
            "{criteria}",
            "",
            "## The agent's work",
            "",
            "{response}",
            "",
            "## How to grade",
            "",
            RULES,
            BINARY,
        ]
    )
    return {
        "name": name,
        "description": description,
        "mode": "pointwise",
        "template": {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]},
        "model": {"model": model},
    }


def build_graders(
    tasks: list[Task], taxonomy: Taxonomy, drafts: dict[str, GuidanceAnswer | None], model: str
) -> tuple[list[dict], list[dict]]:
    """(grader configs, inputs lines). A grader for untagged criteria is added only when some exist."""
    caps = {c.name: c for c in taxonomy.capabilities}
    order = {n: i for i, n in enumerate(caps)}
    graders = [
        grader_config(
            c.name, f"{_described(c)} {_principles(c)}", title(c.name, c.title), guidance_text(c, drafts[c.name]), model
        )
        for c in taxonomy.capabilities
    ]
    lines = []
    for task in tasks:
        for capability, criteria in task.groups(order):
            lines.append(
                {
                    "grader": capability,
                    "task_id": task.task_id,
                    "criterion_ids": [c.criterion_id for c in criteria],
                    **{f: getattr(caps[capability], f) if capability in caps else None for f in FIELDS},
                    "inputs": {"task": task.brief, "criteria": criteria_block(criteria)},
                }
            )
    if any(line["grader"] == UNTAGGED for line in lines):
        graders.append(
            grader_config(
                UNTAGGED,
                "Criteria that Stage 3 gave no capability; judged from their text alone.",
                "no capability tag",
                guidance_text(None, None),
                model,
            )
        )
    return graders, lines


def write(inputs: ExportInputs, target: RunDir) -> Written:
    """DIR/openjudge/graders.json (one LLMGrader config per capability) and inputs.jsonl."""
    graders, lines = build_graders(inputs.tasks, inputs.taxonomy, inputs.drafts, inputs.judge_model)
    target.write_text("openjudge/graders.json", json.dumps(graders, indent=2, ensure_ascii=False) + "\n")
    target.write_text("openjudge/inputs.jsonl", jsonl_text(lines))
    return Written(
        [target.path / "openjudge/graders.json", target.path / "openjudge/inputs.jsonl"],
        {"graders": len(graders), "inputs": len(lines)},
    )
