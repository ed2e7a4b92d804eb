"""The format for any other verifier: one JSON line per criterion with its ranked capabilities and the ids
of the guidance sections routed to it, plus the sections themselves.

    routing.jsonl            {task_id, criterion_id, criterion, weight, penalty, capabilities, guidance_sections,
                              needs_native_inspection, needs_domain_conventions}
    guidance_sections.jsonl  {id, capability, title, description, needs_native_inspection(_reason),
                              needs_domain_conventions(_reason), drafted, summary, procedure, evidence, pitfalls,
                              markdown}

`drafted` is false where no model drafted guidance: summary is null, the lists are empty, and the
markdown says so and how to get guidance.

P2/P3 are true, false or null (unknown). On a routing line they hold for the criterion: true when any
capability it is tagged with needs it, false when all are decided false; the reasons are in its sections.
"""

from __future__ import annotations

from typing import Any

from taxonomy.guidance.files import title
from taxonomy.guidance.model import GuidanceAnswer
from taxonomy.guidance.principles import FIELDS, any_of, fields
from taxonomy.guidance.routes import ExportInputs, Task, Written, guidance_text, jsonl_text
from taxonomy.run import RunDir
from taxonomy.schemas import Taxonomy


def section_id(capability: str) -> str:
    return capability


def _drafted(draft: GuidanceAnswer | None) -> dict[str, Any]:
    """The model's guidance fields; where no model drafted any, `drafted` false and the fields empty."""
    if draft is None:
        return {"drafted": False, "summary": None, "procedure": [], "evidence": [], "pitfalls": []}
    return {"drafted": True, **draft.model_dump()}


def build_routing(
    tasks: list[Task], taxonomy: Taxonomy, drafts: dict[str, GuidanceAnswer | None]
) -> tuple[list[dict], list[dict]]:
    """(routing lines in corpus order, one guidance section per capability in taxonomy order)."""
    caps = {c.name: c for c in taxonomy.capabilities}
    routing = [
        {
            "task_id": c.task_id,
            "criterion_id": c.criterion_id,
            "criterion": c.text,
            "weight": c.weight,
            "penalty": c.penalty,
            "capabilities": list(c.capabilities),
            "guidance_sections": [section_id(n) for n in c.capabilities],
            **{f: any_of(getattr(caps[n], f) for n in c.capabilities) for f in FIELDS},
        }
        for task in tasks
        for c in task.criteria
    ]
    sections: list[dict[str, Any]] = [
        {
            "id": section_id(cap.name),
            "capability": cap.name,
            "title": title(cap.name, cap.title),
            "description": cap.described(),
            **fields(cap),
            **_drafted(drafts[cap.name]),
            "markdown": guidance_text(cap, drafts[cap.name]),
        }
        for cap in taxonomy.capabilities
    ]
    return routing, sections


def write(inputs: ExportInputs, target: RunDir) -> Written:
    """DIR/routing.jsonl (one line per criterion) and guidance_sections.jsonl, for any other verifier."""
    routing, sections = build_routing(inputs.tasks, inputs.taxonomy, inputs.drafts)
    target.write_text("routing.jsonl", jsonl_text(routing))
    target.write_text("guidance_sections.jsonl", jsonl_text(sections))
    return Written(
        [target.path / "routing.jsonl", target.path / "guidance_sections.jsonl"],
        {"criteria": len(routing), "sections": len(sections)},
    )
