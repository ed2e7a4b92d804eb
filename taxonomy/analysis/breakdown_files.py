"""`taxonomy breakdown`: join verdicts to a run's Stage 3 tags and write every table to RUN/breakdown/."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import polars as pl

from taxonomy.analysis import breakdown as tables
from taxonomy.analysis.verdicts import VerdictError, load_verdicts
from taxonomy.run import CRITERIA, TAGS, TAXONOMY, RunDir, RunError, taxonomy_in_use
from taxonomy.taxonomy_io import load_taxonomy


@dataclass
class BreakdownResult:
    markdown: str
    files: list[Path] = field(default_factory=list)
    pooled: pl.DataFrame | None = None


@dataclass(frozen=True)
class Options:
    """What `taxonomy breakdown`'s options choose: the ground-truth verifier, the tag that groups, and the bootstrap
    resamples of tasks for the CIs (0: none)."""

    reference: str = "human"
    by: str = "primary"
    n_boot: int = 1000
    seed: int = 0


def run_breakdown(run: RunDir, specs: list[str], options: Options = Options()) -> BreakdownResult:
    reference, by, n_boot, seed = options.reference, options.by, options.n_boot, options.seed
    coverage, joined = _joined(run, specs, reference)
    out = run.path / "breakdown"
    sections = [f"# Verifier error breakdown by capability ({by} tag)", "", str(coverage), ""]
    files: list[Path] = []

    def emit(title: str, frame: pl.DataFrame, name: str, note: str = "") -> None:
        files.append(tables.write_csv(frame, out / f"{name}.csv"))
        sections.extend([f"## {title}", "", *([note, ""] if note else []), tables.to_markdown(frame)])

    pooled = tables.capability_breakdown(joined, by=by, n_boot=n_boot, seed=seed)
    emit(
        "All systems pooled",
        pooled.drop("weight"),
        "breakdown",
        "FP: a met criterion rejected; FN: an unmet criterion passed; "
        "rates are shares of n. CI: 95% bootstrap over tasks.",
    )
    emit(
        "Weighted by |rubric weight|",
        tables.capability_breakdown(joined, by=by, weighted=True, n_boot=n_boot, seed=seed).drop("weight"),
        "breakdown_weighted",
    )
    verifiers = pooled["verifier"].unique(maintain_order=True).to_list()
    emit("Error rate side by side (Table A3 layout)", tables.side_by_side(pooled), "side_by_side")
    if joined["system"].n_unique() > 1:
        per_system = tables.capability_breakdown(joined, by=by, n_boot=n_boot, seed=seed, groups=("verifier", "system"))
        by_system = per_system.with_columns(verifier=pl.col("verifier") + " @ " + pl.col("system")).drop("system")
        emit("Error rate per agent system", tables.side_by_side(by_system), "by_system")
    p2 = native_inspection(run) if by in ("primary", "any") else None
    for verifier in verifiers:
        emit(
            f"FN minus FP, {verifier} (Table A6 layout)",
            tables.gap_table(pooled, verifier, native_inspection=p2),
            f"gap_{verifier}",
            "Grouped by the taxonomy's P2 attribute (needs native "
            "inspection of the artifacts); FN/FP is empty when FP is 0."
            if p2
            else "",
        )
    for a, b in combinations(verifiers, 2):
        emit(f"Paired test: {a} vs {b} (exact McNemar)", tables.paired_test(joined, a, b, by=by), f"paired_{a}_vs_{b}")
    markdown = "\n".join(sections)
    run.write_text("breakdown/breakdown.md", markdown)
    files.append(out / "breakdown.md")
    return BreakdownResult(markdown, files, pooled)


def _joined(run: RunDir, specs: list[str], reference: str) -> tuple[tables.JoinReport, pl.DataFrame]:
    """The verdicts of SPECS joined to the run's tagged criteria, and how many of them joined."""
    tags = run.read_parquet(TAGS, "tag").filter(pl.col("status") == "ok")
    criteria = run.read_parquet(CRITERIA)
    verdicts = pl.concat([load_verdicts(spec) for spec in specs], how="vertical_relaxed")
    coverage = tables.join_report(tags, verdicts, reference=reference, criteria=criteria)
    joined = tables.join_verdicts(tags, verdicts, reference=reference, criteria=criteria, on_missing="ignore")
    if joined.is_empty():
        raise VerdictError(
            f"{specs[0]}: no verdict matches a tagged criterion of {run.path}; "
            f"fix: verdict criterion ids must match criteria.parquet ids (e.g. {criteria['criterion_id'][0]})"
        )
    return coverage, joined


def native_inspection(run: RunDir) -> dict[str, bool | None] | None:
    """capability -> P2 from the run's taxonomy.json (None when the run has none)."""
    if not run.has(TAXONOMY):
        return None
    return {c.name: c.needs_native_inspection for c in load_taxonomy(run.path / TAXONOMY).capabilities}


def run_against(
    run_a: RunDir, run_b: RunDir, specs: list[str], options: Options = Options(n_boot=0)
) -> BreakdownResult:
    """Two corpora side by side (Tables A3 and A5): RUN_B must be tagged with RUN_A's taxonomy.

    The verdict files are pooled; each run keeps the verdicts whose criterion ids are its own."""
    reference, by = options.reference, options.by
    current = _same_taxonomy(run_a, run_b)
    names = load_taxonomy(run_a.path / TAXONOMY).names()
    verdicts = pl.concat([load_verdicts(spec) for spec in specs], how="vertical_relaxed")
    frames, counts, lines = [], [], []
    for run in (run_a, run_b):
        frame, count, line = _one_corpus(run, verdicts, reference, by, options.n_boot, options.seed)
        frames.append(frame)
        counts.append(count)
        lines.append(line)
    if all(f is None for f in frames):
        raise VerdictError(
            f"{specs[0]}: no verifier verdicts match the criteria of {run_a.path} or {run_b.path}; "
            f"fix: pass --verdicts with `{reference}` and a verifier's "
            "verdicts for at least one corpus (repeat the option)"
        )
    label_a, label_b = _label(run_a), _label(run_b)
    if label_a == label_b:
        label_a, label_b = f"A {label_a}", f"B {label_b}"
    table = tables.two_corpora(frames[0], frames[1], names, label_a, label_b, counts=(counts[0], counts[1]))
    markdown = "\n".join(
        [
            f"# Verifier error rate by capability: {label_a} and {label_b} ({by} tag, taxonomy {current})",
            "",
            *[f"- {line}" for line in lines],
            "",
            "criteria = criteria with this primary tag; judged = verdicts compared with the reference (a "
            "criterion judged on several systems counts once per system); verifier columns = error rate (%); "
            "– = capability absent from that corpus (or no verdicts).",
            "",
            tables.to_markdown(table),
        ]
    )
    name = f"against_{run_b.path.name}"
    run_a.write_text(f"breakdown/{name}.md", markdown)
    files = [tables.write_csv(table, run_a.path / "breakdown" / f"{name}.csv"), run_a.path / "breakdown" / f"{name}.md"]
    return BreakdownResult(markdown, files, table)


def _same_taxonomy(run_a: RunDir, run_b: RunDir) -> str:
    """The hash of RUN_A's taxonomy, which RUN_B must have been tagged with."""
    current = taxonomy_in_use(run_a, "breakdown")
    tagged = (run_b.manifest.get("stages", {}).get("tag") or {}).get("taxonomy_hash")
    if tagged != current:
        raise RunError(
            f"{run_b.path / TAGS}: tagged against taxonomy {tagged or '(unknown)'}, not {run_a.path.name}'s {current}; "
            "fix: tag the second corpus with the first's frozen taxonomy: "
            f"`taxonomy tag <pipeline.toml> --taxonomy {run_a.path / TAXONOMY}`"
        )
    return current


def _one_corpus(
    run: RunDir, verdicts: pl.DataFrame, reference: str, by: str, n_boot: int, seed: int
) -> tuple[pl.DataFrame | None, dict, str]:
    """One run's part of the table (None without verdicts of both the reference and another verifier on its
    criteria), its criteria per primary capability, and its line under the title."""
    tags = run.read_parquet(TAGS, "tag")
    ok = tags.filter(pl.col("status") == "ok")
    counts = dict(ok.group_by("primary").len().iter_rows())
    mine = verdicts.filter(pl.col("criterion_id").is_in(tags["criterion_id"].implode()))
    if (
        mine.filter(pl.col("verifier") != reference).is_empty()
        or mine.filter(pl.col("verifier") == reference).is_empty()
    ):
        return (
            None,
            counts,
            f"{_label(run)}: no `{reference}` verdicts with another verifier's on its criteria; criteria counts only",
        )
    criteria = run.read_parquet(CRITERIA)
    joined = tables.join_verdicts(ok, mine, reference=reference, criteria=criteria, on_missing="ignore")
    frame = tables.capability_breakdown(joined, by=by, n_boot=n_boot, seed=seed) if not joined.is_empty() else None
    return frame, counts, f"{_label(run)}: {tables.join_report(ok, mine, reference=reference, criteria=criteria)}"


def _label(run: RunDir) -> str:
    return str(run.manifest.get("pipeline") or run.path.name)
