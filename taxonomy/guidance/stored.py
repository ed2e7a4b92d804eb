"""The guidance drafts of a run kept as JSON (guidance/drafts.json), so exports reuse the text that
`taxonomy guidance` wrote (LLM-drafted ones included) instead of paying for it again, and never reuse
drafts made from other inputs than the run's current taxonomy, criteria and tags."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import polars as pl

from taxonomy.guidance.files import FOLDER
from taxonomy.guidance.model import GuidanceAnswer, GuidanceDrafts, GuidanceError
from taxonomy.run import RunDir
from taxonomy.schemas import Taxonomy

DRAFTS = f"{FOLDER}/drafts.json"
# Part of the fingerprint: drafts stored before a capability could have no draft held offline text in its
# place, so they are drafted again rather than served.
FORMAT = "2"


def inputs_fingerprint(taxonomy: Taxonomy, criteria: pl.DataFrame, tags: pl.DataFrame) -> str:
    """What a draft depends on: the taxonomy's content, each criterion's text and its tags."""
    h = hashlib.sha256(f"{FORMAT}:{taxonomy.compute_hash()}".encode())
    h.update(criteria.select("criterion_id", "task_id", "text").write_csv().encode())
    h.update(tags.select("criterion_id", pl.col("tags").list.join(";")).write_csv().encode())
    return h.hexdigest()


def notes_fingerprint(notes: str | None) -> str | None:
    return hashlib.sha256(notes.encode()).hexdigest() if notes else None


def save_drafts(run: RunDir, drafts: GuidanceDrafts, fingerprint: str, notes: str | None) -> None:
    run.write_json(
        DRAFTS,
        {
            "inputs": fingerprint,
            "notes": notes_fingerprint(notes),
            "drafts": {
                name: {**(answer.model_dump() if answer is not None else {}), "source": drafts.source.get(name, "")}
                for name, answer in drafts.items()
            },
        },
    )


def load_drafts(
    run: RunDir, fingerprint: str, notes: str | None = None, check_notes: bool = False
) -> GuidanceDrafts | None:
    """The stored drafts, or None when there are none or they were made from other inputs (or other notes,
    when `check_notes`). A damaged file is an error naming the fix."""
    path = run.path / DRAFTS
    if not path.is_file():
        return None
    try:
        stored: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        if stored.get("inputs") != fingerprint or (check_notes and stored.get("notes") != notes_fingerprint(notes)):
            return None
        drafts = GuidanceDrafts()
        for name, item in stored["drafts"].items():
            drafts.source[name] = item.pop("source", "")
            drafts[name] = GuidanceAnswer.model_validate(item) if item else None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise GuidanceError(
            f"{path}: damaged ({str(exc).splitlines()[0]}); fix: delete it and run `taxonomy guidance {run.path}` again"
        ) from None
    return drafts
