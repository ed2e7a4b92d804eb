"""Stage order over a run directory. Each step reads its inputs from files and writes its own,
so any stage can be re-run alone, and a killed run resumes from what is on disk."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import polars as pl

from taxonomy.config import ConfigError, PipelineConfig
from taxonomy.corpus import load_corpus
from taxonomy.llm.cache import Cache
from taxonomy.llm.providers import make_provider, resolve_provider_name
from taxonomy.llm.runner import Runner
from taxonomy.prompts import template_hash
from taxonomy.run import OUTPUTS, PROMPTS, STAGES, RunDir, default_run_dir, elapsed, now, versions
from taxonomy.schemas import MicroCapability


@dataclass
class Session:
    cfg: PipelineConfig
    run: RunDir
    backend: str  # "offline", "gemini", "vertex" or "openai"
    runner: Runner | None  # None: the offline backend
    cache: Cache | None

    def notice(self) -> str:
        if self.runner is None:
            return (
                "Backend: offline (no LLM: a deterministic classical-NLP baseline, local TF-IDF embeddings). "
                "For the LLM pipeline set GEMINI_API_KEY, or pass --provider gemini | vertex | openai."
            )
        return f"Backend: {self.backend} (model {self.cfg.llm.model}); answers are cached in {self.cache.path}."

    def embedder(self):
        choice = self.cfg.embedding.provider
        if choice == "auto":
            choice = "gemini" if self.backend in ("gemini", "vertex") else "local"
        if choice == "gemini":
            from taxonomy.embed.gemini import GeminiEmbedder

            if self.runner is None or self.backend not in ("gemini", "vertex"):
                raise ConfigError(
                    f"{self.cfg.base_dir}: key embedding.provider: gemini embeddings need --provider gemini or vertex; "
                    'fix: set embedding.provider = "local" or "auto"'
                )
            model = self.cfg.embedding.vertex_model if self.backend == "vertex" else self.cfg.embedding.model
            return GeminiEmbedder(self.runner.provider, model, self.cfg.embedding.batch_size, self.cache, self.cfg.llm.max_retries)
        from taxonomy.embed.local import LocalEmbedder

        return LocalEmbedder(dim=self.cfg.embedding.local_dim, seed=self.cfg.cluster.seed)


def open_session(
    cfg: PipelineConfig, *, provider: str | None = None, run_dir: Path | None = None,
    show_progress: bool = True, credentials: Any = None, run_suffix: str = "",
) -> Session:
    backend = resolve_provider_name(provider or cfg.llm.provider)
    if run_dir is None:
        run_dir = default_run_dir(cfg, backend, cfg.llm.model, run_suffix)
    run = RunDir(run_dir)
    runner = cache = None
    if backend != "offline":
        # One cache per pipeline, wherever the run directory is: a new run dir re-pays nothing.
        cache = Cache(cfg.resolve(cfg.output.dir) / cfg.name / "cache.sqlite")
        runner = Runner(make_provider(cfg.llm, backend, credentials), cfg.llm, cache, show_progress=show_progress)
    run.manifest.update({
        "pipeline": cfg.name, "backend": backend, "model": "none" if runner is None else cfg.llm.model,
        "versions": versions(), "settings": json.loads(cfg.model_dump_json(exclude={"base_dir"})),
        "config_dir": str(cfg.base_dir), "seeds": {"cluster": cfg.cluster.seed},
        "prompt_hashes": {stage: template_hash(name) for stage, name in PROMPTS.items()},
    })
    run.manifest.setdefault("created", now())
    run.save_manifest()
    return Session(cfg, run, backend, runner, cache)


def ensure_criteria(s: Session) -> pl.DataFrame:
    """The corpus is snapshotted into the run so later stages never depend on the source files."""
    if not s.run.has("criteria.parquet"):
        corpus = load_corpus(s.cfg.corpus, s.cfg.base_dir)
        s.run.write_parquet("criteria.parquet", corpus.frame)
        s.run.manifest["corpus"] = {"n_criteria": corpus.frame.height, "n_tasks": corpus.frame["task_id"].n_unique(), "warnings": corpus.warnings}
        s.run.save_manifest()
    return s.run.read_parquet("criteria.parquet")


def _usage(s: Session, stage: str) -> dict[str, Any]:
    if s.runner is None or stage not in s.runner.usage:
        return {}
    return s.runner.usage[stage].as_dict(s.cfg.llm.prices)


def step_discover(s: Session) -> dict[str, Any]:
    from taxonomy.stages.discover import discover

    labels = discover(ensure_criteria(s), s.cfg, s.runner)
    s.run.write_parquet("stage1_labels.parquet", labels)
    failed = labels.filter(pl.col("status") == "failed")
    return {"criteria": labels.height, "failed": failed.height, "unique_labels": labels["labels"].explode().drop_nulls().n_unique()}


def step_cluster(s: Session) -> dict[str, Any]:
    from taxonomy.stages.cluster import cluster_labels

    embedder = s.embedder()
    result = cluster_labels(s.run.read_parquet("stage1_labels.parquet", "discover"), embedder, s.cfg.cluster)
    s.run.write_parquet("clusters.parquet", result.clusters)
    s.run.write_parquet("criterion_clusters.parquet", result.criterion_clusters)
    s.run.write_npy("label_embeddings.npy", result.embeddings)
    return {"unique_labels": result.clusters.height, "clusters": result.clusters["cluster_id"].n_unique(),
            "method": result.method, "embedder": embedder.name}


def _micro(s: Session) -> list[MicroCapability]:
    return [MicroCapability.model_validate(m) for m in s.run.read_json("micro_capabilities.json", "canonicalize")]


def step_canonicalize(s: Session) -> dict[str, Any]:
    from taxonomy.stages.canonicalize import canonicalize

    micro, notes = canonicalize(
        s.run.read_parquet("clusters.parquet", "cluster"), s.run.read_parquet("criterion_clusters.parquet", "cluster"),
        ensure_criteria(s), s.cfg, s.runner,
    )
    s.run.write_json("micro_capabilities.json", [m.model_dump() for m in micro])
    return {"micro_capabilities": len(micro), "notes": notes}


def micro_centroids(run: RunDir, micro: list[MicroCapability]) -> np.ndarray:
    """Row i is the label-embedding centroid of micro[i]."""
    from taxonomy.stages.cluster import cluster_centroids

    clusters = run.read_parquet("clusters.parquet", "cluster")
    centroids = cluster_centroids(run.read_npy("label_embeddings.npy", "cluster"), clusters["cluster_id"].to_numpy())
    return np.stack([centroids[m.cluster_id] for m in micro])


def step_merge(s: Session) -> dict[str, Any]:
    from taxonomy.stages.merge import merge
    from taxonomy.taxonomy_io import taxonomy_markdown

    micro = _micro(s)
    taxonomy = merge(micro, micro_centroids(s.run, micro), s.cfg, s.runner, corpus=s.cfg.name)
    s.run.write_json("taxonomy.json", taxonomy.model_dump())
    s.run.write_text("taxonomy.md", taxonomy_markdown(taxonomy))
    return {"capabilities": len(taxonomy.capabilities), "content_hash": taxonomy.content_hash, "repairs": taxonomy.repairs}


def step_tag(s: Session, taxonomy_path: Path | None = None) -> dict[str, Any]:
    from taxonomy.stages.tag import tag
    from taxonomy.taxonomy_io import load_taxonomy

    taxonomy = load_taxonomy(taxonomy_path or s.run.need("taxonomy.json", "merge"))
    stage1 = s.run.read_parquet("stage1_labels.parquet") if s.run.has("stage1_labels.parquet") else None
    micro_labels = {member: cap.labels for cap in taxonomy.capabilities for member in cap.members}
    tags = tag(ensure_criteria(s), taxonomy, s.cfg, s.runner, stage1=stage1, micro_labels=micro_labels)
    s.run.write_parquet("stage3_tags.parquet", tags)
    summary = primary_shares(tags)
    s.run.write_text("stage3_summary.md", summary_markdown(summary))
    return {"criteria": tags.height, "failed": tags.filter(pl.col("status") == "failed").height, "taxonomy_hash": taxonomy.content_hash}


def primary_shares(tags: pl.DataFrame) -> pl.DataFrame:
    """The paper's Table 1: capability and its share of criteria as primary tag."""
    ok = tags.filter(pl.col("status") == "ok")
    return (
        ok.group_by("primary").len("n").with_columns(share=pl.col("n") / max(ok.height, 1))
        .rename({"primary": "capability"}).sort(["n", "capability"], descending=[True, False])
    )


def summary_markdown(shares: pl.DataFrame) -> str:
    lines = ["| capability | criteria | share as primary tag |", "|---|---:|---:|"]
    lines += [f"| {r['capability']} | {r['n']} | {100 * r['share']:.1f}% |" for r in shares.iter_rows(named=True)]
    return "\n".join(lines) + "\n"


STEPS: dict[str, Callable[[Session], dict[str, Any]]] = {
    "discover": step_discover, "cluster": step_cluster, "canonicalize": step_canonicalize,
    "merge": step_merge, "tag": step_tag,
}


def run_stage(s: Session, stage: str, **kwargs: Any) -> dict[str, Any]:
    start = time.perf_counter()
    info = STEPS[stage](s, **kwargs)
    info.update(_usage(s, stage))
    info.update(seconds=elapsed(start), finished=now())
    s.run.record(stage, info)
    return info


def run_pipeline(s: Session, *, force_from: str | None = None, on_stage: Callable[[str, dict], None] | None = None) -> None:
    """All stages in order, skipping those whose artifact exists (unless at or after `force_from`)."""
    forced = False
    for stage in STAGES:
        forced = forced or stage == force_from
        if s.run.has(OUTPUTS[stage]) and not forced:
            if on_stage:
                on_stage(stage, {"skipped": True})
            continue
        info = run_stage(s, stage)
        if on_stage:
            on_stage(stage, info)
