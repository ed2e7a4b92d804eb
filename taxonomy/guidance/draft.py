"""Drafting judge guidance per capability (an LLM with a runner, else offline) and the whole `taxonomy guidance` use."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import polars as pl

from taxonomy.guidance.files import write_guidance
from taxonomy.guidance.inputs import routed_criteria, select_examples
from taxonomy.guidance.model import GuidanceAnswer, GuidanceDrafts, GuidanceError, validate_guidance
from taxonomy.guidance.offline import notes_for_prompt, offline_draft
from taxonomy.guidance.stored import inputs_fingerprint, save_drafts
from taxonomy.llm.runner import Job, Runner
from taxonomy.prompts import render, template_hash
from taxonomy.run import RunDir
from taxonomy.schemas import Taxonomy

log = logging.getLogger("taxonomy.guidance")

STAGE = "guidance"
PROMPT = "guidance.j2"


# ---- drafting -------------------------------------------------------------------------
def p3_first(taxonomy: Taxonomy) -> list:
    """Capabilities in drafting order: those needing domain conventions absent from the criterion text
    (the paper's P3, what a guidance channel is for) first, then the undecided, then the rest."""
    rank = {True: 0, None: 1, False: 2}
    return sorted(taxonomy.capabilities, key=lambda c: rank[c.needs_domain_conventions])


def draft_guidance(
    taxonomy: Taxonomy, criteria: pl.DataFrame, tags: pl.DataFrame, notes: str | None, runner: Runner | None,
    examples_per_cap: int = 5,
) -> GuidanceDrafts:
    """Guidance per capability: one LLM call each with a runner (stage "guidance"), else the offline draft.

    An LLM answer that is still invalid after the runner's re-asks is replaced by the offline draft
    for that capability; `drafts.fallbacks` names it with the reasons, and a warning is logged.
    """
    routed = routed_criteria(criteria, tags)
    notes = notes if notes and notes.strip() else None
    examples = {cap.name: select_examples(routed, cap.name, examples_per_cap) for cap in taxonomy.capabilities}
    drafts = GuidanceDrafts()
    order = p3_first(taxonomy)
    if runner is None:
        for cap in order:
            drafts[cap.name] = offline_draft(cap, examples[cap.name], notes, taxonomy)
            drafts.source[cap.name] = "offline"
        return drafts
    prompts = [render(PROMPT, cap=cap.as_stated(), examples=examples[cap.name], notes=notes_for_prompt(cap, notes, taxonomy=taxonomy))
               for cap in order]
    jobs = [Job(prompt, GuidanceAnswer, validate_guidance) for prompt in prompts]
    answers = runner.run(STAGE, jobs, "Judge guidance")
    for cap, answer in zip(order, answers):
        if answer.ok:
            drafts[cap.name], drafts.source[cap.name] = answer.value, "llm"
            continue
        reasons = [str(v) for v in answer.violations] or ["no valid answer"]
        log.warning("guidance for %s: no valid answer after %d attempts (%s); using the offline draft",
                    cap.name, answer.attempts, "; ".join(reasons))
        drafts[cap.name] = offline_draft(cap, examples[cap.name], notes, taxonomy)
        drafts.source[cap.name] = "fallback"
        drafts.fallbacks[cap.name] = reasons
    return drafts


# ---- the whole use ----------------------------------------------------------------------
def read_notes(notes_path: Path | None) -> str | None:
    if notes_path is None:
        return None
    path = Path(notes_path)
    if not path.is_file():
        raise GuidanceError(f"{path}: no such domain-notes file; fix: pass an existing text or markdown file of the benchmark's conventions, or leave out the notes")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise GuidanceError(f"{path}: not UTF-8 text; fix: save the domain notes as UTF-8 plain text or markdown") from None
    return text if text.strip() else None


def generate_guidance(session: Any, notes_path: Path | None = None, examples_per_cap: int = 5) -> dict[str, Any]:
    """Read a finished run, draft guidance (LLM with `session.runner`, else offline), write it, return a manifest entry.

    The caller records the returned dict (e.g. `session.run.record("guidance", info)`).
    """
    from taxonomy.taxonomy_io import load_taxonomy

    notes = read_notes(notes_path)
    run: RunDir = session.run
    criteria = run.read_parquet("criteria.parquet", "discover")
    taxonomy = load_taxonomy(run.need("taxonomy.json", "merge"), session.cfg.labels)
    tags = run.read_parquet("stage3_tags.parquet", "tag")
    drafts = draft_guidance(taxonomy, criteria, tags, notes, session.runner, examples_per_cap)
    files = write_guidance(run, taxonomy, criteria, tags, drafts, examples_per_cap)
    save_drafts(run, drafts, inputs_fingerprint(taxonomy, criteria, tags), notes)
    info: dict[str, Any] = {
        **files.as_dict(),
        "notes": str(notes_path) if notes_path is not None else None,
        "prompt_hash": template_hash(PROMPT),
        "sources": {s: list(drafts.source.values()).count(s) for s in ("llm", "offline", "fallback")},
        "p3_capabilities": [c.name for c in taxonomy.capabilities if c.needs_domain_conventions],
        "drafting_order": [c.name for c in p3_first(taxonomy)],
        "fallbacks": dict(drafts.fallbacks),
        "calls": 0,
    }
    if session.runner is not None and STAGE in session.runner.usage:
        info.update(session.runner.usage[STAGE].as_dict(session.cfg.llm.prices))
    return info
