"""The "rubric_list" and "tasks_jsonl" formats: flat lists of {"criteria", "weight", ...} items."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from taxonomy.corpus.config import CorpusConfig, CorpusError, data_row, show_path
from taxonomy.corpus.jsonio import existing_file, json_files, read_json, read_jsonl
from taxonomy.corpus.records import Loaded, extras_frame, make_record, parse_weight, prefix_ids


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
            'give a JSON list like [{"criteria": "...", "weight": 1}]',
        )
    for i, item in enumerate(items):
        row, source = at(i)
        if not isinstance(item, dict):
            raise CorpusError(
                file,
                row,
                f"expected a rubric item object, got {type(item).__name__}",
                'make each item {"criteria": "...", "weight": 1}',
            )
        key = "criteria" if "criteria" in item else "criterion" if "criterion" in item else None
        if key is None:
            raise CorpusError(
                file,
                row,
                f"no 'criteria' or 'criterion' key (keys found: {', '.join(item) or 'none'})",
                'put the criterion text under "criteria"',
            )
        weight = 1.0 if item.get("weight") is None else parse_weight(item["weight"], file, row)
        cid = item.get("criterion_id", item.get("id", i + 1))
        category, direction = item.get("category"), item.get("direction")
        records.append(make_record(task, cid, item[key], weight, category, brief, "", file, row, source, direction))
        skip = {key, "weight", "category", "direction", "criterion_id", "id"}
        extras.append({k: v for k, v in item.items() if k not in skip})


def load_rubric_list(path: Path, cfg: CorpusConfig) -> Loaded:
    if path.is_dir():
        root, files = path, json_files(path)
        if not files:
            raise CorpusError(
                show_path(path),
                "-",
                "no .json files in this folder",
                "put one rubric list per task in <task>.json, or point path at one such file",
            )
    else:
        found = existing_file(path) or path
        root, files = found.parent, [(found.name.removesuffix(".gz"), found)]
    records, extras = [], []
    for name, f in files:
        rel = (f.parent / name).relative_to(root).as_posix()
        at = lambda i, rel=rel: (data_row(i + 1), f"{rel}#/{i}")  # noqa: E731
        _rubric_items(read_json(f), name.removesuffix(".json"), "", show_path(f), "/", at, records, extras)
    if path.is_dir():
        prefix_ids(records)
    return Loaded(records, extras_frame(extras))


def load_tasks_jsonl(path: Path, cfg: CorpusConfig) -> Loaded:
    found = existing_file(path / "tasks.jsonl" if path.is_dir() else path)
    if found is None:
        raise CorpusError(
            show_path(path),
            "-",
            "no tasks.jsonl here",
            "point path at a tasks.jsonl file or the folder holding it",
        )
    show, rel = show_path(found), found.name
    records, extras = [], []
    for lineno, task in read_jsonl(found):
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
    prefix_ids(records)
    return Loaded(records, extras_frame(extras))
