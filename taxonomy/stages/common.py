"""What Stage 1 and Stage 3 share: batching criteria by task, and turning batch answers into rows."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import polars as pl

from taxonomy.validate import Violation, failed_items


@dataclass
class Batch:
    task_id: str
    brief: str
    rows: list[dict]  # criterion dicts: criterion_id, text, category, direction, context


def batches_by_task(criteria: pl.DataFrame, size: int, brief_max_chars: int) -> Iterator[Batch]:
    """Criteria of one task share a call, so its brief is sent once per batch, not once per criterion."""
    cols = ["task_id", "criterion_id", "text", "category", "direction", "context", "brief"]
    for (task_id,), group in criteria.select(cols).group_by("task_id", maintain_order=True):
        rows = group.to_dicts()
        brief = (rows[0]["brief"] or "")[:brief_max_chars]
        for start in range(0, len(rows), size):
            yield Batch(str(task_id), brief, rows[start : start + size])


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
