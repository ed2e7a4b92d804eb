"""What guidance is drafted from: criteria joined with their tags, example criteria per capability, and the
capability cards as judges may read them."""

from __future__ import annotations

import polars as pl

from taxonomy.schemas import Taxonomy


# ---- inputs ---------------------------------------------------------------------------
def routed_criteria(criteria: pl.DataFrame, tags: pl.DataFrame) -> pl.DataFrame:
    """Criteria in corpus order with their tags: [criterion_id, task_id, text, tags, primary].

    A criterion without tags (Stage 3 failed, or absent from the tags table) has tags [] and primary null.
    """
    keep = tags.select("criterion_id", "tags", "primary")
    joined = criteria.select("criterion_id", "task_id", "text").join(
        keep, on="criterion_id", how="left", maintain_order="left"
    )
    return joined.with_columns(pl.col("tags").fill_null(pl.lit([], dtype=pl.List(pl.Utf8))))


def select_examples(routed: pl.DataFrame, capability: str, n: int) -> list[dict[str, str]]:
    """Up to n criteria whose primary tag is `capability`, in corpus order: a new task with a new text first,
    then any new text, then the rest (a rubric repeating one criterion in every task is quoted once first)."""
    rows = routed.filter(pl.col("primary") == capability).to_dicts()
    tasks: set = set()
    texts: set = set()
    fresh, new_text, rest = [], [], []
    for r in rows:
        text = " ".join(str(r["text"] or "").split())
        if text in texts:
            rest.append(r)
        elif r["task_id"] in tasks:
            new_text.append(r)
        else:
            fresh.append(r)
            tasks.add(r["task_id"])
        texts.add(text)
    chosen = (fresh + new_text + rest)[:n]
    return [
        {"task_id": str(r["task_id"]), "criterion_id": str(r["criterion_id"]), "text": str(r["text"] or "")}
        for r in chosen
    ]


def judge_view(taxonomy: Taxonomy) -> Taxonomy:
    """The taxonomy as judges and the guidance prompt see it. Cards the offline backend drew from corpus
    statistics (opening shares, phrase counts, "prefer the sibling" boundaries) tell a judge nothing it can
    act on, so they are left out; a person's `describe` sentence, the names and P2/P3 stay."""
    if taxonomy.written_by != "offline":
        return taxonomy
    blank = {"description": "", "diagnostic_signal": "", "example_pattern": "", "non_examples": []}
    return taxonomy.model_copy(update={"capabilities": [c.model_copy(update=blank) for c in taxonomy.capabilities]})
