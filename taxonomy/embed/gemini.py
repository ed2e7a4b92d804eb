"""Gemini embeddings through google-genai, batched and cached like LLM calls."""

from __future__ import annotations

import json

import numpy as np
from tenacity import retry_if_exception_type, stop_after_attempt, wait_exponential_jitter, Retrying

from taxonomy.embed import embed_missing, l2_normalize, split_cached
from taxonomy.llm.batch import embed_in_batch
from taxonomy.llm.base import TransientError
from taxonomy.llm.cache import Cache, request_key


class GeminiEmbedder:
    def __init__(self, provider, model: str, batch_size: int, cache: Cache, max_retries: int, runner):
        self.provider = provider  # a GeminiProvider: its client carries the key or the Vertex credentials
        self.runner = runner  # in batch mode, missing embeddings go through one Batch API job first
        self.model = model
        self.name = f"{provider.name}:{model}"
        self.batch_size = batch_size
        self.cache = cache
        self.max_retries = max_retries
        self.calls = 0
        self.on_call = None  # (texts in the call, tokens): the run's usage ledger

    def _key(self, text: str) -> str:
        return request_key({**self.provider.identity(), "embed_model": self.model, "text": text})

    def embed(self, texts: list[str]) -> np.ndarray:
        # Snake-case labels embed better as words (fewer tokens, better separated).
        inputs = [t.replace("_", " ") for t in texts]
        vectors, missing = split_cached(inputs, self.cache, self._key)
        if missing:
            batched = embed_in_batch(self.runner, self.model, {self._key(t): t for t in missing}) or {}
            answered = [t for t in missing if self._key(t) in batched]
            if answered and self.on_call is not None:
                # Into the ledger before the cache: a kill in between re-submits, and that job is paid again.
                self.on_call(len(answered), _tokens(answered))
            for text in missing:
                if self._key(text) in batched:
                    vectors[text] = batched[self._key(text)]
                    self.cache.put(self._key(text), "embed", json.dumps(vectors[text]))
            missing = [t for t in missing if t not in vectors]  # what batch mode did not answer goes online
        embed_missing(missing, vectors, self.batch_size, self._call, self.cache, self._key)
        return l2_normalize(np.asarray([vectors[t] for t in inputs], dtype=np.float32))

    def _call(self, chunk: list[str]) -> list[list[float]]:
        def once() -> list[list[float]]:
            try:
                response = self.provider.client().models.embed_content(model=self.model, contents=chunk)
            except Exception as exc:  # a refused key or an unreachable host ends the run on one line, as for generation
                mapped = self.provider.failure(exc)
                if mapped is None:
                    raise
                raise mapped from None
            self.calls += 1
            if self.on_call is not None:
                self.on_call(len(chunk), _tokens(chunk))
            return [e.values for e in response.embeddings]

        retrying = Retrying(
            retry=retry_if_exception_type(TransientError),
            stop=stop_after_attempt(self.max_retries + 1),
            wait=wait_exponential_jitter(initial=1, max=30),
            reraise=True,
        )
        return retrying(once)


def _tokens(texts: list[str]) -> int:
    """Embedding calls report no token count (online or batch): estimated at 4 characters a token."""
    return sum(len(t) for t in texts) // 4 + len(texts)
