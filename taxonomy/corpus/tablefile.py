"""A corpus file read as a raw table (.jsonl, .csv, .tsv, .parquet, a JSON list of objects), each row with
where it is as messages name it: what the "table" format loads and what detection reads the columns of."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from taxonomy.corpus.config import CorpusError, data_row, require_objects, show_path
from taxonomy.corpus.jsonio import read_json, read_jsonl, read_text_file
from taxonomy.corpus.records import extras_frame

LINE_SUFFIXES = (".csv", ".csv.gz", ".tsv", ".tsv.gz", ".jsonl", ".jsonl.gz", ".ndjson")
CORPUS_SUFFIXES = LINE_SUFFIXES + (".json", ".json.gz", ".parquet")


SEPARATORS = ",;\t|"
_SNIFFED_LINES = 20


def sniff_separator(text: str, default: str) -> str:
    """The field separator of a CSV/TSV: the suffix's own when its header holds it, else what csv.Sniffer finds
    in the first lines among , ; tab | (a spreadsheet in a comma-decimal locale writes ';' into a .csv) when the
    header holds that one. A one-column file keeps the default, whatever its criteria's punctuation."""
    header = text.split("\n", 1)[0]
    if default in header:
        return default
    try:
        found = csv.Sniffer().sniff("\n".join(text.split("\n", _SNIFFED_LINES)[:_SNIFFED_LINES]), SEPARATORS)
    except csv.Error:
        return default
    return found.delimiter if found.delimiter in header else default


@dataclass(frozen=True)
class Where:
    """Where a criterion row is: its 1-based data row, its file line in a text file, its pointer in a JSON list."""

    n: int
    line: int | None = None
    pointer: str | None = None

    @property
    def label(self) -> str:
        return data_row(self.n, self.line)

    def source(self, rel: str) -> str:
        return f"{rel}#{self.pointer}" if self.pointer else f"{rel}:{self.line or self.n}"


def record_lines(text: str, separator: str) -> list[int]:
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


def read_table(path: Path) -> tuple[pl.DataFrame, list[Where]]:
    """The raw frame and where each row is (messages name it by CorpusError's convention)."""
    name, show = path.name.lower(), show_path(path)
    if name.endswith((".jsonl", ".jsonl.gz", ".ndjson")):
        pairs = read_jsonl(path)
        rows = [obj for _, obj in pairs]
        frame = extras_frame(rows)
        return frame, [Where(n, lineno) for n, (lineno, _) in enumerate(pairs, start=1)]
    if name.endswith((".json", ".json.gz")):
        items = require_objects(
            read_json(path),
            show,
            None,
            "expected a JSON list of objects, one per criterion",
            'write [{"criterion": "...", "task": "...", "weight": 1}, ...], or use a .jsonl file',
        )
        return extras_frame(items), [Where(i + 1, pointer=f"/{i}") for i in range(len(items))]
    try:
        if name.endswith((".csv", ".csv.gz", ".tsv", ".tsv.gz")):
            text = read_text_file(path)
            separator = sniff_separator(text, "\t" if name.endswith((".tsv", ".tsv.gz")) else ",")
            frame = pl.read_csv(io.BytesIO(text.encode()), separator=separator, infer_schema_length=None)
            lines = record_lines(text, separator)
            if len(lines) == frame.height:
                return frame, [Where(n, line) for n, line in enumerate(lines, start=1)]
        elif name.endswith(".parquet"):
            frame = pl.read_parquet(path)
        else:
            raise CorpusError(
                show,
                "-",
                f"unknown table suffix in {path.name!r}",
                f"use one of {', '.join(CORPUS_SUFFIXES)}, or set another format "
                "(paperbench, devai, rubric_list, tasks_jsonl, healthbench)",
            )
    except CorpusError:
        raise
    except Exception as exc:  # noqa: BLE001 - polars/arrow parse errors
        problem = csv_problem(text, separator) if name.endswith((".csv", ".csv.gz", ".tsv", ".tsv.gz")) else None
        if problem is not None:
            raise CorpusError(
                show,
                problem[0],
                problem[1],
                "make every row have as many fields as the header: quote a field that holds the separator "
                'or a line break with double quotes, and double a quote inside it ("")',
            ) from None
        raise CorpusError(
            show,
            "-",
            f"cannot parse the file ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})",
            "check that it is a well-formed CSV/TSV (header row, same number of fields per row) or Parquet file",
        ) from None
    return frame, [Where(n) for n in range(1, frame.height + 1)]
