"""The guidance LLM answer, its validation, the drafts of a run, and the error for bad guidance input."""

from __future__ import annotations

from taxonomy.run import RunError
from taxonomy.schemas import Model
from taxonomy.validate import Violation

MIN_ITEMS, MAX_ITEMS = 1, 8


class GuidanceError(RunError):
    """Bad guidance input (e.g. a missing notes file), on one line with the fix."""


# ---- the LLM answer -------------------------------------------------------------------
class GuidanceAnswer(Model):
    summary: str
    procedure: list[str]
    evidence: list[str]
    pitfalls: list[str]


def validate_guidance(
    answer: GuidanceAnswer, min_items: int = MIN_ITEMS, max_items: int = MAX_ITEMS
) -> list[Violation]:
    """Whole-answer violations (item None): an empty summary, a list outside min..max items, a blank item."""
    out = []
    if not answer.summary.strip():
        out.append(
            Violation(None, "`summary` is empty; write 2-3 sentences on how to judge criteria of this capability")
        )
    for key in ("procedure", "evidence", "pitfalls"):
        items = getattr(answer, key)
        if not min_items <= len(items) <= max_items:
            out.append(Violation(None, f"`{key}` has {len(items)} items; give {min_items}-{max_items}"))
        if any(not str(i).strip() for i in items):
            out.append(Violation(None, f"`{key}` contains an empty item; remove it or write it out"))
    return out


class GuidanceDrafts(dict):
    """capability name → the GuidanceAnswer a model drafted, or None where no model drafted one.

    `source[name]` is "llm" (a model's valid answer), "offline" (no model ran) or "fallback" (the model's
    answer stayed invalid after re-asking: no guidance, never text posing as the model's); `fallbacks[name]`
    lists the last violations of the answer that was given up on.
    """

    def __init__(self) -> None:
        super().__init__()
        self.source: dict[str, str] = {}
        self.fallbacks: dict[str, list[str]] = {}

    def undrafted(self) -> list[str]:
        """The capabilities no model drafted guidance for."""
        return [name for name, draft in self.items() if draft is None]
