"""Helpers shared by the format loaders (weights, directions, records, extras) and the final checks."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from taxonomy.corpus.config import Corpus, CorpusConfig, CorpusError, LEADING_COLUMNS, place
from taxonomy.corpus.rows import check_rows

# Bookkeeping columns carried through loading for error messages, dropped at the end.
_WHERE = {"_file": pl.Utf8, "_row": pl.Utf8}
_MAX_LISTED = 5  # rows named in one warning: enough to find them, short enough to read


def parse_weight(value: Any, file: str, row: Any, name: str = "weight") -> float:
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


def short_list(items: list[str]) -> str:
    """The first few items, comma-separated, with a count of the rest."""
    shown = ", ".join(items[:_MAX_LISTED])
    return shown + (f", ... and {len(items) - _MAX_LISTED} more" if len(items) > _MAX_LISTED else "")


def str_or_none(value: Any) -> str | None:
    if value is None:
        return None
    s = str(value).strip()
    return s or None


def _kind(value: Any) -> str:
    return "an object" if isinstance(value, dict) else "a list"


def scalar(value: Any, name: str, file: str, row: Any) -> Any:
    """`value` when it is one value (text, number, null); a list or an object is bad input, never its Python text."""
    if not isinstance(value, (dict, list, tuple)):
        return value
    fix = (
        "write one criterion per row, its text as a string; split a list of criteria into rows"
        if name == "criterion"
        else f"give {name} one value (text or a number)"
    )
    raise CorpusError(file, row, f"{name} is {_kind(value)} ({clip_json(value)}), not text", fix)


def joined_text(value: Any, name: str, file: str, row: Any) -> str:
    """A free-text field (brief, context): a string, or a list of strings joined one per line as a user reads it."""
    if value is None or isinstance(value, str):
        return value or ""
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    if isinstance(value, (dict, list, tuple)):
        raise CorpusError(
            file,
            row,
            f"{name} is {_kind(value)} ({clip_json(value)}), not text",
            f"make {name} a string or a list of strings",
        )
    return str(value)


def clip_json(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def make_record(
    task_id, criterion_id, text, weight, category, brief, context, file, row, source, direction=None
) -> dict:
    weight, direction = _direction(weight, direction, file, row)
    text = scalar(text, "criterion", file, row)
    return {
        "task_id": str(scalar(task_id, "task_id", file, row)),
        "criterion_id": str(scalar(criterion_id, "criterion_id", file, row)),
        "text": text if isinstance(text, str) or text is None else str(text),
        "weight": weight,
        "category": str_or_none(scalar(category, "category", file, row)),
        "direction": direction,
        "brief": joined_text(brief, "brief", file, row),
        "context": joined_text(context, "context", file, row),
        "source": source,
        "_file": file,
        "_row": place(row),
    }


def extras_frame(rows: list[dict]) -> pl.DataFrame:
    """Free extra columns from per-row dicts. A column mixing text or numbers with lists or objects keeps its Python
    values (polars would turn {"a": 1} into "{1}"), so a loader can tell a list of strings from a string; finalize
    writes any such column left among the extra columns as JSON text."""
    names = list(dict.fromkeys(k for r in rows for k in r))
    if not names:
        return pl.DataFrame()
    return pl.DataFrame([_column(k, [r.get(k) for r in rows]) for k in names])


def _column(name: str, values: list) -> pl.Series:
    nested = {isinstance(v, (list, dict)) for v in values if v is not None}
    if len(nested) < 2:
        try:
            return pl.Series(name, values, strict=False)
        except Exception:  # noqa: BLE001 - polars raises various types on mixed nested values
            pass
    return pl.Series(name, values, dtype=pl.Object)


def _objects_as_json(frame: pl.DataFrame) -> pl.DataFrame:
    def as_text(v: Any) -> str | None:
        return v if v is None or isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)

    objects = [c for c, t in frame.schema.items() if t == pl.Object]
    return frame.with_columns(pl.Series(c, [as_text(v) for v in frame[c].to_list()], dtype=pl.Utf8) for c in objects)


@dataclass
class Loaded:
    """What a format loader returns: leading-column records, optional extra columns, warnings."""

    records: list[dict]
    extras: pl.DataFrame | None = None
    warnings: list[str] = field(default_factory=list)


def prefix_ids(records: list[dict]) -> None:
    """Make ids "<task>/<id>" (unless already so)."""
    for r in records:
        if not r["criterion_id"].startswith(r["task_id"] + "/"):
            r["criterion_id"] = f"{r['task_id']}/{r['criterion_id']}"


def _with_extras(frame: pl.DataFrame, extras: pl.DataFrame | None, warnings: list[str]) -> pl.DataFrame:
    """The loader's extra columns beside the standard ones, renamed raw_<name> where a name clashes (with a
    warning)."""
    if extras is None or not extras.width:
        return frame
    extras = _objects_as_json(extras)
    clash = [c for c in extras.columns if c in frame.columns]
    if clash:
        extras = extras.rename({c: f"raw_{c}" for c in clash})
        kept = ", ".join("raw_" + c for c in clash)
        warnings.append(f"extra column(s) {', '.join(clash)} clash with standard columns; kept as {kept}")
    return pl.concat([frame, extras], how="horizontal")


def finalize(loaded: Loaded, cfg: CorpusConfig, lint: str = "taxonomy lint") -> Corpus:
    warnings = list(loaded.warnings)
    frame = _with_extras(pl.DataFrame(loaded.records, schema={**LEADING_COLUMNS, **_WHERE}), loaded.extras, warnings)

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
        rows = short_list([frame["source"][i] for i in idx])
        warnings.append(f'dropped {len(idx)} criteria with empty text (on_empty = "skip"): {rows}')
        frame = frame.filter(~empty)

    long = frame["text"].str.len_chars() > cfg.max_chars
    if long.any():
        idx = long.arg_true().to_list()
        if cfg.on_long == "error":
            raise CorpusError(
                *where(idx[0]),
                f"criterion text is {frame['text'][idx[0]].__len__():,} "
                f"characters, above corpus.max_chars = {cfg.max_chars:,}",
                'shorten it, raise max_chars in [corpus], or set on_long = "truncate" to cut such criteria',
            )
        frame = frame.with_columns(text=pl.col("text").str.slice(0, cfg.max_chars))
        warnings.append(
            f"truncated {len(idx)} criteria to corpus.max_chars = {cfg.max_chars:,} "
            f"characters: {short_list([frame['source'][i] for i in idx])}"
        )

    first: dict[str, int] = {}
    for i, cid in enumerate(frame["criterion_id"].to_list()):
        if cid in first:
            f0, r0 = where(first[cid])
            raise CorpusError(
                *where(i),
                f"criterion_id {cid!r} repeats {r0 or 'an earlier one'}" + (f" of {f0}" if f0 != where(i)[0] else ""),
                "give every criterion a unique id (or drop the criterion_id column to number rows)",
            )
        first[cid] = i

    frame, found = check_rows(frame, cfg, lint)
    warnings += found

    if cfg.limit is not None:
        frame = frame.head(cfg.limit)
    return Corpus(frame.drop(list(_WHERE)), warnings)
