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
    # A criterion longer than this is kept but warned about: a check is a sentence or two.
    warn_chars: int = Field(5_000, ge=100)
    # The same criterion twice in a task (same text after trimming spaces, same weight): one row ("collapse"),
    # or both ("keep", as `taxonomy lint` reads a rubric, to list them). Unset: collapsed, except in the
    # published benchmarks (paperbench, devai, healthbench), whose verdicts name every criterion by id.
    on_duplicate: Literal["collapse", "keep"] | None = None


@dataclass
class Corpus:
    frame: pl.DataFrame
    warnings: list[str] = field(default_factory=list)


class CorpusError(ValueError):
    """Bad corpus input, on one line: "<file>: <where>: <what is wrong>; fix: <how>".

    One convention for <where> (see `place`): `row N` is the Nth criterion row of a table, counted from 1
    without the header, followed by its file line in a text file (`row 2 (line 3)` in CSV, TSV and JSONL;
    `row 2` in Parquet and a JSON list of criteria); `line N` alone is a file line found before rows are read
    (an encoding or JSON syntax error, a header); `at /pointer` a node of a JSON tree; the whole file names no
    place."""

    def __init__(self, file: str | Path, row: Any, what: str, fix: str):
        self.file, self.row, self.what, self.fix = str(file), place(row), _one_line(what), _one_line(fix)
        where = f" {self.row}:" if self.row else ""
        super().__init__(f"{self.file}:{where} {self.what}; fix: {self.fix}")


def require_objects(value: Any, file: str | Path, row: Any, what: str, fix: str) -> list[dict]:
    """`value` where it is a list of JSON objects; else the CorpusError saying `what` is wrong and the `fix`."""
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise CorpusError(file, row, what, fix)
    return value


def place(row: Any) -> str:
    """How a message names a place in a file: an int is a file line, "/..." a JSON pointer, None or "-" the whole
    file."""
    text = "" if row is None else str(row).strip()
    if text in ("", "-") or text.startswith(("line ", "row ", "at ")):
        return text.removeprefix("-")
    return f"at {text}" if text.startswith("/") else f"line {text}"


def data_row(n: int, line: int | None = None) -> str:
    """A criterion row as every message names it: `row N`, with its file line in a text file."""
    return f"row {n}" + (f" (line {line})" if line is not None else "")


def _one_line(s: str) -> str:
    return re.sub(r"\s*\n\s*", " ", str(s)).strip()


def corpus_stem(path: str | Path) -> str:
    """A folder-safe name from a corpus file or folder name ("my rubric (v2).csv" -> "my_rubric_v2")."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", Path(path).name.split(".")[0]).strip("._-") or "corpus"


def show_path(path: Path) -> str:
    """A path as shown in messages: relative to the working folder when under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
