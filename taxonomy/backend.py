"""The backend a session runs, chosen once when the session opens (`choose_backend`).

Every stage asks the session's backend for its step, and so do edit and distill, which re-tag outside the
stages; the embedder for a backend is chosen in embed/choose.py.

    backend.discover(criteria, cfg)                                  -> Stage 1 labels table
    backend.label_embedder(criteria, stage1, cfg, default)           -> the embedder Stage 2a clusters with
    backend.canonicalize(clusters, criterion_clusters, criteria, cfg, stage1, label_embeddings) -> (micro, notes)
    backend.merge(micro, centroids, cfg, pipeline_name, co_micro, criteria, stage1) -> Taxonomy
    backend.tag(criteria, taxonomy, cfg, stage1, micro_labels, folder) -> Stage 3 tags table
                                                                        (folder: the run holding the taxonomy)
    backend.ask(stage, jobs, title)                                  -> a model's answers, or None where no model runs
    backend.brief_notes(criteria, cfg)                               -> notes on briefs cut for the prompts
    backend.fitted_tagger(folder)                                    -> the tagger a run fitted, or None
    backend.tag_source                                               -> the word the manifest uses for who tagged

`LLMBackend` holds the one runner; `taxonomy.offline.backend.OfflineBackend` runs without a model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence

import numpy as np
import polars as pl

from taxonomy.config import PipelineConfig
from taxonomy.llm.batch import check_batch_backend
from taxonomy.llm.cache import Cache
from taxonomy.llm.providers import make_provider
from taxonomy.llm.runner import Answer, Job, Runner, Usage
from taxonomy.schemas import MicroCapability, Taxonomy
from taxonomy.stages.common import long_briefs
from taxonomy.stages.discover import discover
from taxonomy.stages.tag import tag


class Backend(Protocol):
    name: str
    model: str
    usage: dict[str, Usage]
    cache: Cache | None
    scales_k: bool  # whether Stage 2a scales its number of micro-clusters with the labels (cluster.k = "auto")
    labels_are_kinds: bool  # Stage 1's labels already group the criteria (offline): Stage 2a clusters the labels
    tag_source: str  # who tagged, as the manifest says it: "llm" or "offline"

    def notice(self, cfg: PipelineConfig) -> str: ...
    def identity(self, cfg: PipelineConfig) -> dict[str, Any]: ...
    def ask(self, stage: str, jobs: Sequence[Job], title: str) -> list[Answer] | None: ...
    def discover(self, criteria: pl.DataFrame, cfg: PipelineConfig) -> pl.DataFrame: ...
    def label_embedder(
        self, criteria: pl.DataFrame, stage1: pl.DataFrame, cfg: PipelineConfig, default: Any
    ) -> Any: ...
    def canonicalize(
        self,
        clusters: pl.DataFrame,
        criterion_clusters: pl.DataFrame,
        criteria: pl.DataFrame,
        cfg: PipelineConfig,
        stage1: pl.DataFrame,
        label_embeddings: np.ndarray,
    ) -> tuple[list[MicroCapability], list[str]]: ...
    def merge(
        self,
        micro: list[MicroCapability],
        centroids: np.ndarray,
        cfg: PipelineConfig,
        pipeline_name: str,
        co_micro: np.ndarray,
        criteria: pl.DataFrame,
        stage1: pl.DataFrame,
    ) -> Taxonomy: ...
    def tag(
        self,
        criteria: pl.DataFrame,
        taxonomy: Taxonomy,
        cfg: PipelineConfig,
        stage1: pl.DataFrame | None,
        micro_labels: dict[str, list[str]],
        folder: Any = None,
    ) -> pl.DataFrame: ...
    def brief_notes(self, criteria: pl.DataFrame, cfg: PipelineConfig) -> list[str]: ...
    def fitted_tagger(self, folder: Any) -> Any: ...


@dataclass
class LLMBackend:
    """Gemini, Vertex or an OpenAI-compatible server, every call through the one runner."""

    name: str
    runner: Runner
    cache: Cache
    scales_k = True
    labels_are_kinds = False
    tag_source = "llm"

    @property
    def model(self) -> str:
        return self.runner.cfg.model

    @property
    def usage(self) -> dict[str, Usage]:
        return self.runner.usage

    def notice(self, cfg: PipelineConfig) -> str:
        return f"Backend: {self.name} (model {cfg.llm.model}); answers are cached in {self.cache.path}."

    def identity(self, cfg: PipelineConfig) -> dict[str, Any]:
        llm = cfg.llm
        ident = {
            "backend": self.name,
            "model": llm.model,
            "temperature": llm.temperature,
            "reask_attempts": llm.reask_attempts,
        }
        if self.name == "openai":
            ident["base_url"] = llm.base_url
        return ident

    def ask(self, stage: str, jobs: Sequence[Job], title: str) -> list[Answer]:
        return self.runner.run(stage, jobs, title)

    def discover(self, criteria, cfg):
        return discover(criteria, cfg, self.runner)

    def label_embedder(self, criteria, stage1, cfg, default):
        return default

    # lazy: Stage 2b and 2c load scikit-learn (about 1 s), which a session that only tags or drafts never needs
    def canonicalize(self, clusters, criterion_clusters, criteria, cfg, stage1, label_embeddings):
        from taxonomy.stages.canonicalize import canonicalize

        return canonicalize(
            clusters, criterion_clusters, criteria, cfg, self.runner, stage1=stage1, label_embeddings=label_embeddings
        )

    def merge(self, micro, centroids, cfg, pipeline_name, co_micro, criteria, stage1):
        from taxonomy.stages.merge import merge

        return merge(micro, centroids, cfg, self.runner, pipeline_name=pipeline_name, co_micro=co_micro)

    def tag(self, criteria, taxonomy, cfg, stage1, micro_labels, folder=None):  # a model reads the taxonomy itself
        return tag(criteria, taxonomy, cfg, self.runner)

    def brief_notes(self, criteria, cfg):
        return long_briefs(criteria, cfg.discover.brief_max_chars)

    def fitted_tagger(self, folder):  # a model reads the taxonomy itself: nothing is fitted
        return None


def choose_backend(
    cfg: PipelineConfig,
    name: str,
    *,
    credentials: Any = None,
    show_progress: bool = True,
    batch_dir: Any = None,
    on_paid: Any = None,
) -> Backend:
    """The one place that decides what answers the stages: a model through the runner, or none."""
    if name == "offline":
        from taxonomy.offline.backend import OfflineBackend  # lazy: an LLM session never loads the key-less package

        return OfflineBackend()
    if cfg.llm.mode == "batch":
        check_batch_backend(name)
    provider = make_provider(cfg.llm, name, credentials)  # a bad provider setting stops before any file is made
    # One cache per pipeline, wherever the run directory is: a new run dir re-pays nothing.
    cache = Cache(cfg.resolve(cfg.output.dir) / cfg.name / "cache.sqlite")
    runner = Runner(provider, cfg.llm, cache, show_progress=show_progress, batch_dir=batch_dir, on_paid=on_paid)
    return LLMBackend(name, runner, cache)
