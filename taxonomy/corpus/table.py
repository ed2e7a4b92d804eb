"""The "table" format: one criterion per row of a .jsonl, .csv, .tsv, .parquet file, or of a JSON list of objects."""
from __future__ import annotations

import csv
import io
from pathlib import Path

import polars as pl

from taxonomy.corpus.config import ColumnMap, CorpusConfig, CorpusError, show_path
from taxonomy.corpus.detect import CORPUS_SUFFIXES, folder_format, resolve_columns
from taxonomy.corpus.jsonio import read_json, read_jsonl, read_text_file
from taxonomy.corpus.records import Loaded, extras_frame, make_record, parse_weight, prefix_ids, short_list



def _record_lines(text: str, separator: str) -> list[int]:
    """The file line on which each data record of a CSV/TSV starts (quoted fields may span lines);
    empty when the csv module reads the file otherwise than polars did (rows are then numbered instead)."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=separator)
    starts, last = [], 0
    try:
        for _ in reader:
            starts.append(last + 1)
            last = reader.line_num
    except csv.Error:
        return []
    return starts[1:]


def csv_problem(text: str, separator: str) -> tuple[int, str] | None:
    """(file line, what is wrong) of the first record polars could not parse, found again with the csv
    module: polars names no line. None when the csv module sees nothing wrong either."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=separator, strict=True)
    start, width = 1, None
    try:
        for fields in reader:
            if fields and width is None:
                width = len(fields)
            elif fields and len(fields) != width:
                return start, f"{len(fields)} fields where the header (line 1) has {width}"
            start = reader.line_num + 1
    except csv.Error as exc:
        if "end of data" in str(exc):
            return start, "a quoted field starts on this line and its closing quote never comes"
        return start, f"malformed ({exc})"
    return None


def read_table(path: Path) -> tuple[pl.DataFrame, list[str]]:
    """The raw frame and where each row is, as messages name it (CorpusError's convention)."""
    name, show = path.name.lower(), show_path(path)
    if name.endswith((".jsonl", ".jsonl.gz", ".ndjson")):
        pairs = read_jsonl(path)
        rows = [obj for _, obj in pairs]
        frame = extras_frame(rows)
        return frame, [f"line {lineno}" for lineno, _ in pairs]
    if name.endswith((".json", ".json.gz")):
        items = read_json(path)
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise CorpusError(show, None, "expected a JSON list of objects, one per criterion",
                              'write [{"criterion": "...", "task": "...", "weight": 1}, ...], or use a .jsonl file')
        return extras_frame(items), [f"at /{i}" for i in range(len(items))]
    try:
        if name.endswith((".csv", ".csv.gz", ".tsv", ".tsv.gz")):
            separator = "\t" if name.endswith((".tsv", ".tsv.gz")) else ","
            text = read_text_file(path)
            frame = pl.read_csv(io.BytesIO(text.encode()), separator=separator, infer_schema_length=None)
            lines = _record_lines(text, separator)
            if len(lines) == frame.height:
                return frame, [f"line {n}" for n in lines]
        elif name.endswith(".parquet"):
            frame = pl.read_parquet(path)
        else:
            raise CorpusError(
                show,
                "-",
                f"unknown table suffix in {path.name!r}",
                f"use one of {', '.join(CORPUS_SUFFIXES)}, or set another format (paperbench, devai, rubric_list, tasks_jsonl, healthbench)",
            )
    except CorpusError:
        raise
    except Exception as exc:  # noqa: BLE001 - polars/arrow parse errors
        problem = csv_problem(text, separator) if name.endswith((".csv", ".csv.gz", ".tsv", ".tsv.gz")) else None
        if problem is not None:
            raise CorpusError(show, problem[0], problem[1],
                              "make every row have as many fields as the header: quote a field that holds the separator "
                              "or a line break with double quotes, and double a quote inside it (\"\")") from None
        raise CorpusError(
            show,
            "-",
            f"cannot parse the file ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})",
            "check that it is a well-formed CSV/TSV (header row, same number of fields per row) or Parquet file",
        ) from None
    return frame, [f"row {n}" for n in range(1, frame.height + 1)]


def _not_a_folder(path: Path) -> None:
    if path.is_dir():
        try:
            hint = folder_format(path)
        except CorpusError:
            hint = "rubric_list"
        raise CorpusError(
            show_path(path),
            "-",
            "format 'table' needs a file but this is a folder",
            f"point path at a .jsonl/.csv/.parquet file, or set format = \"{hint}\"",
        )


def _columns(path: Path, cfg: CorpusConfig, found: list[str]) -> ColumnMap:
    """The file's column for each field: named in [corpus.columns], else found by name; a named one must exist."""
    cols, defaults = resolve_columns(cfg.columns, found), ColumnMap()
    for key, src in cols.model_dump().items():
        explicit = src != getattr(defaults, key)
        if src not in found and (key == "text" or explicit):
            raise CorpusError(
                show_path(path),
                "line 1" if path.name.lower().endswith((".csv", ".csv.gz", ".tsv", ".tsv.gz")) else None,
                f"column {src!r} (columns.{key}) not found; columns found: {', '.join(found) or 'none'}",
                f"rename the column in the file or set [corpus.columns] {key} = \"<your column>\"",
            )
    return cols


def load_table(path: Path, cfg: CorpusConfig) -> Loaded:
    _not_a_folder(path)
    show, rel = show_path(path), path.name
    raw, rownums = read_table(path)
    found = raw.columns
    cols = _columns(path, cfg, found)

    def column(key: str) -> list:
        src = getattr(cols, key)
        return raw[src].to_list() if src in found else [None] * raw.height

    weight_name = "weight" if cols.weight == "weight" else f"weight (column {cols.weight!r})"
    tasks, ids, texts, weights = column("task_id"), column("criterion_id"), column("text"), column("weight")
    cats, dirs, briefs, ctxs = column("category"), column("direction"), column("brief"), column("context")
    has_weight = cols.weight in found
    records, unweighted = [], []
    # A row without an id is numbered as before line numbers reached messages: JSONL by line, others by data row.
    jsonl = path.name.lower().endswith((".jsonl", ".jsonl.gz", ".ndjson"))
    for i, row in enumerate(rownums):
        w = weights[i]
        if w is None or (isinstance(w, str) and not w.strip()):
            if has_weight:
                unweighted.append(row.split(" ", 1)[-1])
            w = 1.0
        records.append(
            make_record(
                task_id="task" if tasks[i] is None else tasks[i],
                criterion_id=(row.split(" ", 1)[-1] if jsonl else i + 1) if ids[i] is None else ids[i],
                text=texts[i],
                weight=parse_weight(w, show, row, weight_name),
                category=cats[i],
                brief=briefs[i],
                context=ctxs[i],
                file=show,
                row=row,
                source=f"{rel}:{row.split(' ', 1)[-1]}" if row.startswith(("line", "row")) else f"{rel}#{row.removeprefix('at ')}",
                direction=dirs[i],
            )
        )
    if len({r["task_id"] for r in records}) > 1:
        prefix_ids(records)
    warnings = []
    if unweighted:
        unit = rownums[0].split(" ", 1)[0] + "s" if rownums[0].startswith(("line", "row")) else "items"
        warnings.append(f"{rel}: {len(unweighted)} rows have no weight; used 1.0 ({unit} {short_list(unweighted)})")
    mapped = set(cols.model_dump().values())
    extras = raw.select([c for c in found if c not in mapped])
    return Loaded(records, extras, warnings)
