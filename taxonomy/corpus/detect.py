"""A bare corpus file, with no pipeline TOML: which format it is and which of its columns hold what.

`taxonomy run FILE`, `taxonomy init FILE`, and `tag` / `audit` on a corpus file start here. The format
comes from the suffix and, for JSON lines and JSON lists, from the keys of the records; a table's
columns are matched by common names (case, spaces and hyphens ignored), first name found wins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from taxonomy.corpus.config import ColumnMap, CorpusError, show_path
from taxonomy.corpus.jsonio import read_json, read_jsonl
from taxonomy.corpus.tablefile import CORPUS_SUFFIXES, read_table

# ColumnMap key -> the column names taken for it, in order of preference.
COLUMN_NAMES: dict[str, tuple[str, ...]] = {
    "text": ("criterion", "criteria", "text", "requirement", "rubric"),
    "task_id": ("task_id", "task", "prompt_id"),
    "criterion_id": ("criterion_id",),
    "weight": ("weight", "points", "score"),
    "category": ("category",),
    "direction": ("direction",),
    "brief": ("brief", "prompt"),
    "context": ("context",),
}
EXPECTED = (
    "a pipeline TOML (.toml), a corpus file (.csv, .tsv, .jsonl, .json or .parquet, optionally gzipped) "
    "or a corpus folder (PaperBench papers/, DevAI instances/, or one rubric-list .json per task)"
)


@dataclass
class Detected:
    """What was found in a bare corpus file: the [corpus] settings and a line saying so."""

    path: Path
    format: str
    columns: ColumnMap = field(default_factory=ColumnMap)
    used: dict[str, str] = field(default_factory=dict)  # ColumnMap key -> the file's column
    found: list[str] = field(default_factory=list)  # every column of the file

    def describe(self) -> str:
        if self.format != "table":
            return (
                f"{show_path(self.path)}: format {self.format} (detected from "
                f"its {'folder layout' if self.path.is_dir() else 'keys'})"
            )
        used = ", ".join(f'{key} = "{src}"' for key, src in self.used.items())
        missing = [k for k in ("task_id", "weight", "category", "brief") if k not in self.used]
        unused = [c for c in self.found if c not in self.used.values()]
        line = f"{show_path(self.path)}: columns used: {used}"
        if missing:
            line += f"; not found (defaults): {', '.join(missing)}"
        if unused:
            line += f"; kept as extra columns: {', '.join(unused)}"
        return line


def _norm(name: str) -> str:
    return re.sub(r"[\s\-]+", "_", str(name).strip().lower())


def match_columns(found: list[str]) -> dict[str, str]:
    """ColumnMap key -> the file's column, for every key one of whose names is among `found`."""
    by_norm: dict[str, str] = {}
    for col in found:
        by_norm.setdefault(_norm(col), col)
    used: dict[str, str] = {}
    for key, names in COLUMN_NAMES.items():
        for name in names:
            col = by_norm.get(name)
            if col is not None and col not in used.values():
                used[key] = col
                break
    return used


def resolve_columns(cols: ColumnMap, found: list[str]) -> ColumnMap:
    """A TOML's [corpus.columns] as written; a key left at its default name that the file lacks is found
    by name as for a bare file, so the same CSV reads alike with or without a TOML."""
    defaults = ColumnMap()
    fixed = {k: v for k, v in cols.model_dump().items() if v != getattr(defaults, k) or v in found}
    guessed = match_columns([c for c in found if c not in fixed.values()])
    return ColumnMap(**{**{k: v for k, v in guessed.items() if k not in fixed}, **fixed})


def folder_format(path: Path) -> str:
    if (path / "papers").is_dir():
        return "paperbench"
    if (path / "instances").is_dir() or (path / "devai" / "instances").is_dir():
        return "devai"
    if (path / "tasks.jsonl").is_file() or (path / "tasks.jsonl.gz").is_file():
        return "tasks_jsonl"
    if any(f.name.endswith((".json", ".json.gz")) for f in path.iterdir()):
        return "rubric_list"
    raise CorpusError(show_path(path), None, "a folder with no corpus layout in it", f"pass {EXPECTED}")


def detect(path: Path) -> Detected:
    """The format and column map of a bare corpus file or folder; CorpusError when it is neither."""
    if not path.exists():
        raise CorpusError(
            show_path(path), None, "no such file or folder", "check the path (relative to the folder you run in)"
        )
    if path.is_dir():
        return Detected(path, folder_format(path))
    name = path.name.lower()
    if not name.endswith(CORPUS_SUFFIXES):
        raise CorpusError(
            show_path(path),
            None,
            f"not a corpus or pipeline file (suffix {''.join(path.suffixes) or 'none'})",
            f"pass {EXPECTED}",
        )
    if name.endswith((".jsonl", ".jsonl.gz", ".ndjson")):
        first = next(iter(read_jsonl(path)), (0, {}))[1]
        if {"prompt_id", "rubrics"} <= set(first):
            return Detected(path, "healthbench")
        if "aggregated_rubric_json" in first:
            return Detected(path, "tasks_jsonl")
    if name.endswith((".json", ".json.gz")):
        items = read_json(path)
        if isinstance(items, list) and any(isinstance(i, dict) and "criteria" in i for i in items):
            return Detected(path, "rubric_list")
    found = read_table(path)[0].columns
    used = match_columns(found)
    if "text" not in used:
        raise CorpusError(
            show_path(path),
            None,
            f"no criterion column: none of {', '.join(COLUMN_NAMES['text'])} "
            f"among its columns ({', '.join(found) or 'none'})",
            "rename the criterion column to one of those, or run `taxonomy init "
            f'{path.name}` and set text = "<your column>" under [corpus.columns]',
        )
    return Detected(path, "table", ColumnMap(**used), used, list(found))
