"""Load a rubric corpus into one criterion table.

Every format ends in the same polars frame, one row per criterion, with these leading
columns (then any free extra columns):

    task_id       Utf8     the task (paper, instance, file stem, ...)
    criterion_id  Utf8     unique across the corpus; "<task>/<id>" in multi-task corpora
    text          Utf8     the criterion
    weight        Float64  negative = penalty; PaperBench leaves sum to 1 per paper
    category      Utf8     the corpus's own category, if any (nullable)
    direction     Utf8     "reward" or "penalty"
    brief         Utf8     the task brief ("" if none)
    context       Utf8     ancestor requirements joined " > " (trees), else ""
    source        Utf8     "<file>:<line>" for rows, "<file>#<JSON pointer>" for JSON nodes

Formats (CorpusConfig.format), one small loader each in LOADERS:
  table        .jsonl / .jsonl.gz / .csv / .csv.gz / .parquet; columns mapped by ColumnMap,
               unmapped columns pass through as extra columns
  paperbench   folder with papers/<paper>/rubric.json[.gz]; leaves only; extras
               finegrained_category and node_id (the upstream node id)
  devai        folder with instances/ or devai/instances/; extras requirement_id, prerequisites
  rubric_list  a JSON list of {"criteria"|"criterion", "weight", ...} (one task), or a folder of them
  tasks_jsonl  tasks.jsonl lines with task_id, final_prompt, aggregated_rubric_json

Bad input raises CorpusError with a one-line message "<file>: row <n>: <what>; fix: <how>".
In JSONL files the row is the line number; in CSV and Parquet it is the 1-based data row
(header not counted); in JSON trees it is a JSON pointer; "-" means the whole file.
"""
from __future__ import annotations

import gzip
import io
import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

import polars as pl
from pydantic import BaseModel, ConfigDict

__all__ = [
    "LEADING_COLUMNS",
    "LOADERS",
    "ColumnMap",
    "Corpus",
    "CorpusConfig",
    "CorpusError",
    "load_corpus",
    "read_json",
]

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
# Bookkeeping columns carried through loading for error messages, dropped at the end.
_WHERE = {"_file": pl.Utf8, "_row": pl.Utf8}
_MAX_LISTED = 10  # rows named in one warning


# --------------------------------------------------------------------------- config


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
    format: Literal["table", "paperbench", "devai", "rubric_list", "tasks_jsonl"] = "table"
    columns: ColumnMap = ColumnMap()
    papers: list[str] | None = None  # PaperBench subset, e.g. the 20 of split-all.txt
    limit: int | None = None  # keep the first N criteria (smoke runs)
    on_empty: Literal["error", "skip"] = "error"


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


# --------------------------------------------------------------------------- JSON


def _existing(path: Path) -> Path | None:
    """`path` itself, or its gzipped twin: X.json <-> X.json.gz."""
    if path.is_file():
        return path
    twin = path.with_name(path.name[:-3]) if path.name.endswith(".gz") else path.with_name(path.name + ".gz")
    return twin if twin.is_file() else None


def _read_text(path: Path) -> str:
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        data = gzip.decompress(data)
    return data.decode("utf-8-sig")


def read_json(path: str | Path) -> Any:
    """Parse X.json, or X.json.gz when only that exists (either name may be passed)."""
    path = Path(path)
    found = _existing(path)
    if found is None:
        raise CorpusError(
            _show(path),
            "-",
            "file not found (nor its .gz twin)",
            "check the path; it resolves to " + str(path.resolve()),
        )
    try:
        return json.loads(_read_text(found))
    except json.JSONDecodeError as exc:
        raise CorpusError(
            _show(found),
            exc.lineno,
            f"invalid JSON at column {exc.colno}: {exc.msg}",
            "correct the JSON syntax on that line",
        ) from None
    except (UnicodeDecodeError, OSError, EOFError) as exc:
        raise CorpusError(
            _show(found),
            "-",
            f"cannot read the file ({exc})",
            "save it as UTF-8 JSON (optionally gzipped as .json.gz)",
        ) from None


def _read_jsonl(path: Path) -> list[tuple[int, dict]]:
    """(line number, object) for every non-blank line."""
    out = []
    for lineno, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusError(
                _show(path),
                lineno,
                f"invalid JSON at column {exc.colno}: {exc.msg}",
                "make each line one complete JSON object",
            ) from None
        if not isinstance(obj, dict):
            raise CorpusError(
                _show(path),
                lineno,
                f"expected a JSON object, got {type(obj).__name__}",
                "make each line one JSON object such as {\"text\": \"...\"}",
            )
        out.append((lineno, obj))
    return out


# --------------------------------------------------------------------------- shared helpers


def _weight(value: Any, file: str, row: Any, name: str = "weight") -> float:
    """A finite float from a number or numeric string; CorpusError otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        bad = True
    else:
        try:
            w = float(value)
            bad = not math.isfinite(w)
        except ValueError:
            bad = True
    if bad:
        raise CorpusError(
            file,
            row,
            f"{name} {value!r} is not a number",
            "give a finite number such as 1 or -0.5 (negative = penalty)",
        )
    return w


def _direction(weight: float, given: Any, file: str, row: Any) -> tuple[float, str]:
    """(weight, direction): negative weight means penalty; an explicit "penalty" makes the weight negative."""
    if given is None or (isinstance(given, str) and not given.strip()):
        return weight, "penalty" if weight < 0 else "reward"
    d = str(given).strip().lower()
    if d not in ("reward", "penalty"):
        raise CorpusError(
            file,
            row,
            f"direction {given!r} is neither 'reward' nor 'penalty'",
            "use 'reward' or 'penalty' (or leave it empty and give penalties a negative weight)",
        )
    if d == "reward" and weight < 0:
        raise CorpusError(
            file,
            row,
            f"direction is 'reward' but weight is negative ({weight:g})",
            "make the weight positive or set direction to 'penalty'",
        )
    return (-abs(weight), "penalty") if d == "penalty" else (weight, "reward")


def _list(items: list[str]) -> str:
    """The first few items, comma-separated, with a count of the rest."""
    shown = ", ".join(items[:_MAX_LISTED])
    return shown + (f", ... and {len(items) - _MAX_LISTED} more" if len(items) > _MAX_LISTED else "")


def _str_or_none(value: Any) -> str | None:
    if value is None:
        return None
    s = str(value).strip()
    return s or None


def _record(task_id, criterion_id, text, weight, category, brief, context, file, row, source, direction=None) -> dict:
    weight, direction = _direction(weight, direction, file, row)
    return {
        "task_id": str(task_id),
        "criterion_id": str(criterion_id),
        "text": text if isinstance(text, str) or text is None else str(text),
        "weight": weight,
        "category": _str_or_none(category),
        "direction": direction,
        "brief": brief or "",
        "context": context or "",
        "source": source,
        "_file": file,
        "_row": str(row),
    }


def _extras_frame(rows: list[dict]) -> pl.DataFrame:
    """Free extra columns from per-row dicts; falls back to JSON strings for awkward values."""
    names = list(dict.fromkeys(k for r in rows for k in r))
    if not names:
        return pl.DataFrame()
    try:
        return pl.from_dicts(rows, schema=names, infer_schema_length=None, strict=False)
    except Exception:  # noqa: BLE001 - polars raises various types on mixed nested values
        def as_text(v: Any) -> str | None:
            return v if v is None or isinstance(v, str) else json.dumps(v, ensure_ascii=False)

        columns = {k: [as_text(r.get(k)) for r in rows] for k in names}
        return pl.DataFrame(columns, schema={k: pl.Utf8 for k in names})


@dataclass
class _Loaded:
    """What a format loader returns: leading-column records, optional extra columns, warnings."""

    records: list[dict]
    extras: pl.DataFrame | None = None
    warnings: list[str] = field(default_factory=list)


def _prefix_ids(records: list[dict]) -> None:
    """Make ids "<task>/<id>" (unless already so)."""
    for r in records:
        if not r["criterion_id"].startswith(r["task_id"] + "/"):
            r["criterion_id"] = f"{r['task_id']}/{r['criterion_id']}"


# --------------------------------------------------------------------------- table

_TABLE_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".csv", ".csv.gz", ".parquet")


def _read_table(path: Path) -> tuple[pl.DataFrame, list[int]]:
    """The raw frame and each row's number as shown in messages."""
    name, show = path.name.lower(), _show(path)
    if name.endswith((".jsonl", ".jsonl.gz", ".ndjson")):
        pairs = _read_jsonl(path)
        rows = [obj for _, obj in pairs]
        frame = _extras_frame(rows)
        return frame, [lineno for lineno, _ in pairs]
    try:
        if name.endswith((".csv", ".csv.gz")):
            data = path.read_bytes()
            if name.endswith(".gz"):
                data = gzip.decompress(data)
            frame = pl.read_csv(io.BytesIO(data), infer_schema_length=None)
        elif name.endswith(".parquet"):
            frame = pl.read_parquet(path)
        else:
            raise CorpusError(
                show,
                "-",
                f"unknown table suffix in {path.name!r}",
                f"use one of {', '.join(_TABLE_SUFFIXES)}, or set another format (paperbench, devai, rubric_list, tasks_jsonl)",
            )
    except CorpusError:
        raise
    except Exception as exc:  # noqa: BLE001 - polars/arrow parse errors
        raise CorpusError(
            show,
            "-",
            f"cannot parse the file ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})",
            "check that it is a well-formed CSV (header row, same number of fields per row) or Parquet file",
        ) from None
    return frame, list(range(1, frame.height + 1))


def _load_table(path: Path, cfg: CorpusConfig) -> _Loaded:
    if path.is_dir():
        hint = "rubric_list"
        if (path / "papers").is_dir():
            hint = "paperbench"
        elif (path / "instances").is_dir() or (path / "devai" / "instances").is_dir():
            hint = "devai"
        raise CorpusError(
            _show(path),
            "-",
            "format 'table' needs a file but this is a folder",
            f"point path at a .jsonl/.csv/.parquet file, or set format = \"{hint}\"",
        )
    show, rel = _show(path), path.name
    raw, rownums = _read_table(path)
    cols, defaults = cfg.columns, ColumnMap()
    found = raw.columns
    for key, src in cols.model_dump().items():
        explicit = src != getattr(defaults, key)
        if src not in found and (key == "text" or explicit):
            raise CorpusError(
                show,
                1,
                f"column {src!r} (columns.{key}) not found; columns found: {', '.join(found) or 'none'}",
                f"rename the column in the file or set [corpus.columns] {key} = \"<your column>\"",
            )

    def column(key: str) -> list:
        src = getattr(cols, key)
        return raw[src].to_list() if src in found else [None] * raw.height

    weight_name = "weight" if cols.weight == "weight" else f"weight (column {cols.weight!r})"
    tasks, ids, texts, weights = column("task_id"), column("criterion_id"), column("text"), column("weight")
    cats, dirs, briefs, ctxs = column("category"), column("direction"), column("brief"), column("context")
    has_weight = cols.weight in found
    records, unweighted = [], []
    for i, row in enumerate(rownums):
        w = weights[i]
        if w is None or (isinstance(w, str) and not w.strip()):
            if has_weight:
                unweighted.append(str(row))
            w = 1.0
        records.append(
            _record(
                task_id="task" if tasks[i] is None else tasks[i],
                criterion_id=row if ids[i] is None else ids[i],
                text=texts[i],
                weight=_weight(w, show, row, weight_name),
                category=cats[i],
                brief=briefs[i],
                context=ctxs[i],
                file=show,
                row=row,
                source=f"{rel}:{row}",
                direction=dirs[i],
            )
        )
    if len({r["task_id"] for r in records}) > 1:
        _prefix_ids(records)
    warnings = []
    if unweighted:
        warnings.append(f"{rel}: {len(unweighted)} rows have no weight; used 1.0 (rows {_list(unweighted)})")
    mapped = set(cols.model_dump().values())
    extras = raw.select([c for c in found if c not in mapped])
    return _Loaded(records, extras, warnings)


# --------------------------------------------------------------------------- PaperBench

_LFS_POINTER = "version https://git-lfs.github.com/spec/"


def _simple_yaml(path: Path) -> dict[str, str]:
    """Top-level `key: value` lines of a flat YAML file (quotes stripped)."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^([A-Za-z_][\w-]*)\s*:\s*(.*?)\s*$", line)
        if not m:
            continue
        key, value = m.groups()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                value = value[1:-1]
        elif len(value) >= 2 and value[0] == value[-1] == "'":
            value = value[1:-1].replace("''", "'")
        out[key] = value
    return out


def _paper_brief(paper_dir: Path, lfs: list[str]) -> str:
    config = paper_dir / "config.yaml"
    title = _simple_yaml(config).get("title", "") if config.is_file() else ""
    addendum = paper_dir / "addendum.md"
    text = addendum.read_text(encoding="utf-8").strip() if addendum.is_file() else ""
    if text.startswith(_LFS_POINTER):  # a Git LFS pointer, not the addendum itself
        lfs.append(paper_dir.name)
        text = ""
    return "\n\n".join(part for part in (title, text) if part)


def _walk_tree(node: Any, pointer: str, ancestors: list[str], weight: float, out: list[tuple], file: str) -> None:
    """Append (pointer, leaf node, effective weight, ancestor texts) for every leaf under `node`."""
    if not isinstance(node, dict):
        raise CorpusError(
            file,
            pointer or "/",
            f"expected a rubric node object, got {type(node).__name__}",
            "each node needs id, requirements, weight and sub_tasks",
        )
    children = node.get("sub_tasks") or []
    if not isinstance(children, list):
        raise CorpusError(
            file,
            pointer or "/",
            "sub_tasks is not a list",
            "make sub_tasks a list of nodes ([] for a leaf)",
        )
    if not children:
        out.append((pointer or "/", node, weight, ancestors))
        return
    sibling_weights = []
    for i, child in enumerate(children):
        where = f"{pointer}/sub_tasks/{i}"
        w = _weight(child.get("weight") if isinstance(child, dict) else None, file, where)
        if w < 0:
            raise CorpusError(
                file,
                where,
                f"negative weight {w:g} in a rubric tree",
                "tree weights are relative shares among siblings; use 0 or a positive number",
            )
        sibling_weights.append(w)
    total = sum(sibling_weights)
    if total <= 0:
        raise CorpusError(
            file,
            pointer or "/",
            "the sub_tasks' weights sum to 0",
            "give at least one sub_task a positive weight",
        )
    path = ancestors + [str(node.get("requirements") or "").strip()]
    for i, (child, w) in enumerate(zip(children, sibling_weights)):
        _walk_tree(child, f"{pointer}/sub_tasks/{i}", path, weight * w / total, out, file)


def _load_paperbench(path: Path, cfg: CorpusConfig) -> _Loaded:
    papers_dir = path / "papers"
    if not papers_dir.is_dir():
        raise CorpusError(
            _show(path),
            "-",
            "no papers/ folder here",
            "point path at the PaperBench data folder that holds papers/<paper>/rubric.json",
        )
    available = sorted(p.name for p in papers_dir.iterdir() if p.is_dir() and _existing(p / "rubric.json"))
    chosen = available if cfg.papers is None else cfg.papers
    unknown = [p for p in chosen if p not in available]
    if unknown:
        raise CorpusError(
            _show(papers_dir),
            "-",
            f"unknown paper(s) {', '.join(unknown)}",
            f"choose papers among: {', '.join(available)}",
        )
    records, extras, lfs, dup_ids = [], [], [], []
    for paper in chosen:
        paper_dir = papers_dir / paper
        rubric_path = _existing(paper_dir / "rubric.json")
        file, rel = _show(rubric_path), f"papers/{paper}/rubric.json"  # source names the logical file (.gz or not)
        brief = _paper_brief(paper_dir, lfs)
        leaves: list[tuple] = []
        _walk_tree(read_json(rubric_path), "", [], 1.0, leaves, file)
        seen: dict[str, int] = defaultdict(int)
        for pointer, node, weight, ancestors in leaves:
            node_id = str(node.get("id") or pointer)
            seen[node_id] += 1
            criterion_id = f"{paper}/{node_id}" + (f"#{seen[node_id]}" if seen[node_id] > 1 else "")
            if seen[node_id] > 1:
                dup_ids.append(f"{rel}#{pointer}")
            text = node.get("requirements")
            context = " > ".join(ancestors)
            category = node.get("task_category")
            records.append(_record(paper, criterion_id, text, weight, category, brief, context, file, pointer, f"{rel}#{pointer}"))
            finegrained = _str_or_none(node.get("finegrained_task_category"))
            extras.append({"finegrained_category": finegrained, "node_id": node_id})
    warnings = []
    if lfs:
        warnings.append(
            f"{len(lfs)} addendum.md files are Git LFS pointers, not text; their briefs use the paper title only"
            f" ({_list(lfs)})"
        )
    if dup_ids:
        warnings.append(
            f"{len(dup_ids)} leaves reuse a node id already used in their paper; their criterion_id gets a"
            f" '#<n>' suffix ({_list(dup_ids)})"
        )
    extra_frame = pl.DataFrame(extras, schema={"finegrained_category": pl.Utf8, "node_id": pl.Utf8})
    return _Loaded(records, extra_frame, warnings)


# --------------------------------------------------------------------------- DevAI

# Known upstream typos in DevAI categories (38_Object_Tracking has "Performence Metrics").
_DEVAI_CATEGORY_FIXES = {"Performence Metrics": "Performance Metrics"}


def _load_devai(path: Path, cfg: CorpusConfig) -> _Loaded:
    candidates = [path / "instances", path / "devai" / "instances", path]
    folder = next((c for c in candidates if c.is_dir() and any(c.glob("*.json*"))), None)
    if folder is None:
        raise CorpusError(
            _show(path),
            "-",
            "no instances/ or devai/instances/ folder with JSON files here",
            "point path at the DevAI benchmark folder (it holds devai/instances/*.json)",
        )
    records, extras, fixed = [], [], []
    for name, f in _json_files(folder):
        stem, show, rel = name.removesuffix(".json"), _show(f), (f.parent / name).relative_to(path).as_posix()
        inst = read_json(f)
        reqs = inst.get("requirements") if isinstance(inst, dict) else None
        if not isinstance(reqs, list):
            raise CorpusError(
                show,
                "/requirements",
                "no requirements list",
                "a DevAI instance needs \"requirements\": [{\"requirement_id\", \"criteria\", \"category\"}, ...]",
            )
        brief = str(inst.get("query") or "")
        for i, req in enumerate(reqs):
            where = f"/requirements/{i}"
            if not isinstance(req, dict):
                raise CorpusError(
                    show,
                    where,
                    f"expected a requirement object, got {type(req).__name__}",
                    "make each requirement an object with requirement_id and criteria",
                )
            rid = req.get("requirement_id", i)
            if isinstance(rid, bool) or not isinstance(rid, int):
                raise CorpusError(
                    show,
                    where,
                    f"requirement_id {rid!r} is not an integer",
                    "number requirements 0, 1, 2, ...",
                )
            category = req.get("category")
            if category in _DEVAI_CATEGORY_FIXES:
                fixed.append(f"{rel}#{where}")
                category = _DEVAI_CATEGORY_FIXES[category]
            text = req.get("criteria")
            records.append(_record(stem, f"{stem}/{rid}", text, 1.0, category, brief, "", show, where, f"{rel}#{where}"))
            prereq = req.get("prerequisites") or []
            prereq = [p for p in prereq if isinstance(p, int) and not isinstance(p, bool)]
            extras.append({"requirement_id": rid, "prerequisites": prereq})
    extra_frame = pl.DataFrame(extras, schema={"requirement_id": pl.Int64, "prerequisites": pl.List(pl.Int64)})
    warnings = []
    if fixed:
        spelled = ", ".join(f"{k!r} -> {v!r}" for k, v in _DEVAI_CATEGORY_FIXES.items())
        warnings.append(f"corrected {len(fixed)} misspelled DevAI categories ({spelled}): {_list(fixed)}")
    return _Loaded(records, extra_frame, warnings)


# --------------------------------------------------------------------------- rubric lists


def _rubric_items(
    items: Any,
    task: str,
    brief: str,
    file: str,
    whole: str,
    at: Callable[[int], tuple[str, str]],
    records: list,
    extras: list,
) -> None:
    """Append the records of one rubric list ([{"criteria"|"criterion", "weight", ...}]).

    `whole` is the list's row label for messages; `at(i)` gives item i's (row label, source).
    """
    if not isinstance(items, list):
        raise CorpusError(
            file,
            whole,
            f"expected a list of rubric items, got {type(items).__name__}",
            "give a JSON list like [{\"criteria\": \"...\", \"weight\": 1}]",
        )
    for i, item in enumerate(items):
        row, source = at(i)
        if not isinstance(item, dict):
            raise CorpusError(
                file,
                row,
                f"expected a rubric item object, got {type(item).__name__}",
                "make each item {\"criteria\": \"...\", \"weight\": 1}",
            )
        key = "criteria" if "criteria" in item else "criterion" if "criterion" in item else None
        if key is None:
            raise CorpusError(
                file,
                row,
                f"no 'criteria' or 'criterion' key (keys found: {', '.join(item) or 'none'})",
                "put the criterion text under \"criteria\"",
            )
        weight = 1.0 if item.get("weight") is None else _weight(item["weight"], file, row)
        cid = item.get("criterion_id", item.get("id", i + 1))
        category, direction = item.get("category"), item.get("direction")
        records.append(_record(task, cid, item[key], weight, category, brief, "", file, row, source, direction))
        skip = {key, "weight", "category", "direction", "criterion_id", "id"}
        extras.append({k: v for k, v in item.items() if k not in skip})


def _json_files(folder: Path) -> list[tuple[str, Path]]:
    """(name without .gz, path) of the *.json / *.json.gz files in a folder, sorted."""
    files = {f.name.removesuffix(".gz"): f for f in folder.iterdir() if f.name.endswith((".json", ".json.gz"))}
    return sorted(files.items())


def _load_rubric_list(path: Path, cfg: CorpusConfig) -> _Loaded:
    if path.is_dir():
        root, files = path, _json_files(path)
        if not files:
            raise CorpusError(
                _show(path),
                "-",
                "no .json files in this folder",
                "put one rubric list per task in <task>.json, or point path at one such file",
            )
    else:
        found = _existing(path) or path
        root, files = found.parent, [(found.name.removesuffix(".gz"), found)]
    records, extras = [], []
    for name, f in files:
        rel = (f.parent / name).relative_to(root).as_posix()
        at = lambda i, rel=rel: (f"/{i}", f"{rel}#/{i}")  # noqa: E731
        _rubric_items(read_json(f), name.removesuffix(".json"), "", _show(f), "/", at, records, extras)
    if path.is_dir():
        _prefix_ids(records)
    return _Loaded(records, _extras_frame(extras))


def _load_tasks_jsonl(path: Path, cfg: CorpusConfig) -> _Loaded:
    found = _existing(path / "tasks.jsonl" if path.is_dir() else path)
    if found is None:
        raise CorpusError(
            _show(path),
            "-",
            "no tasks.jsonl here",
            "point path at a tasks.jsonl file or the folder holding it",
        )
    show, rel = _show(found), found.name
    records, extras = [], []
    for lineno, task in _read_jsonl(found):
        missing = [k for k in ("task_id", "aggregated_rubric_json") if k not in task]
        if missing:
            raise CorpusError(
                show,
                lineno,
                f"missing key(s) {', '.join(missing)} (keys found: {', '.join(task) or 'none'})",
                "give every line task_id, final_prompt and aggregated_rubric_json",
            )
        rubric = task["aggregated_rubric_json"]
        if isinstance(rubric, str):
            try:
                rubric = json.loads(rubric)
            except json.JSONDecodeError as exc:
                raise CorpusError(
                    show,
                    lineno,
                    f"aggregated_rubric_json is not valid JSON ({exc.msg} at char {exc.pos})",
                    "store the rubric as a JSON list, or a string holding one",
                ) from None
        at = lambda i, n=lineno: (f"{n} (aggregated_rubric_json item {i})", f"{rel}:{n}#/{i}")  # noqa: E731
        task_id, brief = str(task["task_id"]), str(task.get("final_prompt") or "")
        _rubric_items(rubric, task_id, brief, show, f"{lineno} (aggregated_rubric_json)", at, records, extras)
    _prefix_ids(records)
    return _Loaded(records, _extras_frame(extras))


LOADERS: dict[str, Callable[[Path, CorpusConfig], _Loaded]] = {
    "table": _load_table,
    "paperbench": _load_paperbench,
    "devai": _load_devai,
    "rubric_list": _load_rubric_list,
    "tasks_jsonl": _load_tasks_jsonl,
}


# --------------------------------------------------------------------------- checks


def _finalize(loaded: _Loaded, cfg: CorpusConfig) -> Corpus:
    warnings = list(loaded.warnings)
    frame = pl.DataFrame(loaded.records, schema={**LEADING_COLUMNS, **_WHERE})
    extras = loaded.extras if loaded.extras is not None and loaded.extras.width else None
    if extras is not None:
        clash = [c for c in extras.columns if c in frame.columns]
        if clash:
            extras = extras.rename({c: f"raw_{c}" for c in clash})
            kept = ", ".join("raw_" + c for c in clash)
            warnings.append(f"extra column(s) {', '.join(clash)} clash with standard columns; kept as {kept}")
        frame = pl.concat([frame, extras], how="horizontal")

    def where(i: int) -> tuple[str, str]:
        return frame["_file"][i], frame["_row"][i]

    empty = frame["text"].is_null() | (frame["text"].str.strip_chars() == "")
    if empty.any():
        idx = empty.arg_true().to_list()
        if cfg.on_empty == "error":
            raise CorpusError(
                *where(idx[0]),
                "criterion text is empty",
                'write the criterion text, or set on_empty = "skip" in [corpus] to drop such rows',
            )
        rows = _list([frame["source"][i] for i in idx])
        warnings.append(f'dropped {len(idx)} criteria with empty text (on_empty = "skip"): {rows}')
        frame = frame.filter(~empty)

    first: dict[str, int] = {}
    for i, cid in enumerate(frame["criterion_id"].to_list()):
        if cid in first:
            f0, r0 = where(first[cid])
            raise CorpusError(
                *where(i),
                f"criterion_id {cid!r} repeats row {r0}" + (f" of {f0}" if f0 != where(i)[0] else ""),
                "give every criterion a unique id (or drop the criterion_id column to number rows)",
            )
        first[cid] = i

    dup = frame.with_row_index("_i").filter(pl.col("_i") > pl.col("_i").min().over("task_id", "text"))
    if dup.height:
        rows = _list(dup["source"].to_list())
        warnings.append(f"{dup.height} criteria repeat an earlier criterion's text in the same task (kept): {rows}")

    if cfg.limit is not None:
        frame = frame.head(cfg.limit)
    return Corpus(frame.drop(list(_WHERE)), warnings)


def load_corpus(cfg: CorpusConfig, base_dir: Path) -> Corpus:
    """Load the corpus `cfg` describes; relative paths resolve against `base_dir`."""
    path = Path(cfg.path).expanduser()
    path = path if path.is_absolute() else Path(base_dir) / path
    if not path.exists() and _existing(path) is None:
        raise CorpusError(
            _show(path),
            "-",
            "corpus path not found",
            f"make [corpus] path relative to {Path(base_dir).resolve()} (the pipeline file's folder) or absolute",
        )
    return _finalize(LOADERS[cfg.format](path, cfg), cfg)
