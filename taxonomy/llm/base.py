"""The one provider protocol. Providers turn a conversation plus a JSON schema into text and
token counts; validation, re-asking, caching, retries and accounting live in the runner."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

from pydantic import BaseModel


@dataclass(frozen=True)
class Turn:
    role: str  # "user" or "model"
    text: str


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int = 0  # all of them, the cached ones included
    output_tokens: int = 0
    cached_tokens: int = 0  # the part of prompt_tokens served from a context cache


class TransientError(Exception):
    """Worth retrying: 429, 5xx, timeouts, dropped connections."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class PermanentError(Exception):
    """Not worth retrying: bad key, bad model, bad request."""


class Provider(Protocol):
    name: str
    model: str

    def identity(self) -> dict[str, Any]:
        """What makes an answer reusable from cache: never holds a secret."""
        ...

    async def complete(
        self, turns: list[Turn], *, system: str | None, schema: type[BaseModel], temperature: float
    ) -> Completion:
        """A provider with explicit context caches (see context_cache.py) also takes
        `context_cache=(cache name, the prompt prefix it holds)`."""
        ...


@lru_cache(maxsize=None)
def json_schema(model: type[BaseModel]) -> dict:
    """Built once per schema class: pydantic's generator costs milliseconds a call."""
    return model.model_json_schema()
