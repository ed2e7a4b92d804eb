"""The "table" format: one criterion per row of a .jsonl, .csv, .tsv, .parquet file, or of a JSON list of objects."""

from __future__ import annotations

from pathlib import Path

from taxonomy.corpus.config import ColumnMap, CorpusConfig, CorpusError, show_path
from taxonomy.corpus.detect import folder_format, resolve_columns
from taxonomy.corpus.records import Loaded, make_record, parse_weight, prefix_ids, short_list
from taxonomy.corpus.tablefile import read_table


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
            f'point path at a .jsonl/.csv/.parquet file, or set format = "{hint}"',
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
                f'rename the column in the file or set [corpus.columns] {key} = "<your column>"',
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
    for i, where in enumerate(rownums):
        w = weights[i]
        if w is None or (isinstance(w, str) and not w.strip()):
            if has_weight:
                unweighted.append(str(where.n))
            w = 1.0
        records.append(
            make_record(
                task_id="task" if tasks[i] is None else tasks[i],
                criterion_id=(where.line if jsonl else where.n) if ids[i] is None else ids[i],
                text=texts[i],
                weight=parse_weight(w, show, where.label, weight_name),
                category=cats[i],
                brief=briefs[i],
                context=ctxs[i],
                file=show,
                row=where.label,
                source=where.source(rel),
                direction=dirs[i],
            )
        )
    if len({r["task_id"] for r in records}) > 1:
        prefix_ids(records)
    warnings = []
    if unweighted:
        warnings.append(f"{rel}: {len(unweighted)} rows have no weight; used 1.0 (rows {short_list(unweighted)})")
    mapped = set(cols.model_dump().values())
    extras = raw.select([c for c in found if c not in mapped])
    return Loaded(records, extras, warnings)
