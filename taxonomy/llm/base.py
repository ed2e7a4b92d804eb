"""The one provider protocol. Providers turn a conversation plus a JSON schema into text and
token counts; validation, re-asking, caching, retries and accounting live in the runner."""

from __future__ import annotations

import re
import socket
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

    def __init__(self, message: str, retry_after: float | None = None, timed_out: bool = False):
        super().__init__(message)
        self.retry_after = retry_after
        self.timed_out = timed_out
        self.silent = False  # the runner's verdict: no call has been answered for too long, so retrying is over


def timed_out(name: str, seconds: float) -> TransientError:
    """A call the server took and never answered in time: what, how long, and the setting that changes it."""
    return TransientError(f"{name}: no answer within {seconds:g} s (llm.timeout_s)", timed_out=True)


class PermanentError(Exception):
    """Not worth retrying: bad key, bad model, bad request, a host that cannot be reached."""


def unreachable(exc: BaseException) -> str | None:
    """'cannot connect to HOST:PORT (why)' when `exc`, or an error it wraps, says the host was never
    reached: its name does not resolve, it refuses connections or its certificate is refused. Waiting
    does not change those, unlike a timeout or a connection dropped midway, which stay worth retrying."""
    where, seen = "", set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        where = where or _where(exc)
        kind = type(exc).__name__
        why = (
            "its name does not resolve"
            if isinstance(exc, socket.gaierror) or kind == "ClientConnectorDNSError"
            else "connection refused"
            if isinstance(exc, ConnectionRefusedError)
            else "its TLS certificate is refused"
            if kind in ("ClientConnectorCertificateError", "SSLCertVerificationError")
            else None
        )
        if why:
            return f"cannot connect to {where or 'the server'} ({why})"
        exc = exc.__cause__ or exc.__context__
    return None


def _where(exc: BaseException) -> str:
    """host:port from aiohttp's connector errors or httpx's request, when the error carries them."""
    host, port = getattr(exc, "host", None), getattr(exc, "port", None)
    if isinstance(host, str) and host:
        return f"{host}:{port}" if port else host
    try:
        url = exc.request.url  # httpx raises RuntimeError when the error has no request
        return f"{url.host}:{url.port}" if url.port else str(url.host)
    except (AttributeError, RuntimeError):
        return ""


def plain(message: str) -> str:
    """An SDK message without the object reprs aiohttp puts in it (`ssl:<ssl.SSLContext object at 0x7f…>`)."""
    return re.sub(r" ?ssl:(<[^>]*>|default)", "", message)


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
