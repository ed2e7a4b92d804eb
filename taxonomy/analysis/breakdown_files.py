"""`taxonomy breakdown`: join verdicts to a run's Stage 3 tags and write every table to RUN/breakdown/."""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import polars as pl

from taxonomy.analysis.breakdown import (
    capability_breakdown, gap_table, join_report, join_verdicts, paired_test, side_by_side, to_markdown, write_csv,
)
from taxonomy.analysis.verdicts import VerdictError, load_verdicts
from taxonomy.run import RunDir


@dataclass
class BreakdownResult:
    markdown: str
    files: list[Path] = field(default_factory=list)
    pooled: pl.DataFrame | None = None


def run_breakdown(
    run: RunDir, specs: list[str], *, reference: str = "human", by: str = "primary", n_boot: int = 1000, seed: int = 0,
) -> BreakdownResult:
    tags = run.read_parquet("stage3_tags.parquet", "tag").filter(pl.col("status") == "ok")
    criteria = run.read_parquet("criteria.parquet")
    verdicts = pl.concat([load_verdicts(spec) for spec in specs], how="vertical_relaxed")
    coverage = join_report(tags, verdicts, reference=reference, criteria=criteria)
    joined = join_verdicts(tags, verdicts, reference=reference, criteria=criteria, on_missing="ignore")
    if joined.is_empty():
        raise VerdictError(
            f"{specs[0]}: row -: no verdict matches a tagged criterion of {run.path}; "
            f"fix: verdict criterion ids must match criteria.parquet ids (e.g. {criteria['criterion_id'][0]})"
        )
    out = run.path / "breakdown"
    sections = [f"# Verifier error breakdown by capability ({by} tag)", "", str(coverage), ""]
    files: list[Path] = []

    def emit(title: str, frame: pl.DataFrame, name: str, note: str = "") -> None:
        files.append(write_csv(frame, out / f"{name}.csv"))
        sections.extend([f"## {title}", "", *([note, ""] if note else []), to_markdown(frame)])

    pooled = capability_breakdown(joined, by=by, n_boot=n_boot, seed=seed)
    emit("All systems pooled", pooled.drop("weight"), "breakdown",
         "FP: a met criterion rejected; FN: an unmet criterion passed; rates are shares of n. CI: 95% bootstrap over tasks.")
    emit("Weighted by |rubric weight|", capability_breakdown(joined, by=by, weighted=True, n_boot=n_boot, seed=seed).drop("weight"), "breakdown_weighted")
    verifiers = pooled["verifier"].unique(maintain_order=True).to_list()
    emit("Error rate side by side (Table A3 layout)", side_by_side(pooled), "side_by_side")
    if joined["system"].n_unique() > 1:
        per_system = capability_breakdown(joined, by=by, n_boot=n_boot, seed=seed, groups=("verifier", "system"))
        by_system = per_system.with_columns(verifier=pl.col("verifier") + " @ " + pl.col("system")).drop("system")
        emit("Error rate per agent system", side_by_side(by_system), "by_system")
    for verifier in verifiers:
        emit(f"FN minus FP, {verifier} (Table A6 layout)", gap_table(pooled, verifier), f"gap_{verifier}")
    for a, b in combinations(verifiers, 2):
        emit(f"Paired test: {a} vs {b} (exact McNemar)", paired_test(joined, a, b, by=by), f"paired_{a}_vs_{b}")
    markdown = "\n".join(sections)
    run.write_text("breakdown/breakdown.md", markdown)
    files.append(out / "breakdown.md")
    return BreakdownResult(markdown, files, pooled)
