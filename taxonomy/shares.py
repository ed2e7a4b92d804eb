"""The paper's Table 1: each capability's share of the criteria as primary tag, and its markdown (stage3_summary.md).

Below both Stage 3, which writes stage3_summary.md, and the analyses of a run (report, edit, distill) that redraw
it."""

from __future__ import annotations

import polars as pl

FAILED_ROW = "(failed validation)"
UNTAGGED_ROW = "(not tagged)"


def primary_shares(tags: pl.DataFrame, criteria: pl.DataFrame | None = None) -> pl.DataFrame:
    """The paper's Table 1: each capability's share of ALL criteria as primary tag.

    Criteria whose tags failed validation, and criteria of `criteria` with no tag row (or an ok row
    without a primary), are rows of their own, so `share` sums to 1 over the corpus.
    `share_of_tagged` keeps the other denominator, the successfully tagged criteria only (empty on
    the two extra rows)."""
    ok = tags.filter((pl.col("status") == "ok") & pl.col("primary").is_not_null())
    n_failed = tags.filter(pl.col("status") == "failed").height
    n_missing = tags.height - ok.height - n_failed
    if criteria is not None:
        n_missing += criteria.join(tags, on="criterion_id", how="anti").height
    total = ok.height + n_failed + n_missing
    counts = (
        ok.group_by("primary")
        .len("n")
        .rename({"primary": "capability"})
        .sort(["n", "capability"], descending=[True, False])
    )
    extra = pl.DataFrame(
        {"capability": [FAILED_ROW, UNTAGGED_ROW], "n": [n_failed, n_missing]},
        schema={"capability": pl.Utf8, "n": counts.schema["n"]},
    ).filter(pl.col("n") > 0)
    return pl.concat([counts, extra]).with_columns(
        share=pl.col("n") / max(total, 1),
        share_of_tagged=pl.when(pl.col("capability").is_in([FAILED_ROW, UNTAGGED_ROW]))
        .then(None)
        .otherwise(pl.col("n") / max(ok.height, 1)),
    )


def summary_markdown(shares: pl.DataFrame) -> str:
    def pct(v) -> str:
        return "–" if v is None else f"{100 * v:.1f}%"

    lines = [
        "Share as primary tag over all criteria (the paper's Table "
        "1); the last column divides by the tagged criteria only.",
        "",
        "| capability | criteria | share of all criteria | share of tagged criteria |",
        "|---|---:|---:|---:|",
    ]
    lines += [
        f"| {r['capability']} | {r['n']} | {pct(r['share'])} | {pct(r['share_of_tagged'])} |"
        for r in shares.iter_rows(named=True)
    ]
    return "\n".join(lines) + "\n"
