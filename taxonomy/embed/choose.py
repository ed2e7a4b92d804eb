"""The embedder a session clusters with, chosen once from the config and the backend (`choose_embedder`)."""

from __future__ import annotations

from typing import Any, Callable

from taxonomy.config import ConfigError, PipelineConfig
from taxonomy.embed.gemini import GeminiEmbedder
from taxonomy.embed.openai import OpenAIEmbedder
from taxonomy.llm.cache import Cache

# The backends whose provider also serves Gemini embeddings.
GEMINI_BACKENDS = ("gemini", "vertex")


def embedding_choice(cfg: PipelineConfig, backend: str) -> str:
    """auto: Gemini embeddings with a Gemini backend, else the local embedder."""
    choice = cfg.embedding.provider
    if choice == "auto":
        choice = "gemini" if backend in GEMINI_BACKENDS else "local"
    return choice


def choose_embedder(
    cfg: PipelineConfig, backend: str, runner: Any, cache: Cache | None, on_call: Callable[[int, int], None]
):
    """`runner` and `cache`: the LLM backend's (None offline); `on_call(n, tokens)` logs each paid embedding call."""
    choice = embedding_choice(cfg, backend)
    if choice == "gemini":
        if backend not in GEMINI_BACKENDS:
            raise ConfigError(
                f"{cfg.base_dir}: key embedding.provider: gemini embeddings need --provider gemini or vertex; "
                'fix: set embedding.provider = "local" or "auto"'
            )
        model = cfg.embedding.vertex_model if backend == "vertex" else cfg.embedding.model
        embedder = GeminiEmbedder(
            runner.provider, model, cfg.embedding.batch_size, cache, cfg.llm.max_retries, runner=runner
        )
        embedder.on_call = on_call
        return embedder
    if choice == "openai":
        return _openai_embedder(cfg, cache, on_call)
    from taxonomy.embed.local import LocalEmbedder  # lazy: scikit-learn, about 1 s, which only local embeddings need

    return LocalEmbedder(dim=cfg.embedding.local_dim, seed=cfg.cluster.seed)


def _openai_embedder(cfg: PipelineConfig, cache: Cache | None, on_call: Callable[[int, int], None]):
    emb, llm = cfg.embedding, cfg.llm
    base_url = emb.base_url or llm.base_url
    where = f"{cfg.base_dir}: key embedding"
    if not base_url:
        raise ConfigError(
            f"{where}.base_url: empty (and so is llm.base_url); fix: set the "
            "/v1 URL of the embedding server, e.g. http://localhost:8000/v1"
        )
    if not emb.openai_model:
        raise ConfigError(
            f"{where}.openai_model: empty; fix: name the server's "
            'embedding model, e.g. openai_model = "nomic-embed-text"'
        )
    # The offline backend has no LLM cache; embeddings still need one.
    cache = cache or Cache(cfg.resolve(cfg.output.dir) / cfg.name / "cache.sqlite")
    return OpenAIEmbedder(
        base_url,
        emb.openai_model,
        emb.batch_size,
        cache,
        api_key_env=llm.api_key_env,
        max_retries=llm.max_retries,
        timeout_s=llm.timeout_s,
        backoff=(llm.backoff_initial_s, llm.backoff_max_s),
        on_call=on_call,
    )
