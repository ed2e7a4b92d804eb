"""Explicit context caches for a stage's shared prompt prefix.

Every Stage 1 and Stage 3 call starts with the same instructions (and Stage 3 with the whole
taxonomy); Gemini's implicit caching often serves such a prefix at the cached price, but only when
it happens to hit. An explicit cache (`client.caches`) makes the hit certain, at the price of
writing the prefix once and storing it while the stage runs. One is made only where that pays:
the prefix reaches `llm.context_cache.min_tokens` (Gemini refuses smaller caches) and the stage's
calls that still have to be paid save more at the cached price than writing the prefix once and
storing it for the cache's whole TTL would cost. The stage deletes its caches when it ends; a killed
run leaves them to expire after the TTL. The answer cache's key is the whole prompt whether or not a
context cache carried part of it, so a resumed run never pays a call twice.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from typing import Any

from taxonomy.llm.base import Completion, plain
from taxonomy.secrets import redact

log = logging.getLogger("taxonomy.llm")
CHARS_PER_TOKEN = 4


def tokens(text_or_chars: str | float) -> int:
    """Tokens of a text (or a number of characters), rounded up: the one count the run's caching
    decision and the estimate's share, so they agree at the `min_tokens` edge."""
    chars = len(text_or_chars) if isinstance(text_or_chars, str) else text_or_chars
    return int(math.ceil(chars / CHARS_PER_TOKEN))


def pays(prefix_tokens: int, calls: int, prices: Any, ttl_s: float, min_tokens: int) -> bool:
    """What `calls` reads of the prefix save at the cached price, against writing it once (at the
    input price) and storing it for the whole TTL."""
    if prefix_tokens < min_tokens or calls < 2:
        return False
    saved = calls * prefix_tokens * (prices.input - prices.cached())
    spent = prefix_tokens * prices.input + prefix_tokens * prices.cache_storage * ttl_s / 3600
    return saved > spent


class ContextCaches:
    """The explicit caches of one stage run: opened before its calls, closed (deleted, storage accounted) after."""

    def __init__(self, runner: Any, stage: str, usage: Any):
        self.runner, self.stage, self.usage = runner, stage, usage
        self.cfg = runner.cfg.context_cache
        self.by_prefix: dict[str, tuple[str, int, float]] = {}  # prefix -> (name, tokens, created at)
        self.failed: str | None = None  # why a cache could not be made, said by report() if the calls go through

    def supported(self) -> bool:
        return (
            self.cfg.enabled
            and self.runner.cfg.mode == "online"
            and hasattr(self.runner.provider, "create_context_cache")
        )

    def open(self, jobs: list) -> None:
        """A cache for each prefix the unanswered jobs share, where it pays."""
        if not self.supported():
            return
        counts = Counter(job.prefix for job in jobs if job.prefix)
        prices = self.runner.cfg.prices
        for prefix, calls in counts.items():
            if not pays(tokens(prefix), calls, prices, self.cfg.ttl_s, self.cfg.min_tokens):
                continue
            try:
                name, written = self.runner.provider.create_context_cache(
                    prefix, self.cfg.ttl_s, f"taxonomy-{self.stage}"
                )
            except Exception as exc:  # noqa: BLE001 - a cache is an optimisation: without it the calls send the prefix
                # Not said yet: a server that refused the cache (a bad key, no connection, no answer) refuses the calls
                # too, and the run's error says it once. Nor tried again: each attempt could wait llm.timeout_s.
                self.failed = redact(plain(str(exc)).split("; fix:")[0])
                if getattr(exc, "timed_out", False):  # the calls are about to wait as long: say what is happening now
                    log.warning(
                        "%s to a request for a context cache; sending the calls without one, and stopping if no call "
                        "is answered for %g s",
                        self.failed,
                        self.runner.silence_limit(),
                    )
                    self.failed = None
                return
            # Writing the prefix is billed as input once; the answers that read it are billed at the cached price.
            # Storage goes into the ledger for the whole TTL at once, so a run killed now still accounts for
            # the cache it leaves to expire; close() credits back the time it was not kept.
            self._ledger(Completion("", written), "cache")
            self._ledger(Completion("", written * self.cfg.ttl_s), "cache_storage")
            self.usage.cache_tokens += written
            self.usage.cache_token_seconds += written * self.cfg.ttl_s
            self.by_prefix[prefix] = (name, written, time.monotonic())

    def report(self) -> None:
        """After the stage's calls went through: the cache that could not be made, once, whole."""
        if self.failed is not None:
            log.warning(
                "no context cache for %s (%s); its prompt prefix was sent with every call", self.stage, self.failed
            )
            self.failed = None

    def _ledger(self, completion: Completion, kind: str) -> None:
        if self.runner.on_paid is not None:
            self.runner.on_paid(self.stage, completion, kind=kind)

    def name_for(self, job: Any) -> tuple[str, str] | None:
        held = self.by_prefix.get(job.prefix) if job.prefix else None
        return (held[0], job.prefix) if held else None

    def close(self) -> None:
        for prefix, (name, written, created) in list(self.by_prefix.items()):
            del self.by_prefix[prefix]
            try:
                self.runner.provider.delete_context_cache(name)
            except Exception as exc:  # noqa: BLE001 - it expires after its TTL anyway (and is accounted so); say so
                log.warning(
                    "could not delete context cache %s (%s); it expires after %d s",
                    name,
                    redact(plain(str(exc)).split("; fix:")[0]),
                    self.cfg.ttl_s,
                )
                continue
            held = min(self.cfg.ttl_s, max(1, int(time.monotonic() - created)))
            unused = -written * (self.cfg.ttl_s - held)  # the TTL it was not kept: credited back
            self._ledger(Completion("", unused), "cache_storage")
            self.usage.cache_token_seconds += unused
