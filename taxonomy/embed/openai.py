"""Embeddings from an OpenAI-compatible `/v1/embeddings` endpoint (vLLM, Ollama, llama.cpp, OpenAI),
batched and cached like LLM calls, so vLLM/Ollama users get model embeddings instead of TF-IDF."""

from __future__ import annotations

import os
from typing import Callable

import numpy as np
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from taxonomy.embed import embed_missing, l2_normalize, split_cached
from taxonomy.llm.base import PermanentError, TransientError
from taxonomy.llm.cache import Cache, request_key


class OpenAIEmbedder:
    def __init__(
        self,
        base_url: str,
        model: str,
        batch_size: int,
        cache: Cache,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        max_retries: int = 6,
        timeout_s: float = 120.0,
        backoff: tuple[float, float] = (0.5, 30.0),
        on_call: Callable[[int, int], None] | None = None,
    ):
        import openai  # lazy: the openai SDK takes about 0.5 s to import; only OpenAI-compatible embeddings need it

        self._openai = openai
        self._client = openai.OpenAI(
            base_url=base_url, api_key=os.environ.get(api_key_env) or "none", max_retries=0, timeout=timeout_s
        )
        self.base_url = base_url
        self.model = model
        self.name = f"openai:{model}"
        self.batch_size = batch_size
        self.cache = cache
        self.max_retries = max_retries
        self.backoff = backoff
        self.on_call = on_call  # (texts in the call, prompt tokens): the run's usage ledger
        self.calls = 0

    def _key(self, text: str) -> str:
        return request_key({"provider": "openai", "base_url": self.base_url, "embed_model": self.model, "text": text})

    def embed(self, texts: list[str]) -> np.ndarray:
        inputs = [t.replace("_", " ") for t in texts]  # snake_case labels embed better as words
        vectors, missing = split_cached(inputs, self.cache, self._key)
        embed_missing(missing, vectors, self.batch_size, self._call, self.cache, self._key)
        return l2_normalize(np.asarray([vectors[t] for t in inputs], dtype=np.float32))

    def _call(self, chunk: list[str]) -> list[list[float]]:
        openai = self._openai

        def once() -> list[list[float]]:
            try:
                response = self._client.embeddings.create(model=self.model, input=chunk)
            except openai.APIStatusError as exc:
                message = f"openai embeddings {exc.status_code}: {str(exc.message)[:300]}"
                if exc.status_code in (408, 429) or exc.status_code >= 500:
                    raise TransientError(message) from None
                raise PermanentError(
                    f"{message}; fix: check embedding.openai_model and the server's embedding support"
                ) from None
            except (openai.APITimeoutError, openai.APIConnectionError) as exc:
                raise TransientError(f"openai embeddings: {type(exc).__name__}") from None
            self.calls += 1
            if self.on_call is not None:
                self.on_call(len(chunk), response.usage.prompt_tokens if response.usage else 0)
            rows = sorted(response.data, key=lambda d: d.index)
            if len(rows) != len(chunk):
                raise PermanentError(
                    f"openai embeddings: {len(rows)} vectors for {len(chunk)} "
                    "texts; fix: check the server's /v1/embeddings"
                )
            return [list(d.embedding) for d in rows]

        retrying = Retrying(
            retry=retry_if_exception_type(TransientError),
            stop=stop_after_attempt(self.max_retries + 1),
            wait=wait_exponential_jitter(initial=self.backoff[0], max=self.backoff[1]),
            reraise=True,
        )
        return retrying(once)
