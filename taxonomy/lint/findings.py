"""What a lint finding is, and the severity order (the rules are in rules.py)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

SEVERITIES = ("info", "warning", "error")  # in rising order
SOURCES = ("offline", "llm", "offline+llm")


def rank(severity: str) -> int:
    return SEVERITIES.index(severity)


@dataclass
class Finding:
    rule: str
    severity: str
    task_id: str
    criterion_ids: list[str]
    message: str
    evidence: str = ""  # the criterion text (or brief sentence) the finding rests on, verbatim
    fix: str = ""
    source: str = "offline"
    location: dict = field(default_factory=lambda: {"file": None, "line": None, "pointer": None})

    def as_dict(self) -> dict:
        return asdict(self)

    def key(self) -> tuple:
        """Two findings with this key are one (the LLM and the offline rules finding the same defect)."""
        return self.rule, tuple(sorted(self.criterion_ids))


def clip(text: str, limit: int = 160) -> str:
    """A criterion quoted in a message: whole when short, else its start with an ellipsis."""
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def plural(n: int, noun: str, many: str | None = None) -> str:
    """ "1 task", "2 tasks"; `many` for an irregular plural ("criteria")."""
    return f"{n} {noun if n == 1 else many or noun + 's'}"
