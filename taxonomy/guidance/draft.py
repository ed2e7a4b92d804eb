"""Drafting judge guidance per capability (where a model runs) and the whole `taxonomy guidance` use."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Sequence

import polars as pl

from taxonomy.corpus.jsonio import decode
from taxonomy.guidance.files import write_guidance
from taxonomy.guidance.inputs import judge_view, routed_criteria, select_examples
from taxonomy.guidance.model import GuidanceAnswer, GuidanceDrafts, GuidanceError, validate_guidance
from taxonomy.guidance.notes import notes_for_prompt
from taxonomy.guidance.stored import inputs_fingerprint, save_drafts
from taxonomy.llm.jobs import Answer, Job
from taxonomy.prompts import render, template_hash
from taxonomy.run import CRITERIA, TAGS, TAXONOMY, RunDir
from taxonomy.schemas import Taxonomy
from taxonomy.taxonomy_io import load_taxonomy

log = logging.getLogger("taxonomy.guidance")

STAGE = "guidance"
PROMPT = "guidance.j2"


# ---- drafting -------------------------------------------------------------------------
def p3_first(taxonomy: Taxonomy) -> list:
    """Capabilities in drafting order: those needing domain conventions absent from the criterion text
    (the paper's P3, what a guidance channel is for) first, then the undecided, then the rest."""
    rank = {True: 0, None: 1, False: 2}
    return sorted(taxonomy.capabilities, key=lambda c: rank[c.needs_domain_conventions])


Ask = Callable[[str, Sequence[Job], str], "list[Answer] | None"]


def draft_guidance(
    taxonomy: Taxonomy,
    criteria: pl.DataFrame,
    tags: pl.DataFrame,
    notes: str | None,
    ask: Ask,
    examples_per_cap: int = 5,
) -> GuidanceDrafts:
    """Guidance per capability, one model call each (stage "guidance"): `ask(stage, jobs, title)` returns the
    model's answers, or None where no model runs.

    No text is written in a model's place: a capability gets None where no model ran, or where its answer
    stayed invalid after the runner's re-asks (`drafts.fallbacks` names it with the reasons, and a warning
    is logged).
    """
    routed = routed_criteria(criteria, tags)
    notes = notes if notes and notes.strip() else None
    order = p3_first(taxonomy)
    jobs = [
        Job(
            render(
                PROMPT,
                cap=cap.as_stated(),
                examples=select_examples(routed, cap.name, examples_per_cap),
                notes=notes_for_prompt(cap, notes, taxonomy=taxonomy),
            ),
            GuidanceAnswer,
            validate_guidance,
        )
        for cap in order
    ]
    answers = ask(STAGE, jobs, "Judge guidance")
    drafts = GuidanceDrafts()
    for i, cap in enumerate(order):
        answer = answers[i] if answers is not None else None
        if answer is not None and answer.ok:
            drafts[cap.name], drafts.source[cap.name] = answer.value, "llm"
            continue
        drafts[cap.name], drafts.source[cap.name] = None, "offline" if answer is None else "fallback"
        if answer is not None:
            reasons = [str(v) for v in answer.violations] or ["no valid answer"]
            log.warning(
                "guidance for %s: no valid answer after %d attempts (%s); it has no guidance",
                cap.name,
                answer.attempts,
                "; ".join(reasons),
            )
            drafts.fallbacks[cap.name] = reasons
    return drafts


# ---- the whole use ----------------------------------------------------------------------
def read_notes(notes_path: Path | None) -> str | None:
    if notes_path is None:
        return None
    path = Path(notes_path)
    if not path.is_file():
        raise GuidanceError(
            f"{path}: no such domain-notes file; fix: pass an existing text or "
            "markdown file of the benchmark's conventions, or leave out the notes"
        )
    try:
        text = decode(path.read_bytes())  # UTF-8, or UTF-16/32 with a byte-order mark
    except UnicodeDecodeError:
        raise GuidanceError(
            f"{path}: not UTF-8 text; fix: save the domain notes as UTF-8 plain text or markdown"
        ) from None
    return text if text.strip() else None


def generate_guidance(session: Any, notes_path: Path | None = None, examples_per_cap: int = 5) -> dict[str, Any]:
    """Read a finished run, draft guidance where the session's model runs, write it, return a manifest entry.

    The caller records the returned dict (e.g. `session.run.record("guidance", info)`).
    """
    notes = read_notes(notes_path)
    run: RunDir = session.run
    criteria = run.read_parquet(CRITERIA, "discover")
    taxonomy = load_taxonomy(run.need(TAXONOMY, "merge"), session.cfg.labels)
    tags = run.read_parquet(TAGS, "tag")
    shown = judge_view(taxonomy)
    drafts = draft_guidance(shown, criteria, tags, notes, session.backend.ask, examples_per_cap)
    files = write_guidance(run, shown, criteria, tags, drafts, examples_per_cap)
    save_drafts(run, drafts, inputs_fingerprint(taxonomy, criteria, tags), notes)
    if notes and all(source == "offline" for source in drafts.source.values()):
        log.warning(
            "%s: domain notes are woven into guidance by a model, and no model ran; set a key (or --provider) "
            "and run `taxonomy guidance` again to use them",
            notes_path,
        )
    info: dict[str, Any] = {
        **files.as_dict(),
        "notes": str(notes_path) if notes_path is not None else None,
        "prompt_hash": template_hash(PROMPT),
        "sources": {s: list(drafts.source.values()).count(s) for s in ("llm", "offline", "fallback")},
        "undrafted": drafts.undrafted(),
        "p3_capabilities": [c.name for c in taxonomy.capabilities if c.needs_domain_conventions],
        "drafting_order": [c.name for c in p3_first(taxonomy)],
        "fallbacks": dict(drafts.fallbacks),
        "calls": 0,
    }
    if STAGE in session.backend.usage:
        info.update(session.backend.usage[STAGE].as_dict(session.cfg.llm.prices))
    return info
