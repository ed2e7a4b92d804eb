"""What Stage 1 and Stage 3 share: batching criteria by task, and turning batch answers into rows."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Iterator

import polars as pl

from taxonomy.validate import Violation, failed_items


@dataclass
class Batch:
    task_id: str
    brief: str
    rows: list[dict]  # criterion dicts: criterion_id, text, category, direction, context
    category: str | None = None  # the rubric category every row shares (the paper's template header)
    cohort: str | None = None
    # The start every row's context shares, said once in the batch's header; each row's `context_rest`
    # is the rest of its context ("part of" lines would otherwise repeat it for every change of context).
    shared_context: str = ""

    def __post_init__(self) -> None:
        self.shared_context = shared_start([r.get("context") or "" for r in self.rows])
        self.rows = [{**r, "context_rest": (r.get("context") or "")[len(self.shared_context) :]} for r in self.rows]

    def fields(self) -> dict:
        """What every batch prompt shows of its batch: the header and the rows."""
        return {
            "task_id": self.task_id,
            "brief": self.brief,
            "criteria": self.rows,
            "category": self.category,
            "cohort": self.cohort,
            "shared_context": self.shared_context,
        }


# A shared start shorter than this is left in each line: the header would cost more than it saves.
MIN_SHARED_CONTEXT = 40


def shared_start(contexts: list[str]) -> str:
    """The start all contexts share, when every row has a context, at least two different ones are
    shown, and it is long enough to be worth a header line. It is cut back to the last punctuation mark
    followed by a space (a path's separator, a clause's end), else to a whole word."""
    if len(set(contexts)) < 2 or not all(contexts):
        return ""
    common = os.path.commonprefix(contexts)
    marks = [m.end() for m in re.finditer(r"[^\w\s]\s", common)]
    cut = marks[-1] if marks else common.rfind(" ") + 1
    common = common[:cut]
    return common if len(common) >= MIN_SHARED_CONTEXT else ""


def criterion_batches(criteria: pl.DataFrame, size: int, brief_max_chars: int) -> Iterator[Batch]:
    """Batches as in the paper's template: criteria of one task and one rubric category (and cohort,
    where the corpus has a `cohort` column) share a call under one header; criteria without a
    category are batched by task. The brief is sent once per batch, cut to `brief_max_chars` with a
    marker that says so (`long_briefs` reports the cut in the run summary)."""
    cols = ["task_id", "criterion_id", "text", "category", "direction", "context", "brief"]
    frame = criteria.select(
        *cols, cohort=pl.col("cohort").cast(pl.Utf8) if "cohort" in criteria.columns else pl.lit(None, pl.Utf8)
    )
    for (task_id, cohort, category), group in frame.group_by("task_id", "cohort", "category", maintain_order=True):
        rows = group.to_dicts()
        brief = cut_brief(rows[0]["brief"] or "", brief_max_chars)
        for part in even_parts(rows, size):
            yield Batch(str(task_id), brief, part, category, cohort)


def even_parts(rows: list, size: int) -> list[list]:
    """As few parts of at most `size` as there must be, their sizes differing by at most one:
    24 criteria at 20 a call go as 12 + 12, not 20 + 4 (a 4-criterion call pays the shared
    instructions for little)."""
    n_parts = max(1, -(-len(rows) // size))
    base, extra = divmod(len(rows), n_parts)
    out, start = [], 0
    for i in range(n_parts):
        end = start + base + (1 if i < extra else 0)
        out.append(rows[start:end])
        start = end
    return [p for p in out if p]


def shared_prefix(prompt: str, marker: str = "\nTask ID: ") -> str:
    """The instructions before a batch's own part (from its first "Task ID:" line): the same in every call of a
    stage."""
    at = prompt.find(marker)
    return prompt[: at + 1] if at >= 0 else ""


def cut_brief(brief: str, limit: int) -> str:
    if len(brief) <= limit:
        return brief
    return brief[:limit] + f"\n[... brief cut here: {limit} of {len(brief)} characters shown]"


def long_briefs(criteria: pl.DataFrame, limit: int) -> list[str]:
    """One note for the run summary when task briefs are longer than the configured limit."""
    lengths = criteria.group_by("task_id", maintain_order=True).agg(
        pl.col("brief").first().fill_null("").str.len_chars().alias("n")
    )
    long = lengths.filter(pl.col("n") > limit)
    if long.is_empty():
        return []
    shown = ", ".join(f"{t} ({n:,})" for t, n in long.head(5).iter_rows())
    more = f" and {long.height - 5} more" if long.height > 5 else ""
    return [
        f"{long.height} task brief(s) are longer than "
        f"discover.brief_max_chars = {limit:,} characters and were cut to it: "
        f"{shown}{more}; raise discover.brief_max_chars to send them whole"
    ]


def item_status(violations: list[Violation], n: int, answered: set[int]) -> list[tuple[str, list[str]]]:
    """Per criterion: ("ok", []) or ("failed", reasons). An unparseable answer fails every item."""
    whole = [str(v) for v in violations if v.item is None]
    bad = failed_items(violations, n)
    out = []
    for i in range(n):
        reasons = [str(v) for v in violations if v.item == i]
        if i in bad or i not in answered:
            out.append(("failed", reasons or whole or ["no valid answer"]))
        else:
            out.append(("ok", []))
    return out
