"""Providers: google-genai (Gemini API key, or Vertex AI via vertexai=True) and OpenAI-compatible servers.

The SDKs' own retries are off: retries live once, in the runner. Each provider maps its
SDK's errors to TransientError (retry) or PermanentError (stop).
"""

from __future__ import annotations

import asyncio
import os
import weakref
from typing import Any

from pydantic import BaseModel

from taxonomy.config import LLMConfig
from taxonomy.llm.base import (
    Completion,
    PermanentError,
    TransientError,
    Turn,
    json_schema,
    plain,
    timed_out,
    unreachable,
)

GEMINI_KEY_ENVS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
# A short-lived OAuth access token (e.g. `gcloud auth print-access-token`) for Vertex,
# for machines without application-default credentials.
VERTEX_TOKEN_ENV = "GOOGLE_VERTEX_ACCESS_TOKEN"


class ProviderError(ValueError):
    """A provider that cannot be set up, reported on one line with the fix."""


def gemini_api_key() -> str | None:
    return next((os.environ[k] for k in GEMINI_KEY_ENVS if os.environ.get(k)), None)


AGAIN = "then run the same command again: answers already received are cached"


def refused(name: str, code: int, status: str, message: str, key_fix: str) -> PermanentError:
    """A request the provider answered with 4xx: waiting changes nothing, so the run ends on one line."""
    message = plain(message)[:300].rstrip(". ")
    if code in (401, 403) or "api key" in message.lower():
        fix = key_fix
    elif code == 404:
        fix = "check llm.model: the provider has no such model, or not for this key"
    else:
        fix = "check llm.model and the [llm] settings of the pipeline config"
    return PermanentError(f"{name} {code} {status}: {message}; fix: {fix}, {AGAIN}".replace("  ", " "))


def not_reached(name: str, why: str, endpoint: str) -> PermanentError:
    return PermanentError(f"{name}: {why}; fix: check the network connection and {endpoint}, {AGAIN}")


def _retry_after(headers: Any) -> float | None:
    try:
        value = headers.get("retry-after") if headers is not None else None
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


class GeminiProvider:
    """google-genai in Gemini API mode (api key) or Vertex mode (project, location, credentials)."""

    def __init__(self, cfg: LLMConfig, *, vertex: bool, credentials: Any = None):
        # lazy, here and in every google import below: google-genai takes about 0.5 s to import, and only a Gemini
        # or Vertex session needs it (this module is loaded by every session, offline ones included)
        from google import genai

        self.name = "vertex" if vertex else "gemini"
        self.model = cfg.model
        self._timeout_ms = int(cfg.timeout_s * 1000)
        if vertex:
            project = cfg.project or os.environ.get("GOOGLE_CLOUD_PROJECT", "")
            location = cfg.location or os.environ.get("GOOGLE_CLOUD_LOCATION", "") or "us-central1"
            if not project:
                raise ProviderError(
                    "vertex: no project; fix: set llm.project in the pipeline config or GOOGLE_CLOUD_PROJECT"
                )
            if credentials is None and os.environ.get(VERTEX_TOKEN_ENV):
                from google.oauth2.credentials import Credentials

                credentials = Credentials(token=os.environ[VERTEX_TOKEN_ENV])
            self._kwargs = dict(vertexai=True, project=project, location=location, credentials=credentials)
            self._where = {"project": project, "location": location}
            self._key_fix = (
                f"check the credentials (gcloud auth application-default login, or {VERTEX_TOKEN_ENV}) "
                f"and that project {project} may use Vertex AI"
            )
        else:
            key = gemini_api_key()
            if not key:
                raise ProviderError(
                    "gemini: no API key; fix: export GEMINI_API_KEY (or GOOGLE_API_KEY), or use --provider offline"
                )
            self._kwargs = dict(api_key=key)
            self._where = {}
            self._key_fix = "check the API key in GEMINI_API_KEY (or GOOGLE_API_KEY): the provider refuses it"
        base_env = "GOOGLE_VERTEX_BASE_URL" if vertex else "GOOGLE_GEMINI_BASE_URL"
        self._endpoint = (
            f"the endpoint in {base_env}"
            if os.environ.get(base_env)
            else "that a proxy or firewall lets the provider's host through"
        )
        self._clients: dict[int, Any] = {}
        self._genai = genai

    def client(self) -> Any:
        """One client per event loop: the SDK's async transport is bound to the loop that made it.

        Clients are kept alive on purpose: a collected genai.Client closes its connection pool.
        """
        loop_id = id(asyncio.get_running_loop()) if _in_loop() else 0
        if loop_id not in self._clients:
            from google.genai import types

            # No base_url here: the SDK reads GOOGLE_GEMINI_BASE_URL / GOOGLE_VERTEX_BASE_URL itself.
            options = types.HttpOptions(timeout=self._timeout_ms)
            self._clients[loop_id] = self._genai.Client(http_options=options, **self._kwargs)
        return self._clients[loop_id]

    def identity(self) -> dict[str, Any]:
        return {"provider": self.name, "model": self.model, **self._where}

    @staticmethod
    def contents(turns: list[Turn]) -> list:
        from google.genai import types

        return [types.Content(role=t.role, parts=[types.Part(text=t.text)]) for t in turns]

    @staticmethod
    def generation_config(
        system: str | None, schema: type[BaseModel], temperature: float, cached_content: str | None = None
    ):
        """The request settings, shared by online calls and batch-mode inline requests."""
        from google.genai import types

        return types.GenerateContentConfig(
            system_instruction=system,
            temperature=temperature,
            response_mime_type="application/json",
            # Plain JSON Schema, built once per class: converting a pydantic class every call costs milliseconds.
            response_json_schema=json_schema(schema),
            cached_content=cached_content,
        )

    def create_context_cache(self, prefix: str, ttl_s: int, display_name: str) -> tuple[str, int]:
        """An explicit cache holding `prefix` as the first user turn: (its name, the tokens it holds)."""
        from google.genai import types

        config = types.CreateCachedContentConfig(
            contents=self.contents([Turn("user", prefix)]), ttl=f"{int(ttl_s)}s", display_name=display_name
        )
        try:
            cache = self.client().caches.create(model=self.model, config=config)
        except Exception as exc:
            mapped = self.failure(exc)
            if mapped is None:
                raise
            raise mapped from None
        tokens = (cache.usage_metadata.total_token_count or 0) if cache.usage_metadata else 0
        return cache.name, tokens or len(prefix) // 4

    def delete_context_cache(self, name: str) -> None:
        self.client().caches.delete(name=name)

    def failure(self, exc: Exception) -> Exception | None:
        """What an SDK call's exception stands for: TransientError (429, 5xx, timeouts, a dropped connection:
        retried), PermanentError (a refused key or request, a host never reached: the run ends on one line
        with the fix), or None (not the provider's doing: raised as it is). Generation and embeddings alike."""
        from google.genai import errors

        if isinstance(exc, errors.APIError):
            code = exc.code or 0
            if code == 429 or code >= 500 or code == 408:
                message = f"{self.name} {code} {exc.status or ''}: {plain(str(exc.message or ''))[:300]}"
                return TransientError(message, _retry_after(getattr(exc.response, "headers", None)))
            return refused(self.name, code, exc.status or "", str(exc.message or ""), self._key_fix)
        why = unreachable(exc)
        if why is not None:
            return not_reached(self.name, why, self._endpoint)
        name = type(exc).__name__  # the transport's own errors (aiohttp, httpx), OSError among them
        if isinstance(exc, asyncio.TimeoutError) or "timeout" in name.lower():
            return timed_out(self.name, self._timeout_ms / 1000)
        if isinstance(exc, OSError) or "connect" in name.lower():
            return TransientError(f"{self.name}: {name}: {plain(str(exc)) or 'the connection failed'}")
        return None

    async def complete(
        self,
        turns: list[Turn],
        *,
        system: str | None,
        schema: type[BaseModel],
        temperature: float,
        context_cache: tuple[str, str] | None = None,
    ) -> Completion:
        """`context_cache` = (cache name, the prefix of the first turn it holds): only the rest is sent."""
        cache_name = None
        if context_cache is not None and turns and turns[0].text.startswith(context_cache[1]):
            cache_name, prefix = context_cache
            turns = [Turn(turns[0].role, turns[0].text[len(prefix) :] or " ")] + list(turns[1:])
        contents, config = self.contents(turns), self.generation_config(system, schema, temperature, cache_name)
        try:
            response = await self.client().aio.models.generate_content(
                model=self.model, contents=contents, config=config
            )
        except Exception as exc:
            mapped = self.failure(exc)
            if mapped is None:
                raise
            raise mapped from None
        return gemini_completion(response)


def gemini_completion(response) -> Completion:
    """A Gemini GenerateContentResponse (online, or one item of a batch) as the runner reads it."""
    usage = response.usage_metadata
    return Completion(
        text=response.text or "",
        prompt_tokens=(usage.prompt_token_count or 0) if usage else 0,
        output_tokens=(usage.candidates_token_count or 0) if usage else 0,
        cached_tokens=(usage.cached_content_token_count or 0) if usage else 0,
    )


class OpenAICompatibleProvider:
    """Any server speaking the OpenAI chat-completions API: vLLM, Ollama, a llama.cpp server."""

    def __init__(self, cfg: LLMConfig):
        import openai  # lazy: the openai SDK takes about 0.5 s to import; only this provider needs it

        if not cfg.base_url:
            raise ProviderError(
                "openai: no base URL; fix: set llm.base_url (e.g. http://localhost:8000/v1) in the pipeline config"
            )
        self.name = "openai"
        self.model = cfg.model
        self._base_url = cfg.base_url
        self._key_env = cfg.api_key_env
        self._timeout = cfg.timeout_s
        # The SDK's async transport is bound to the loop that first used it, and the runner runs
        # one loop per stage: a client shared across loops dies with "Event loop is closed".
        # One client per loop, dropped with its loop.
        self._clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._openai = openai

    def client(self) -> Any:
        loop = asyncio.get_running_loop()
        if loop not in self._clients:
            # Local servers often need no key; the SDK insists on a non-empty one.
            self._clients[loop] = self._openai.AsyncOpenAI(
                base_url=self._base_url,
                api_key=os.environ.get(self._key_env) or "none",
                max_retries=0,
                timeout=self._timeout,
            )
        return self._clients[loop]

    def identity(self) -> dict[str, Any]:
        return {"provider": self.name, "model": self.model, "base_url": self._base_url}

    async def complete(
        self, turns: list[Turn], *, system: str | None, schema: type[BaseModel], temperature: float
    ) -> Completion:
        openai = self._openai
        messages = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "assistant" if t.role == "model" else "user", "content": t.text} for t in turns
        ]
        response_format = {
            "type": "json_schema",
            "json_schema": {"name": schema.__name__, "schema": json_schema(schema)},
        }
        try:
            response = await self.client().chat.completions.create(
                model=self.model, messages=messages, temperature=temperature, response_format=response_format
            )
        except openai.APIStatusError as exc:
            if exc.status_code == 429 or exc.status_code >= 500 or exc.status_code == 408:
                raise TransientError(
                    f"openai {exc.status_code}: {str(exc.message)[:300]}", _retry_after(exc.response.headers)
                ) from None
            raise refused(
                "openai", exc.status_code, "", str(exc.message), f"check the key in {self._key_env}"
            ) from None
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            why = None if isinstance(exc, openai.APITimeoutError) else unreachable(exc)
            if why is not None:
                raise not_reached("openai", why, f"llm.base_url ({self._base_url})") from None
            if isinstance(exc, openai.APITimeoutError):
                raise timed_out("openai", self._timeout) from None
            raise TransientError(
                f"openai: {type(exc).__name__}: {plain(str(exc)) or 'the connection failed'}"
            ) from None
        usage = response.usage
        details = getattr(usage, "prompt_tokens_details", None) if usage else None
        return Completion(
            text=response.choices[0].message.content or "",
            prompt_tokens=usage.prompt_tokens if usage else 0,
            output_tokens=usage.completion_tokens if usage else 0,
            # Servers with prefix caching (vLLM, OpenAI) report the part of the prompt they reused.
            cached_tokens=(getattr(details, "cached_tokens", None) or 0) if details else 0,
        )


def _in_loop() -> bool:
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        return False


def resolve_provider_name(requested: str) -> str:
    """`auto` means Gemini when a key is present, otherwise the offline backend."""
    if requested != "auto":
        return requested
    return "gemini" if gemini_api_key() else "offline"


def make_provider(cfg: LLMConfig, name: str, credentials: Any = None):
    if name == "gemini":
        return GeminiProvider(cfg, vertex=False)
    if name == "vertex":
        return GeminiProvider(cfg, vertex=True, credentials=credentials)
    if name == "openai":
        return OpenAICompatibleProvider(cfg)
    raise ProviderError(f"unknown LLM provider {name!r}; fix: use gemini, vertex, openai or offline")
