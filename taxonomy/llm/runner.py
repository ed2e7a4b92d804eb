"""The one LLM runner every stage goes through.

It owns, once: the cache (a re-run pays nothing), concurrency, request- and token-per-minute
limits, retries with exponential backoff and jitter (honouring Retry-After), parsing against
the schema, validation and the bounded re-ask (jobs.Conversation), explicit context caches for a
stage's shared prompt prefix (context_cache.py), and per-stage usage and cost.

Batch mode (batch.py) builds on this module's public methods; batch.py never imports it back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence, TypeVar

from aiolimiter import AsyncLimiter
from pydantic import BaseModel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from tenacity import AsyncRetrying, retry_if_exception_type, wait_exponential_jitter

from taxonomy.config import LLMConfig
from taxonomy.llm.base import Completion, Provider, TransientError, Turn, json_schema, plain, timed_out
from taxonomy.llm.batch import run_batch
from taxonomy.llm.cache import Cache, request_key
from taxonomy.llm.context_cache import ContextCaches
from taxonomy.llm.jobs import Answer, Conversation, Job, Usage
from taxonomy.secrets import redact

__all__ = ["Answer", "Conversation", "Job", "Runner", "Usage"]

log = logging.getLogger("taxonomy.llm")
T = TypeVar("T", bound=BaseModel)


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
    # kind: "generate", "batch", or for explicit context caches "cache" (tokens written into one) and
    # "cache_storage" (its prompt_tokens are token-seconds kept).
    on_paid: Callable[..., None] | None = None
    _keys: dict = field(default_factory=dict, repr=False)  # id(job) -> (job, key of its first request), for one run
    # Retry warnings already printed in this run: 32 concurrent calls meeting one outage say it once.
    _warned: set = field(default_factory=set, repr=False)

    def run(self, stage: str, jobs: Sequence[Job[T]], description: str = "") -> list[Answer[T]]:
        """Answer every job; results keep the jobs' order."""
        usage = self.usage.setdefault(stage, Usage())
        started = time.perf_counter()
        try:
            if self.cfg.mode == "batch":
                return run_batch(self, stage, list(jobs), description or stage, usage)
            caches = ContextCaches(self, stage, usage)
            try:
                self._quiet_from = time.monotonic()  # a cache the server never answers counts towards its silence
                if caches.supported():  # only the calls still to be paid count towards a cache paying off
                    caches.open(
                        [
                            job
                            for job in jobs
                            if job.prefix and self.cache.get(self.request_key([Turn("user", job.prompt)], job)) is None
                        ]
                    )
                answers = asyncio.run(self._run_all(stage, list(jobs), description or stage, usage, caches))
                caches.report()  # a cache that could not be made, said only when the calls went through without it
                return answers
            finally:
                caches.close()
        finally:
            self._keys.clear()  # the memo is for one run() call, batch mode's included
            self._warned.clear()
            usage.seconds += time.perf_counter() - started

    def complete_online(self, stage: str, asks: Sequence[tuple[list[Turn], Job]], usage: Usage) -> list[Completion]:
        """One online completion per (turns, job), cached and accounted: batch mode's follow-ups."""

        async def all_of() -> list[Completion]:
            self._open_limits()
            return await _all_or_none(self._complete(stage, turns, job, usage) for turns, job in asks)

        return asyncio.run(all_of())

    def paid(self, stage: str, completion: Completion, usage: Usage, kind: str = "generate") -> None:
        """One paid answer: into the run's ledger first (a kill after this line never loses it), then the counts."""
        if self.on_paid is not None:
            self.on_paid(stage, completion, kind=kind)
        usage.calls += 1
        usage.prompt_tokens += completion.prompt_tokens
        usage.output_tokens += completion.output_tokens
        usage.cached_prompt_tokens += completion.cached_tokens
        if kind == "batch":
            usage.batch_calls += 1
            usage.batch_prompt_tokens += completion.prompt_tokens
            usage.batch_output_tokens += completion.output_tokens
            usage.batch_cached_prompt_tokens += completion.cached_tokens

    def _open_limits(self) -> None:
        # The last answer of any call (or the stage's start): how long the server has been silent.
        self._answered_at, self._quiet_from = getattr(self, "_quiet_from", None) or time.monotonic(), None
        # Limiters are bound to the running loop, so they are made per run.
        self._slots = asyncio.Semaphore(self.cfg.concurrency)
        self._requests = AsyncLimiter(self.cfg.requests_per_minute, self.rate_period_s)
        self._tokens = AsyncLimiter(self.cfg.tokens_per_minute, self.rate_period_s)

    async def _run_all(
        self, stage: str, jobs: list[Job[T]], description: str, usage: Usage, caches: ContextCaches
    ) -> list[Answer[T]]:
        self._open_limits()
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, disable=not self.show_progress, transient=False) as progress:
            bar = progress.add_task(description, total=len(jobs))

            async def one(job: Job[T]) -> Answer[T]:
                answer = await self._ask(stage, job, usage, caches)
                progress.advance(bar)
                return answer

            return await _all_or_none(one(job) for job in jobs)

    async def _ask(self, stage: str, job: Job[T], usage: Usage, caches: ContextCaches | None = None) -> Answer[T]:
        talk = Conversation(job)
        while talk.answer is None:
            completion = await self._complete(stage, talk.turns, job, usage, caches)
            if talk.take(completion.text, self.cfg.reask_attempts):
                usage.reasks += 1
        return talk.answer

    def request_key(self, turns: list[Turn], job: Job) -> str:
        """The cache key of one request: online and batch answers are the same entries, with or
        without a context cache (the prompt is the same text either way). A job's first request is
        keyed once per run (the context cache's check and the call both need it)."""
        if len(turns) == 1 and turns[0].text is job.prompt:
            memo = self._keys.get(id(job))
            if memo is not None and memo[0] is job:
                return memo[1]
            key = self._key(turns, job)
            self._keys[id(job)] = (job, key)
            return key
        return self._key(turns, job)

    def _key(self, turns: list[Turn], job: Job) -> str:
        return request_key(
            {
                **self.provider.identity(),
                "system": job.system,
                "turns": [[t.role, t.text] for t in turns],
                "schema": json_schema(job.schema),
                "temperature": self.cfg.temperature,
            }
        )

    async def _complete(
        self, stage: str, turns: list[Turn], job: Job[T], usage: Usage, caches: ContextCaches | None = None
    ) -> Completion:
        key = self.request_key(turns, job)
        cached = self.cache.get(key)
        if cached is not None:
            usage.cache_hits += 1
            return Completion(cached[0], 0, 0)
        context = caches.name_for(job) if caches is not None else None
        completion = await self._call_with_retries(turns, job, usage, context)
        self.paid(stage, completion, usage)
        self.cache.put(key, stage, completion.text, completion.prompt_tokens, completion.output_tokens)
        return completion

    async def _call_with_retries(
        self, turns: list[Turn], job: Job[T], usage: Usage, context: tuple[str, str] | None
    ) -> Completion:
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(TransientError),
            stop=_stop(self.cfg),
            wait=_wait_honouring_retry_after(self.cfg),
            before_sleep=lambda state: _note_retry(state, usage, self._warned, self.silence_limit()),
            reraise=True,
        )
        try:
            return await self._attempts(retrying, turns, job, context)
        except TransientError as exc:
            tries = retrying.statistics.get("attempt_number", 1)
            said = (
                f"{exc}" if exc.silent else f"{exc} (gave up after {tries - 1} {'retry' if tries == 2 else 'retries'})"
            )
            fix = (
                "check that the server answers at all (the network, llm.base_url or the provider's base URL variable), "
                "or raise llm.timeout_s if it is only slow"
                if exc.timed_out
                else "check the network, quota or llm.base_url"
            )
            raise TransientError(
                f"{said}; fix: {fix}, then run the same command again: answers already received are cached",
                timed_out=exc.timed_out,
            ) from None

    def silence_limit(self) -> float:
        return (self.cfg.timeout_retries + 1) * self.cfg.timeout_s

    def _silent(self, exc: TransientError) -> TransientError:
        """A timeout; marked final once no call has been answered for (1 + llm.timeout_retries) x llm.timeout_s:
        with many calls queued behind the concurrency limit, each one's own retries would take far longer."""
        waited = time.monotonic() - self._answered_at
        if waited >= self.silence_limit():
            exc = TransientError(f"{exc}; no call was answered for {waited:.0f} s", timed_out=True)
            exc.silent = True
        return exc

    async def _attempts(
        self, retrying: AsyncRetrying, turns: list[Turn], job: Job[T], context: tuple[str, str] | None
    ) -> Completion:
        estimate = min(sum(len(t.text) for t in turns) // 4 + 1, self.cfg.tokens_per_minute)
        kwargs = {"context_cache": context} if context is not None else {}
        async for attempt in retrying:
            with attempt:
                async with self._slots:
                    await self._requests.acquire()
                    await self._tokens.acquire(estimate)
                    try:
                        completion = await asyncio.wait_for(
                            self.provider.complete(
                                turns, system=job.system, schema=job.schema, temperature=self.cfg.temperature, **kwargs
                            ),
                            timeout=self.cfg.timeout_s,
                        )
                    except asyncio.TimeoutError:
                        raise self._silent(timed_out(self.provider.name, self.cfg.timeout_s)) from None
                    except TransientError as exc:
                        raise self._silent(exc) if exc.timed_out else exc from None
                    self._answered_at = time.monotonic()
                    return completion
        raise AssertionError("unreachable: tenacity reraises the last error")


async def _all_or_none(coros) -> list:
    """Every result in order, or the first failure alone: the calls still in flight are cancelled and
    awaited quietly (their errors repeat the first), so nothing is left to fail during the loop's shutdown."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _stop(cfg: LLMConfig):
    """llm.max_retries retries; a call the server never answers only llm.timeout_retries times; none once
    the server has answered no call for (1 + timeout_retries) x llm.timeout_s (Runner._silent)."""

    def stop(state) -> bool:
        exc = state.outcome.exception() if state.outcome else None
        if getattr(exc, "silent", False):
            return True
        limit = cfg.timeout_retries if getattr(exc, "timed_out", False) else cfg.max_retries
        return state.attempt_number >= min(limit, cfg.max_retries) + 1

    return stop


def _wait_honouring_retry_after(cfg: LLMConfig):
    backoff = wait_exponential_jitter(initial=cfg.backoff_initial_s, max=cfg.backoff_max_s)

    def wait(state) -> float:
        exc = state.outcome.exception() if state.outcome else None
        hinted = getattr(exc, "retry_after", None)
        return min(float(hinted), cfg.backoff_max_s) if hinted is not None else backoff(state)

    return wait


def _note_retry(state, usage: Usage, warned: set, silence_limit: float) -> None:
    usage.retries += 1
    exc = state.outcome.exception() if state.outcome else None
    message = redact(plain(str(exc)))
    if message in warned:
        return
    warned.add(message)
    if getattr(exc, "timed_out", False):
        log.warning("%s; retrying, and stopping if no call is answered for %g s", message, silence_limit)
    else:
        log.warning("retrying after %s (further retries of this error are counted, not shown)", message)
