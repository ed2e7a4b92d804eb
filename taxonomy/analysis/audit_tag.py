"""The coverage audit's tagging with a model: Stage 3's batches and taxonomy, except that the model may answer that
no capability fits, with a reason (a run's own Stage 3 stays closed-vocabulary, as the paper has it)."""

from __future__ import annotations

from functools import partial

import polars as pl

from taxonomy.config import PipelineConfig, TagConfig
from taxonomy.llm.runner import Job, Runner
from taxonomy.schemas import Model, Taxonomy
from taxonomy.stages.common import Batch, criterion_batches, shared_prefix
from taxonomy.stages.tag import tag_problems, tag_prompt
from taxonomy.validate import Violation, check_coverage

PROMPT = "audit_tagging.j2"


class AuditTagItem(Model):
    criterion_idx: int
    capabilities: list[str]
    none_reason: str = ""


class AuditTagAnswer(Model):
    items: list[AuditTagItem]


def validate_answer(answer: AuditTagAnswer, n: int, names: list[str], cfg: TagConfig) -> list[Violation]:
    """Stage 3's checks for an item that names capabilities; an item naming none must say why."""
    out = check_coverage([item.criterion_idx for item in answer.items], n)
    for item in answer.items:
        if not 0 <= item.criterion_idx < n:
            continue
        if not item.capabilities:
            if not item.none_reason.strip():
                out.append(Violation(item.criterion_idx, "no capability named: say why in `none_reason`"))
            continue
        out += [Violation(item.criterion_idx, p) for p in tag_problems(item.capabilities, names, cfg)]
    return out


def audit_tags(criteria: pl.DataFrame, taxonomy: Taxonomy, cfg: PipelineConfig, runner: Runner) -> pl.DataFrame:
    """criterion_id, none_reason: the model's reason where it found that no capability fits, else null."""
    batches = list(criterion_batches(criteria, cfg.tag.batch_size, cfg.discover.brief_max_chars))
    answers = runner.run("audit", [_job(b, taxonomy, cfg) for b in batches], "Audit tagging")
    ids, reasons = [], []
    for batch, answer in zip(batches, answers):
        bad = {v.item for v in answer.violations}
        items = {it.criterion_idx: it for it in (answer.value.items if answer.value else [])}
        for i, row in enumerate(batch.rows):
            item = items.get(i)
            ids.append(row["criterion_id"])
            none = item is not None and i not in bad and not item.capabilities
            reasons.append(item.none_reason.strip() if none else None)
    return pl.DataFrame(
        {"criterion_id": ids, "none_reason": reasons}, schema={"criterion_id": pl.Utf8, "none_reason": pl.Utf8}
    )


def _job(batch: Batch, taxonomy: Taxonomy, cfg: PipelineConfig) -> Job[AuditTagAnswer]:
    prompt = tag_prompt(PROMPT, batch, taxonomy, cfg)
    check = partial(validate_answer, n=len(batch.rows), names=taxonomy.names(), cfg=cfg.tag)
    return Job(prompt=prompt, schema=AuditTagAnswer, validate=check, prefix=shared_prefix(prompt))
