"""Corpus settings (CorpusConfig, ColumnMap), the loaded Corpus, its columns, and CorpusError."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

LEADING_COLUMNS: dict[str, pl.DataType] = {
    "task_id": pl.Utf8,
    "criterion_id": pl.Utf8,
    "text": pl.Utf8,
    "weight": pl.Float64,
    "category": pl.Utf8,
    "direction": pl.Utf8,
    "brief": pl.Utf8,
    "context": pl.Utf8,
    "source": pl.Utf8,
}


class ColumnMap(BaseModel):
    """Source column names for a "table" corpus. Only `text` must exist in the file."""

    model_config = ConfigDict(extra="forbid")

    task_id: str = "task_id"
    criterion_id: str = "criterion_id"
    text: str = "text"
    weight: str = "weight"
    category: str = "category"
    direction: str = "direction"
    brief: str = "brief"
    context: str = "context"


class CorpusConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # File or folder; relative to the pipeline config file's folder unless absolute.
    path: str
    format: Literal["table", "paperbench", "devai", "rubric_list", "tasks_jsonl", "healthbench"] = "table"
    columns: ColumnMap = ColumnMap()
    papers: list[str] | None = None  # PaperBench subset, e.g. the 20 of split-all.txt
    limit: int | None = Field(None, ge=1)  # keep the first N criteria (smoke runs)
    on_empty: Literal["error", "skip"] = "error"
    # A criterion longer than this is never sent to a model: refused ("error") or cut ("truncate").
    max_chars: int = Field(20_000, ge=100)
    on_long: Literal["error", "truncate"] = "error"


@dataclass
class Corpus:
    frame: pl.DataFrame
    warnings: list[str] = field(default_factory=list)


class CorpusError(ValueError):
    """Bad corpus input, on one line: "<file>: row <n>: <what is wrong>; fix: <how>"."""

    def __init__(self, file: str | Path, row: Any, what: str, fix: str):
        self.file, self.row, self.what, self.fix = str(file), str(row), _one_line(what), _one_line(fix)
        super().__init__(f"{self.file}: row {self.row}: {self.what}; fix: {self.fix}")


def _one_line(s: str) -> str:
    return re.sub(r"\s*\n\s*", " ", str(s)).strip()


def _show(path: Path) -> str:
    """A path as shown in messages: relative to the working folder when under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
