"""What a lint finding is, the rule vocabulary and the severity order."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

SEVERITIES = ("info", "warning", "error")  # in rising order
SOURCES = ("offline", "llm", "offline+llm")

# Every rule id, with the one-line description `--select` errors and the LLM prompt show.
RULES: dict[str, str] = {
    "sign-mismatch": "the sign contradicts the wording (a failure rewarded, a plainly desirable behaviour penalised)",
    "contradiction": "two criteria of a task reward (or penalise) a statement and its negation, or one statement with opposite signs",
    "duplicate": "the same check twice in a task, so its weight counts twice",
    "compound": "one criterion bundles independent checks that a response can half-meet",
    "vague": "nothing a grader can check: no object, number, quoted term or named item",
    "weight-outlier": "a weight far from the weights of similar criteria",
    "uncovered-brief": "a requirement the brief states that no criterion of the task checks",
    "ungrounded": "a criterion names items found neither in the brief nor in the task's other criteria",
    "hygiene": "overlong text, white-space or encoding junk",
}


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
    location: dict = field(default_factory=lambda: {"file": None, "line": None})

    def as_dict(self) -> dict:
        return asdict(self)

    def key(self) -> tuple:
        """Two findings with this key are one (the LLM and the offline rules finding the same defect)."""
        return self.rule, tuple(sorted(self.criterion_ids))


def clip(text: str, limit: int = 160) -> str:
    """A criterion quoted in a message: whole when short, else its start with an ellipsis."""
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
