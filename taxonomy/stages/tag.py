"""Stage 3: closed-vocabulary tagging. Every criterion gets 1-3 taxonomy names, most confident first."""

from __future__ import annotations

from functools import partial

import polars as pl

from taxonomy.config import PipelineConfig, TagConfig
from taxonomy.llm.runner import Job, Runner
from taxonomy.prompts import render
from taxonomy.schemas import TagAnswer, Taxonomy
from taxonomy.stages.common import Batch, criterion_batches, item_status, shared_prefix
from taxonomy.validate import Violation, check_coverage

SCHEMA = {
    "criterion_id": pl.Utf8,
    "tags": pl.List(pl.Utf8),
    "primary": pl.Utf8,
    "score": pl.Float64,
    "attempts": pl.Int64,
    "status": pl.Utf8,
    "problems": pl.List(pl.Utf8),
}


def tag_problems(tags: list[str], names: list[str], cfg: TagConfig) -> list[str]:
    problems = []
    if not cfg.min_tags <= len(tags) <= cfg.max_tags:
        problems.append(f"give {cfg.min_tags}-{cfg.max_tags} capability names, not {len(tags)}")
    if len(set(tags)) != len(tags):
        problems.append("do not repeat a capability for the same criterion")
    unknown = [t for t in tags if t not in names]
    if unknown:
        problems.append(
            f"{', '.join(f'`{u}`' for u in unknown)} not in the taxonomy; use exactly one of: {', '.join(names)}"
        )
    return problems


def validate_answer(answer: TagAnswer, n: int, names: list[str], cfg: TagConfig) -> list[Violation]:
    out = check_coverage([item.criterion_idx for item in answer.items], n)
    for item in answer.items:
        if 0 <= item.criterion_idx < n:
            out += [Violation(item.criterion_idx, p) for p in tag_problems(item.capabilities, names, cfg)]
    return out


def tag(criteria: pl.DataFrame, taxonomy: Taxonomy, cfg: PipelineConfig, runner: Runner) -> pl.DataFrame:
    """Stage 3 over a criteria table: the model tags each batch against the closed vocabulary."""
    batches = list(criterion_batches(criteria, cfg.tag.batch_size, cfg.discover.brief_max_chars))
    jobs = [_job(b, taxonomy, cfg) for b in batches]
    answers = runner.run("tag", jobs, "Stage 3 tagging")
    rows = []
    for batch, answer in zip(batches, answers):
        items = {it.criterion_idx: it for it in (answer.value.items if answer.value else [])}
        for i, (status, problems) in enumerate(item_status(answer.violations, len(batch.rows), set(items))):
            tags = items[i].capabilities if status == "ok" else []
            rows.append(
                {
                    "criterion_id": batch.rows[i]["criterion_id"],
                    "tags": tags,
                    "primary": tags[0] if tags else None,
                    "score": None,
                    "attempts": answer.attempts,
                    "status": status,
                    "problems": problems,
                }
            )
    return pl.DataFrame(rows, schema=SCHEMA)


def tag_prompt(template: str, batch: Batch, taxonomy: Taxonomy, cfg: PipelineConfig) -> str:
    """A tagging prompt (Stage 3's, or the coverage audit's): the taxonomy as stated, then the batch."""
    capabilities = [c.as_stated() for c in taxonomy.capabilities]
    return render(template, rules=cfg.labels, tag=cfg.tag, capabilities=capabilities, **batch.fields())


def _job(batch: Batch, taxonomy: Taxonomy, cfg: PipelineConfig) -> Job[TagAnswer]:
    prompt = tag_prompt("stage3_tagging.j2", batch, taxonomy, cfg)
    check = partial(validate_answer, n=len(batch.rows), names=taxonomy.names(), cfg=cfg.tag)
    return Job(prompt=prompt, schema=TagAnswer, validate=check, prefix=shared_prefix(prompt))
