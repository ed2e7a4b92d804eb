"""`taxonomy audit`: tag a new corpus against a frozen taxonomy, then audit its coverage into RUN/audit/."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from taxonomy.analysis.audit import AuditResult, audit_coverage
from taxonomy.analysis.audit_tag import audit_tags
from taxonomy.analysis.breakdown import write_csv
from taxonomy.offline.discover import discover_offline
from taxonomy.offline.novelty import novelty_for
from taxonomy.offline.tag import tag_offline, tag_with, tagger_for
from taxonomy.pipeline import Session, ensure_criteria, run_stage
from taxonomy.run import TAGS, record_use
from taxonomy.taxonomy_io import load_taxonomy


def fit_scores(criteria: pl.DataFrame, tags: pl.DataFrame, taxonomy, cfg, folder: Path | None = None) -> pl.DataFrame:
    """LLM tags carry no score, so how well a criterion fits is measured the same way for every backend: by the
    key-less tagger fitted on the corpus of the run that holds the taxonomy (`folder`), applied to each criterion
    alone (never refitted on the audited corpus); by the taxonomy's cards where no run's corpus is beside it."""
    micro_labels = {member: cap.labels for cap in taxonomy.capabilities for member in cap.members}
    tagger = tagger_for(folder, taxonomy, micro_labels, cfg.offline, cfg.merge)
    if tagger is not None:
        scored = tag_with(tagger, criteria, cfg.tag.max_tags)
    else:
        labels = discover_offline(criteria, cfg.labels, cfg.offline)
        scored = tag_offline(criteria, labels.select("criterion_id", "labels"), taxonomy, None, cfg.tag.max_tags)
    return tags.drop("score", strict=False).join(scored.select("criterion_id", "score"), on="criterion_id", how="left")


def texts(criteria: pl.DataFrame) -> list[str]:
    return [t or "" for t in criteria["text"].to_list()]


def unmapped_note(novelty, none_threshold: float) -> str:
    if novelty is None:
        return (
            f"No run's corpus is beside this taxonomy, so fit is not calibrated: listed are criteria left untagged "
            f"or whose primary tag scores below {none_threshold:g}. Audit against a run folder to calibrate it."
        )
    return novelty.describe() + " Each listed criterion is worth a new capability, a rewrite, or a rubric of its own."


def run_audit(s: Session, taxonomy_path: Path) -> AuditResult:
    taxonomy = load_taxonomy(taxonomy_path, s.cfg.labels)
    run_stage(s, "tag", taxonomy_path=taxonomy_path)
    criteria = ensure_criteria(s)
    folder = Path(taxonomy_path).parent
    tags = fit_scores(criteria, s.run.read_parquet(TAGS), taxonomy, s.cfg, folder)
    a = s.cfg.audit
    novelty = novelty_for(folder, a.none_alpha)
    if novelty is not None:
        tags = tags.join(
            pl.DataFrame(
                {
                    "criterion_id": criteria["criterion_id"].cast(pl.Utf8),
                    "wording_rank": novelty.scores(texts(criteria)),
                }
            ),
            on="criterion_id",
            how="left",
        )
    if s.runner is not None:  # with a model, it may also answer that no capability fits, and why
        tags = tags.join(audit_tags(criteria, taxonomy, s.cfg, s.runner), on="criterion_id", how="left")
    result = audit_coverage(
        criteria,
        tags,
        taxonomy,
        none_threshold=a.none_threshold,
        novelty_threshold=None if novelty is None else novelty.threshold,
        unmapped_note=unmapped_note(novelty, a.none_threshold),
        missing_share=a.missing_share,
        dup_threshold=a.duplicate_similarity,
    )
    for name in AuditResult.FRAMES:
        write_csv(getattr(result, name), s.run.path / "audit" / f"{name}.csv")
    s.run.write_text("audit/audit.md", result.to_markdown())
    record_use(s.run, "audit", s.run.manifest["stages"]["tag"]["taxonomy_hash"])  # the taxonomy it audited against
    return result
