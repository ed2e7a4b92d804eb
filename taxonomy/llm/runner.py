"""The one LLM runner every stage goes through.

It owns, once: the cache (a re-run pays nothing), concurrency, request- and token-per-minute
limits, retries with exponential backoff and jitter (honouring Retry-After), parsing against
the schema, validation and the bounded re-ask, and per-stage usage and cost.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Generic, Sequence, TypeVar

from aiolimiter import AsyncLimiter
from pydantic import BaseModel, ValidationError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from taxonomy.config import LLMConfig, Prices
from taxonomy.llm.base import Completion, Provider, TransientError, Turn, json_schema
from taxonomy.llm.cache import Cache, request_key
from taxonomy.prompts import render
from taxonomy.secrets import redact
from taxonomy.validate import Violation

log = logging.getLogger("taxonomy.llm")
T = TypeVar("T", bound=BaseModel)


@dataclass
class Job(Generic[T]):
    prompt: str
    schema: type[T]
    validate: Callable[[T], list[Violation]]
    system: str | None = None


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
        if self.attempts > reask_attempts:
            self.answer = Answer(self.best, self.best_violations if self.best is not None else violations, self.attempts)
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
    prompt_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    # The part of calls and tokens answered by the Batch API, charged at the batch price.
    batch_calls: int = 0
    batch_prompt_tokens: int = 0
    batch_output_tokens: int = 0

    def cost(self, prices: Prices) -> float:
        batch_in, batch_out = prices.batch()
        online = (self.prompt_tokens - self.batch_prompt_tokens) * prices.input + (self.output_tokens - self.batch_output_tokens) * prices.output
        return (online + self.batch_prompt_tokens * batch_in + self.batch_output_tokens * batch_out) / 1e6

    def as_dict(self, prices: Prices) -> dict[str, float | int]:
        return {**self.__dict__, "seconds": round(self.seconds, 3), "cost_usd": round(self.cost(prices), 6)}


@dataclass
class Runner:
    provider: Provider
    cfg: LLMConfig
    cache: Cache
    show_progress: bool = True
    usage: dict[str, Usage] = field(default_factory=dict)
    # The window the per-minute limits apply to; a test shrinks it to see the limiter work.
    rate_period_s: float = 60.0
    # Where batch mode records its jobs (the run directory), so a killed run polls the same job.
    batch_dir: Path | None = None
    # Called with (stage, completion) for every paid call, before its answer is cached: the run's ledger.
    on_paid: Callable[..., None] | None = None  # (stage, completion, kind="generate" or "batch")

    def run(self, stage: str, jobs: Sequence[Job[T]], description: str = "") -> list[Answer[T]]:
        """Answer every job; results keep the jobs' order."""
        usage = self.usage.setdefault(stage, Usage())
        started = time.perf_counter()
        try:
            if self.cfg.mode == "batch":
                from taxonomy.llm.batch import run_batch

                return run_batch(self, stage, list(jobs), description or stage, usage)
            return asyncio.run(self._run_all(stage, list(jobs), description or stage, usage))
        finally:
            usage.seconds += time.perf_counter() - started

    def complete_online(self, stage: str, asks: Sequence[tuple[list[Turn], Job]], usage: Usage) -> list[Completion]:
        """One online completion per (turns, job), cached and accounted: batch mode's follow-ups."""
        async def all_of() -> list[Completion]:
            self._open_limits()
            return list(await asyncio.gather(*(self._complete(stage, turns, job, usage) for turns, job in asks)))

        return asyncio.run(all_of())

    def _open_limits(self) -> None:
        # Limiters are bound to the running loop, so they are made per run.
        self._slots = asyncio.Semaphore(self.cfg.concurrency)
        self._requests = AsyncLimiter(self.cfg.requests_per_minute, self.rate_period_s)
        self._tokens = AsyncLimiter(self.cfg.tokens_per_minute, self.rate_period_s)

    async def _run_all(self, stage: str, jobs: list[Job[T]], description: str, usage: Usage) -> list[Answer[T]]:
        self._open_limits()
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, disable=not self.show_progress, transient=False) as progress:
            bar = progress.add_task(description, total=len(jobs))

            async def one(job: Job[T]) -> Answer[T]:
                answer = await self._ask(stage, job, usage)
                progress.advance(bar)
                return answer

            return list(await asyncio.gather(*(one(job) for job in jobs)))

    async def _ask(self, stage: str, job: Job[T], usage: Usage) -> Answer[T]:
        talk = Conversation(job)
        while talk.answer is None:
            completion = await self._complete(stage, talk.turns, job, usage)
            if talk.take(completion.text, self.cfg.reask_attempts):
                usage.reasks += 1
        return talk.answer

    def request_key(self, turns: list[Turn], job: Job) -> str:
        """The cache key of one request: online and batch answers are the same entries."""
        return request_key({
            **self.provider.identity(),
            "system": job.system,
            "turns": [[t.role, t.text] for t in turns],
            "schema": json_schema(job.schema),
            "temperature": self.cfg.temperature,
        })

    async def _complete(self, stage: str, turns: list[Turn], job: Job[T], usage: Usage) -> Completion:
        key = self.request_key(turns, job)
        cached = self.cache.get(key)
        if cached is not None:
            usage.cache_hits += 1
            return Completion(cached[0], 0, 0)
        completion = await self._call_with_retries(turns, job, usage)
        if self.on_paid is not None:
            self.on_paid(stage, completion)
        self.cache.put(key, stage, completion.text, completion.prompt_tokens, completion.output_tokens)
        usage.calls += 1
        usage.prompt_tokens += completion.prompt_tokens
        usage.output_tokens += completion.output_tokens
        return completion

    async def _call_with_retries(self, turns: list[Turn], job: Job[T], usage: Usage) -> Completion:
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(TransientError),
            stop=stop_after_attempt(self.cfg.max_retries + 1),
            wait=_wait_honouring_retry_after(self.cfg),
            before_sleep=lambda state: _note_retry(state, usage),
            reraise=True,
        )
        try:
            return await self._attempts(retrying, turns, job)
        except TransientError as exc:
            raise TransientError(
                f"{exc} (gave up after {self.cfg.max_retries} retries); fix: check the network, quota or llm.base_url, "
                "then run the same command again: answers already received are cached"
            ) from None

    async def _attempts(self, retrying: AsyncRetrying, turns: list[Turn], job: Job[T]) -> Completion:
        estimate = min(sum(len(t.text) for t in turns) // 4 + 1, self.cfg.tokens_per_minute)
        async for attempt in retrying:
            with attempt:
                async with self._slots:
                    await self._requests.acquire()
                    await self._tokens.acquire(estimate)
                    try:
                        return await asyncio.wait_for(
                            self.provider.complete(turns, system=job.system, schema=job.schema, temperature=self.cfg.temperature),
                            timeout=self.cfg.timeout_s,
                        )
                    except asyncio.TimeoutError:
                        raise TransientError(f"no answer within {self.cfg.timeout_s} s") from None
        raise AssertionError("unreachable: tenacity reraises the last error")


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


def _wait_honouring_retry_after(cfg: LLMConfig):
    backoff = wait_exponential_jitter(initial=cfg.backoff_initial_s, max=cfg.backoff_max_s)

    def wait(state) -> float:
        exc = state.outcome.exception() if state.outcome else None
        hinted = getattr(exc, "retry_after", None)
        return min(float(hinted), cfg.backoff_max_s) if hinted is not None else backoff(state)

    return wait


def _note_retry(state, usage: Usage) -> None:
    usage.retries += 1
    exc = state.outcome.exception() if state.outcome else None
    log.warning("retrying after %s", redact(str(exc)))


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

