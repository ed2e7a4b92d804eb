"""The model's review: one call per task (brief, then the numbered criteria with signs and weights),
every finding checked in code (known rule, existing ids, a verbatim quote) and re-asked when invalid.

A finding still invalid after the re-asks is dropped and counted, never kept. A finding only the model
makes takes the severity its rule's judged precision earns (rules.py: a warning for sign-mismatch and
duplicate, a note for the others); where an offline rule finds the same defect the two are one finding,
marked offline+llm. Criteria are fenced as data but shown verbatim, so a quote copied from the prompt
is the criterion's own text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import partial

from pydantic import BaseModel, Field

from taxonomy.lint.findings import Finding, rank
from taxonomy.lint.reading import Corpus, Row
from taxonomy.lint.rules import RULES, asked_of_model
from taxonomy.llm.jobs import Answer, Job
from taxonomy.prompts import render
from taxonomy.stages.common import shared_prefix
from taxonomy.validate import Violation

STAGE = "lint"
MIN_QUOTE_WORDS = 3
# Only a tag of the prompt's own fences could end the data early; every other character is shown as written.
_FENCE_TAG = re.compile(r"<(/?\s*(?:criterion|task_brief)\b)", re.I)


def fenced(text: str) -> str:
    """Text shown inside a fence: verbatim, except that a fence tag inside it is escaped ("&lt;/criterion")."""
    return _FENCE_TAG.sub(r"&lt;\1", text or "")


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
        return {
            "asked": self.asked,
            "kept": len(self.findings),
            "dropped": len(self.dropped),
            "dropped_findings": self.dropped[:50],
            "unanswered": len(self.unanswered),
        }


def _flat(text: str) -> str:
    return " ".join(text.split()).casefold()


def item_problems(item: LintItem, rows: list[Row]) -> list[str]:
    """Why a finding cannot be kept: an unknown rule, an index out of range, a quote not in the criterion."""
    asked = asked_of_model()
    if item.rule not in asked:
        return [f"rule {item.rule!r} is unknown; use one of {', '.join(asked)}"]
    bad = [i for i in item.criterion_idx if not 0 <= i < len(rows)]
    if bad:
        return [f"criterion_idx {bad} does not exist; the criteria are numbered 0 to {len(rows) - 1}"]
    text = rows[item.criterion_idx[0]].text
    quote = item.quote.strip().strip('"“”')
    short = len(text.split()) < MIN_QUOTE_WORDS
    copied = any(_flat(quote) in _flat(shown) for shown in (text, fenced(text)))
    if not quote or not copied or (len(quote.split()) < MIN_QUOTE_WORDS and not short):
        return [
            f"quote {item.quote!r} is not copied verbatim (at least "
            f"{MIN_QUOTE_WORDS} words) from criterion {item.criterion_idx[0]}"
        ]
    if not item.message.strip() or not item.fix.strip():
        return ["message and fix must both say something"]
    return []


def validate(answer: LintAnswer, rows: list[Row]) -> list[Violation]:
    return [
        Violation(None, f"finding {k}: {p}")
        for k, item in enumerate(answer.findings)
        for p in item_problems(item, rows)
    ]


def jobs(c: Corpus) -> list[tuple[str, Job[LintAnswer]]]:
    out = []
    for task_id, rows in c.tasks.items():
        prompt = render(
            "lint.j2",
            rules=asked_of_model(),
            task_id=task_id,
            brief=fenced(rows[0].brief),
            criteria=[{"text": fenced(r.text), "weight": f"{r.weight:+g}"} for r in rows],
        )
        out.append(
            (
                task_id,
                Job(
                    prompt=prompt,
                    schema=LintAnswer,
                    validate=partial(validate, rows=rows),
                    prefix=shared_prefix(prompt),
                ),
            )
        )
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
            review.findings.append(
                Finding(
                    item.rule,
                    RULES[item.rule].model,
                    task_id,
                    ids,
                    item.message.strip(),
                    item.quote.strip(),
                    item.fix.strip(),
                    "llm",
                )
            )
    return review


def merge(offline: list[Finding], model: list[Finding]) -> list[Finding]:
    """One finding per defect: a model finding about the same rule and criteria as an offline one (or
    about some of a set of repeats the offline rule lists) joins it, marked offline+llm, at the higher of
    the two severities and at least a warning; the model's other findings keep their own severity."""
    by_criterion: dict[tuple[str, str], list[Finding]] = {}
    for f in offline:
        for cid in f.criterion_ids:
            by_criterion.setdefault((f.rule, cid), []).append(f)
    extra, seen = [], set()
    for f in model:
        same = next(
            (
                g
                for g in by_criterion.get((f.rule, f.criterion_ids[0]), [])
                if set(f.criterion_ids) <= set(g.criterion_ids)
            ),
            None,
        )
        if same is not None:
            same.source = "offline+llm"
            same.severity = max(same.severity, f.severity, "warning", key=rank)
        elif f.key() not in seen:  # the model naming one defect twice is still one finding
            seen.add(f.key())
            extra.append(f)
    return offline + extra
