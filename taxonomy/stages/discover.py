"""Stage 1: free-text discovery. Every criterion gets 1-3 validated capability labels and a rationale."""

from __future__ import annotations

from functools import partial

import polars as pl

from taxonomy.config import PipelineConfig
from taxonomy.llm.runner import Job, Runner
from taxonomy.prompts import render
from taxonomy.schemas import DiscoveryAnswer
from taxonomy.stages.common import Batch, criterion_batches, item_status, shared_prefix
from taxonomy.validate import (
    MIN_PHRASE_WORDS,
    Violation,
    check_coverage,
    check_distinct_in_batch,
    check_label_count,
    check_rationale_grounding,
    check_rationale_prefix,
    label_problems,
)
from taxonomy.config import LabelRules

SCHEMA = {
    "criterion_id": pl.Utf8,
    "labels": pl.List(pl.Utf8),
    "rationale": pl.Utf8,
    "attempts": pl.Int64,
    "status": pl.Utf8,
    "problems": pl.List(pl.Utf8),
}


def item_problems(labels: list[str], rationale: str, criterion: str, rules: LabelRules) -> list[str]:
    problems = check_label_count(labels, rules)
    problems += [p for label in labels for p in label_problems(label, rules)]
    problems += check_rationale_prefix(rationale, rules)
    problems += check_rationale_grounding(rationale, criterion, rules.rationale_prefix)
    return problems


def validate_answer(
    answer: DiscoveryAnswer, texts: list[str], rules: LabelRules, category: str | None = None
) -> list[Violation]:
    out = check_coverage([item.criterion_idx for item in answer.items], len(texts))
    for item in answer.items:
        if 0 <= item.criterion_idx < len(texts):
            out += [
                Violation(item.criterion_idx, p)
                for p in item_problems(item.capabilities, item.rationale, texts[item.criterion_idx], rules)
            ]
    labels = {item.criterion_idx: item.capabilities for item in answer.items if 0 <= item.criterion_idx < len(texts)}
    return out + check_distinct_in_batch(labels, rules, category)


def discover(criteria: pl.DataFrame, cfg: PipelineConfig, runner: Runner) -> pl.DataFrame:
    """Stage 1 over a criteria table: the model labels each batch, code validates, violations are re-asked."""
    batches = list(criterion_batches(criteria, cfg.discover.batch_size, cfg.discover.brief_max_chars))
    jobs = [_job(b, cfg) for b in batches]
    answers = runner.run("discover", jobs, "Stage 1 discovery")
    rows = []
    for batch, answer in zip(batches, answers):
        items = {it.criterion_idx: it for it in (answer.value.items if answer.value else [])}
        for i, (status, problems) in enumerate(item_status(answer.violations, len(batch.rows), set(items))):
            item = items.get(i)
            rows.append(
                {
                    "criterion_id": batch.rows[i]["criterion_id"],
                    "labels": item.capabilities if item and status == "ok" else [],
                    "rationale": item.rationale if item and status == "ok" else "",
                    "attempts": answer.attempts,
                    "status": status,
                    "problems": problems,
                }
            )
    return pl.DataFrame(rows, schema=SCHEMA)


def _job(batch: Batch, cfg: PipelineConfig) -> Job[DiscoveryAnswer]:
    prompt = render("stage1_discovery.j2", rules=cfg.labels, min_quote_words=MIN_PHRASE_WORDS, **batch.fields())
    texts = [r["text"] for r in batch.rows]
    return Job(
        prompt=prompt,
        schema=DiscoveryAnswer,
        validate=partial(validate_answer, texts=texts, rules=cfg.labels, category=batch.category),
        prefix=shared_prefix(prompt),
    )
