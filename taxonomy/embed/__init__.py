"""The one embedder protocol. Implementations: `local` (offline TF-IDF + SVD) and a remote one.

Every embedder returns float32 rows of unit L2 norm, so a dot product is a cosine and
euclidean (ward) distances rank pairs exactly as cosine distances do.
"""

from __future__ import annotations

import json
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    name: str

    def embed(self, texts: list[str]) -> np.ndarray:
        """One float32, L2-normalised row per text, in input order."""
        ...


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Unit rows as float32; an all-zero row stays zero instead of becoming NaN."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)


def split_cached(texts: list[str], cache, key) -> tuple[dict[str, list[float]], list[str]]:
    """(vectors found in the cache by text, the distinct texts still to embed, in order)."""
    vectors: dict[str, list[float]] = {}
    missing = []
    for text in dict.fromkeys(texts):
        hit = cache.get(key(text))
        if hit is None:
            missing.append(text)
        else:
            vectors[text] = json.loads(hit[0])
    return vectors, missing


def embed_missing(missing: list[str], vectors: dict[str, list[float]], batch_size: int, call, cache, key) -> None:
    """Embed `missing` in chunks of `batch_size` through `call`, caching each vector as it arrives."""
    for start in range(0, len(missing), batch_size):
        chunk = missing[start : start + batch_size]
        for text, values in zip(chunk, call(chunk)):
            vectors[text] = values
            cache.put(key(text), "embed", json.dumps(values))
