"""What guidance is drafted from: criteria joined with their tags, and example criteria per capability."""
from __future__ import annotations

import polars as pl


# ---- inputs ---------------------------------------------------------------------------
def routed_criteria(criteria: pl.DataFrame, tags: pl.DataFrame) -> pl.DataFrame:
    """Criteria in corpus order with their tags: [criterion_id, task_id, text, tags, primary].

    A criterion without tags (Stage 3 failed, or absent from the tags table) has tags [] and primary null.
    """
    keep = tags.select("criterion_id", "tags", "primary")
    joined = criteria.select("criterion_id", "task_id", "text").join(keep, on="criterion_id", how="left", maintain_order="left")
    return joined.with_columns(pl.col("tags").fill_null(pl.lit([], dtype=pl.List(pl.Utf8))))


def select_examples(routed: pl.DataFrame, capability: str, n: int) -> list[dict[str, str]]:
    """Up to n criteria whose primary tag is `capability`: one per task first (corpus order), then the rest."""
    rows = routed.filter(pl.col("primary") == capability).to_dicts()
    first_of_task, seen = [], set()
    for r in rows:
        if r["task_id"] not in seen:
            seen.add(r["task_id"])
            first_of_task.append(r)
    chosen_ids = {r["criterion_id"] for r in first_of_task[:n]}
    rest = [r for r in rows if r["criterion_id"] not in chosen_ids]
    chosen = (first_of_task[:n] + rest)[:n]
    return [{"task_id": str(r["task_id"]), "criterion_id": str(r["criterion_id"]), "text": str(r["text"] or "")} for r in chosen]
