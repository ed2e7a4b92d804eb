"""The model's review: one call per task (brief, then the numbered criteria with signs and weights),
every finding checked in code (known rule, existing ids, a verbatim quote) and re-asked when invalid.

A finding still invalid after the re-asks is dropped and counted, never kept. An LLM judge alone is
not a stable linter (two judges agreed at kappa 0.04-0.51 on one corpus), so a finding only the model
makes is a note (info); where an offline rule finds the same defect the two merge, marked offline+llm.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

from pydantic import BaseModel, Field

from taxonomy.lint.findings import RULES, Finding, rank
from taxonomy.lint.reading import Corpus, Row
from taxonomy.llm.jobs import Answer, Job
from taxonomy.prompts import render
from taxonomy.stages.common import shared_prefix
from taxonomy.validate import Violation

STAGE = "lint"
MIN_QUOTE_WORDS = 3


class LintItem(BaseModel):
    rule: str
    criterion_idx: list[int] = Field(min_length=1)
    quote: str
    message: str
    fix: str


class LintAnswer(BaseModel):
    findings: list[LintItem]


@dataclass
class Review:
    """What the model's review gave: its valid findings and what was dropped."""

    findings: list[Finding] = field(default_factory=list)
    asked: int = 0
    dropped: list[str] = field(default_factory=list)  # one line per invalid finding, for the summary
    unanswered: list[str] = field(default_factory=list)  # tasks whose answer never parsed

    def summary(self) -> dict:
        return {"asked": self.asked, "kept": len(self.findings), "dropped": len(self.dropped),
                "dropped_findings": self.dropped[:50], "unanswered": len(self.unanswered)}


def _flat(text: str) -> str:
    return " ".join(text.split()).casefold()


def item_problems(item: LintItem, rows: list[Row]) -> list[str]:
    """Why a finding cannot be kept: an unknown rule, an index out of range, a quote not in the criterion."""
    if item.rule not in RULES:
        return [f"rule {item.rule!r} is unknown; use one of {', '.join(RULES)}"]
    bad = [i for i in item.criterion_idx if not 0 <= i < len(rows)]
    if bad:
        return [f"criterion_idx {bad} does not exist; the criteria are numbered 0 to {len(rows) - 1}"]
    text = rows[item.criterion_idx[0]].text
    quote = item.quote.strip().strip('"“”')
    short = len(text.split()) < MIN_QUOTE_WORDS
    if not quote or _flat(quote) not in _flat(text) or (len(quote.split()) < MIN_QUOTE_WORDS and not short):
        return [f"quote {item.quote!r} is not copied verbatim (at least {MIN_QUOTE_WORDS} words) from criterion {item.criterion_idx[0]}"]
    if not item.message.strip() or not item.fix.strip():
        return ["message and fix must both say something"]
    return []


def validate(answer: LintAnswer, rows: list[Row]) -> list[Violation]:
    return [Violation(None, f"finding {k}: {p}") for k, item in enumerate(answer.findings) for p in item_problems(item, rows)]


def jobs(c: Corpus) -> list[tuple[str, Job[LintAnswer]]]:
    out = []
    for task_id, rows in c.tasks.items():
        prompt = render("lint.j2", rules=RULES, task_id=task_id, brief=rows[0].brief,
                        criteria=[{"text": r.text, "weight": f"{r.weight:+g}"} for r in rows])
        out.append((task_id, Job(prompt=prompt, schema=LintAnswer, validate=partial(validate, rows=rows), prefix=shared_prefix(prompt))))
    return out


def read_answers(c: Corpus, asked: list[str], answers: list[Answer[LintAnswer]]) -> Review:
    review = Review(asked=len(asked))
    for task_id, answer in zip(asked, answers):
        rows = c.tasks[task_id]
        if answer.value is None:
            review.unanswered.append(task_id)
            continue
        for item in answer.value.findings:
            problems = item_problems(item, rows)
            if problems:
                review.dropped.append(f"task {task_id}: {item.rule} {item.criterion_idx}: {problems[0]}")
                continue
            ids = list(dict.fromkeys(rows[i].criterion_id for i in item.criterion_idx))
            review.findings.append(Finding(item.rule, "info", task_id, ids, item.message.strip(), item.quote.strip(), item.fix.strip(), "llm"))
    return review


def merge(offline: list[Finding], model: list[Finding]) -> list[Finding]:
    """One finding per (rule, criteria): an offline finding the model confirms is marked offline+llm
    and rises to warning at least; the model's own findings stay notes."""
    by_key = {f.key(): f for f in offline}
    extra = []
    for f in model:
        same = by_key.get(f.key())
        if same is None:
            extra.append(f)
        else:
            same.source = "offline+llm"
            same.severity = max(same.severity, "warning", key=rank)
    return offline + extra
