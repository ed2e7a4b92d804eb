"""The "healthbench" format: OpenAI HealthBench JSONL, one criterion per rubric item.

Each line is one example: `prompt_id`, `prompt` (the conversation, a list of {role, content}),
`rubrics` ([{criterion, points, tags}]) and `example_tags`. A rubric item becomes a criterion
whose weight is its `points` (negative = penalty); the conversation is the brief (a single
user turn as written; several turns as "role: content" lines, since a criterion may rest on any
of them) and the context. The item's `axis:` and `level:` tags and
the example's `theme:` tags become the extra columns `axis`, `level` and `theme`: they are
gold labels of the benchmark, kept for measuring, and no stage reads them (`category` stays
empty).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from taxonomy.corpus.config import CorpusConfig, CorpusError, require_objects, show_path
from taxonomy.corpus.jsonio import existing_file, read_jsonl
from taxonomy.corpus.records import Loaded, make_record, parse_weight

DEFAULT_FILE = "healthbench_eval.jsonl"
EXTRA_SCHEMA = {"axis": pl.Utf8, "level": pl.Utf8, "theme": pl.Utf8, "example_index": pl.Int64}


def _tag_values(tags: Any, prefix: str) -> list[str]:
    return [t[len(prefix) :] for t in tags or [] if isinstance(t, str) and t.startswith(prefix)]


def _conversation(prompt: Any, show: str, row: int) -> tuple[str, str]:
    """(brief, context): the only turn as written, else every turn as "role: content" lines (both)."""
    what = "prompt is not a list of {role, content} turns"
    require_objects(prompt, show, row, what, 'give "prompt": [{"role": "user", "content": "..."}, ...]')
    turns = [(str(t.get("role") or ""), str(t.get("content") or "")) for t in prompt]
    conversation = "\n\n".join(f"{role}: {content}" for role, content in turns)
    return (turns[0][1] if len(turns) == 1 else conversation), conversation


def _find(path: Path) -> Path:
    found = existing_file(path / DEFAULT_FILE if path.is_dir() else path)
    if found is None and path.is_dir():
        files = sorted(path.glob("*.jsonl")) + sorted(path.glob("*.jsonl.gz"))
        found = files[0] if len(files) == 1 else None
    if found is None:
        raise CorpusError(
            show_path(path),
            "-",
            f"no {DEFAULT_FILE}[.gz] here",
            "point path at a HealthBench JSONL file or the folder holding it",
        )
    return found


def _check_keys(ex: dict, show: str, lineno: int) -> None:
    """A HealthBench line holds prompt_id, prompt and rubrics."""
    missing = [k for k in ("prompt_id", "prompt", "rubrics") if k not in ex]
    if missing:
        raise CorpusError(
            show,
            lineno,
            f"missing key(s) {', '.join(missing)} (keys found: {', '.join(ex) or 'none'})",
            "give every line prompt_id, prompt and rubrics",
        )


def load_healthbench(path: Path, cfg: CorpusConfig) -> Loaded:
    found = _find(path)
    show, rel = show_path(found), found.name.removesuffix(".gz")
    records, extras = [], []
    for lineno, ex in read_jsonl(found):
        _check_keys(ex, show, lineno)
        brief, context = _conversation(ex["prompt"], show, lineno)
        task = str(ex["prompt_id"])
        themes = ",".join(_tag_values(ex.get("example_tags"), "theme:")) or None
        items = ex["rubrics"]
        if not isinstance(items, list):
            raise CorpusError(
                show,
                lineno,
                f"rubrics is a {type(items).__name__}, not a list",
                'give "rubrics": [{"criterion": "...", "points": 5, "tags": [...]}]',
            )
        for i, item in enumerate(items):
            row = f"{lineno} (rubrics item {i})"
            if not isinstance(item, dict) or "criterion" not in item:
                raise CorpusError(
                    show,
                    row,
                    "rubric item has no 'criterion'",
                    'make each item {"criterion": "...", "points": 5, "tags": [...]}',
                )
            points = parse_weight(item.get("points", 1), show, row, name="points")
            if points == 0:
                raise CorpusError(show, row, "points is 0", "give a positive number, or a negative one for a penalty")
            records.append(
                make_record(
                    task,
                    f"{task}/{i}",
                    item["criterion"],
                    points,
                    None,
                    brief,
                    context,
                    show,
                    row,
                    f"{rel}:{lineno}#/rubrics/{i}",
                )
            )
            tags = item.get("tags")
            axis, level = _tag_values(tags, "axis:"), _tag_values(tags, "level:")
            extras.append(
                {
                    "axis": axis[0] if axis else None,
                    "level": level[0] if level else None,
                    "theme": themes,
                    "example_index": lineno,
                }
            )
    return Loaded(records, pl.DataFrame(extras, schema=EXTRA_SCHEMA))
