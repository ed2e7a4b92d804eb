"""What a stage hands the runner (a Job), what it gets back (an Answer), one job's exchange with
the model (a Conversation: parsing, validation, the bounded re-ask, the best answer kept) and the
per-stage accounting (Usage). Online (runner.py) and batch mode (batch.py) both build on these, so
neither imports the other's internals."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from taxonomy.config import Prices
from taxonomy.llm.base import Turn
from taxonomy.prompts import render
from taxonomy.validate import Violation

T = TypeVar("T", bound=BaseModel)


@dataclass
class Job(Generic[T]):
    prompt: str
    schema: type[T]
    validate: Callable[[T], list[Violation]]
    system: str | None = None
    # The start of `prompt` that other jobs of the stage share word for word (the instructions, the
    # taxonomy): sent from an explicit context cache when that pays. The cache key is always the whole prompt.
    prefix: str = ""
    # False: the runner returns the first answer with its violations, and the stage asks a smaller,
    # focused follow-up itself instead of resending the whole conversation.
    reask: bool = True

    def __post_init__(self) -> None:
        if self.prefix and not self.prompt.startswith(self.prefix):
            raise ValueError("a job's prefix must be the start of its prompt")


@dataclass
class Answer(Generic[T]):
    value: T | None  # the last answer that parsed, even if it still has violations
    violations: list[Violation]
    attempts: int

    @property
    def ok(self) -> bool:
        return self.value is not None and not self.violations


@dataclass
class Conversation(Generic[T]):
    """One job's exchange with the model, online or in batch rounds: its turns so far, and the
    parsed answer with the fewest violations, kept with its own violations, so a later
    unparseable answer can neither discard it nor make its failed items look valid."""

    job: Job[T]
    turns: list[Turn] = field(default_factory=list)
    attempts: int = 0
    best: T | None = None
    best_violations: list[Violation] = field(default_factory=list)
    answer: Answer[T] | None = None
    kept: dict[int, object] = field(default_factory=dict)  # per criterion, the first item any attempt answered validly

    def __post_init__(self) -> None:
        self.turns = self.turns or [Turn("user", self.job.prompt)]

    def take(self, text: str, reask_attempts: int) -> bool:
        """Judge one answer; True when it is to be re-asked with its violations."""
        self.attempts += 1
        try:
            value = self.job.schema.model_validate_json(_strip_fence(text))
        except ValidationError as exc:
            violations = [Violation(None, f"the answer does not match the JSON schema: {_first_error(exc)}")]
        else:
            violations = self.job.validate(value)
            merged = _keep_valid_items(self.kept, value, violations)
            if merged is not value:
                value, violations = merged, self.job.validate(merged)
            if self.best is None or len(violations) <= len(self.best_violations):
                self.best, self.best_violations = value, violations
        if not violations:
            self.answer = Answer(self.best, [], self.attempts)
            return False
        # An unparseable answer is always asked again: a focused follow-up needs a parsed one to work from.
        limit = reask_attempts if self.job.reask or self.best is None else 0
        if self.attempts > limit:
            self.answer = Answer(
                self.best, self.best_violations if self.best is not None else violations, self.attempts
            )
            return False
        feedback = render("reask.j2", violations=[str(v) for v in violations[:40]])
        self.turns = self.turns + [Turn("model", text or "(empty)"), Turn("user", feedback)]
        return True


@dataclass
class Usage:
    calls: int = 0  # requests answered by the provider (paid)
    cache_hits: int = 0
    retries: int = 0
    reasks: int = 0
    prompt_tokens: int = 0  # every prompt token, cached ones included (as Gemini counts them)
    output_tokens: int = 0
    # The part of prompt_tokens the provider served from its context cache (implicit or explicit), at the cached price.
    cached_prompt_tokens: int = 0
    seconds: float = 0.0
    # The part of calls and tokens answered by the Batch API, charged at the batch price.
    batch_calls: int = 0
    batch_prompt_tokens: int = 0
    batch_output_tokens: int = 0
    batch_cached_prompt_tokens: int = 0
    # Explicit context caches: tokens written into them (at the input price), and tokens held x
    # seconds held (at llm.prices.cache_storage per hour).
    cache_tokens: int = 0
    cache_token_seconds: int = 0

    def cost(self, prices: Prices) -> float:
        return prices.cost(self.__dict__)

    def as_dict(self, prices: Prices) -> dict[str, float | int]:
        return {**self.__dict__, "seconds": round(self.seconds, 3), "cost_usd": round(self.cost(prices), 6)}


def _keep_valid_items(kept: dict[int, object], value: T, violations: list[Violation]) -> T:
    """Batch answers (`items` with `criterion_idx`): an item valid in any attempt is kept, so a
    re-ask that drops or breaks it never loses it. Returns `value` itself when nothing was added."""
    items = getattr(value, "items", None)
    if not isinstance(items, list) or not all(hasattr(it, "criterion_idx") for it in items):
        return value
    bad = {v.item for v in violations if v.item is not None}
    for it in items:
        if it.criterion_idx not in bad:
            kept.setdefault(it.criterion_idx, it)
    # Items this attempt got wrong (or left out) but an earlier one got right are taken from that one;
    # the rest stay as answered, duplicates included, so validation still sees them.
    merged = list(kept.values()) + [it for it in items if it.criterion_idx not in kept]
    if [id(it) for it in merged] == [id(it) for it in items]:
        return value
    merged.sort(key=lambda it: it.criterion_idx)
    return value.model_copy(update={"items": merged})


def _strip_fence(text: str) -> str:
    """Some OpenAI-compatible servers wrap JSON in a markdown fence despite the schema."""
    text = text.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ())) or "top level"
    return f"{err['msg']} at {where}"
