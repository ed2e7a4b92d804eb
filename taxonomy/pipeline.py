"""Stage order over a run directory. Each step reads its inputs from files and writes its own,
so any stage can be re-run alone, and a killed run resumes from what is on disk.

A stage is reused only when its files exist and its fingerprint (provenance.py) is unchanged;
otherwise it and everything after it are recomputed (the LLM cache still answers every unchanged
request, so nothing is paid twice)."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import polars as pl

from taxonomy.backend import Backend, choose_backend
from taxonomy.config import MergeConfig, PipelineConfig
from taxonomy.corpus import load_corpus
from taxonomy.embed.choose import choose_embedder
from taxonomy.llm.cache import Cache
from taxonomy.llm.providers import resolve_provider_name
from taxonomy.merge.bounds import BOUND_KEYS, corpus_bounds
from taxonomy.merge.siblings import co_label_counts, unbounded_cotagged
from taxonomy.prompts import template_hash
from taxonomy.provenance import STAGE_INPUTS, fingerprint, why_stale
from taxonomy.run import (
    CLUSTERS,
    CRITERIA,
    CRITERION_CLUSTERS,
    LABELS,
    LABEL_EMBEDDINGS,
    MICRO,
    PROMPTS,
    REJECTED,
    REJECTED_MD,
    STABILITY,
    STAGES,
    TAGS,
    TAGS_SUMMARY,
    TAXONOMY,
    TAXONOMY_MD,
    USAGE_KEYS,
    RunDir,
    RunError,
    default_run_dir,
    elapsed,
    now,
    versions,
)
from taxonomy.schemas import MicroCapability
from taxonomy.shares import primary_shares, summary_markdown
from taxonomy.taxonomy_io import load_taxonomy, taxonomy_markdown

# lazy: stages/cluster.py, merge.py and stability.py load scikit-learn (about 1 s); the steps that use them import
# them, so an LLM session that runs none of those steps (guidance, export, lint's review) starts without it.


@dataclass
class Session:
    cfg: PipelineConfig
    run: RunDir
    backend_name: str  # "offline", "gemini", "vertex" or "openai"
    backend: Backend  # what answers the stages, chosen once when the session opens
    # True when the config came from a pipeline TOML: the corpus is re-read and re-hashed once per
    # session, so a grown or edited corpus is noticed. A session over a run directory uses its snapshot.
    from_source: bool = True
    # The merge bounds as configured, before the corpus narrowed them (merge/bounds.py), and why it did: said
    # once, by the merge stage.
    configured_merge: MergeConfig | None = None
    bounds_note: str | None = None
    _corpus_checked: bool = field(default=False, repr=False)

    @property
    def runner(self):
        """The LLM backend's runner (the stages never test it: they ask `backend`)."""
        return getattr(self.backend, "runner", None)

    @property
    def cache(self) -> Cache | None:
        return self.backend.cache

    def notice(self) -> str:
        return self.backend.notice(self.cfg)

    def embedder(self):
        return choose_embedder(
            self.cfg,
            self.backend_name,
            self.runner,
            self.cache,
            on_call=lambda n, tokens: self.run.log_usage("cluster", "embed", tokens, 0),
        )

    def corpus_hash(self) -> str:
        recorded = (self.run.manifest.get("corpus") or {}).get("content_hash")
        return recorded or frame_hash(ensure_criteria(self))


def open_session(
    cfg: PipelineConfig,
    *,
    provider: str | None = None,
    run_dir: Path | None = None,
    show_progress: bool = True,
    credentials: Any = None,
    run_suffix: str = "",
    from_source: bool = True,
    load_now: bool = False,
) -> Session:
    """`from_source`: the corpus is re-read (once) when a stage needs it, so a changed corpus is noticed.
    `load_now`: read it before the manifest records this session's settings, so a corpus that fails to
    load changes nothing on disk (the CLI's commands over a pipeline TOML)."""
    backend_name = resolve_provider_name(provider or cfg.llm.provider)
    if run_dir is None:
        run_dir = default_run_dir(cfg, backend_name, cfg.llm.model, run_suffix)
    # The backend first: a missing key or server URL stops here, before the run folder exists.
    backend = choose_backend(
        cfg,
        backend_name,
        credentials=credentials,
        show_progress=show_progress,
        batch_dir=Path(run_dir),
        on_paid=lambda stage, c, kind="generate": run.log_usage(
            stage, kind, c.prompt_tokens, c.output_tokens, c.cached_tokens
        ),
    )
    run = RunDir(run_dir)
    owner = run.manifest.get("pipeline")
    if owner is not None and owner != cfg.name:
        raise RunError(
            f"{run.path}: holds a run of pipeline {owner!r}, not {cfg.name!r}; "
            f"fix: pass another --run-dir, or leave it out to use outputs/{cfg.name}/"
        )
    session = Session(cfg, run, backend_name, backend, from_source=from_source)
    if from_source and load_now:  # a corpus that does not load stops here, before the manifest takes the new settings
        ensure_criteria(session)
    run.manifest.update(
        {
            "pipeline": cfg.name,
            "backend": backend_name,
            "model": backend.model,
            "versions": versions(),
            "settings": json.loads(cfg.model_dump_json(exclude={"base_dir"})),
            "config_dir": str(cfg.base_dir),
            "seeds": {"cluster": cfg.cluster.seed},
            "prompt_hashes": {stage: template_hash(name) for stage, name in PROMPTS.items()},
        }
    )
    run.manifest.setdefault("created", now())
    run.save_manifest()
    return session


def frame_hash(frame: pl.DataFrame) -> str:
    """Content hash of a table: same rows and columns, same hash, whatever file it came from."""
    return hashlib.sha256(frame.write_ndjson().encode()).hexdigest()[:16]


def ensure_criteria(s: Session) -> pl.DataFrame:
    """The corpus is snapshotted into the run so later stages never depend on the source files.

    From a pipeline TOML the source is re-read once per session: when its content changed, the
    snapshot is replaced (and the stages' fingerprints then say what must be recomputed)."""
    if s.from_source and not s._corpus_checked:
        corpus = load_corpus(s.cfg.corpus, s.cfg.base_dir)
        if corpus.frame.is_empty():
            where = f"{s.cfg.base_dir}: key corpus" if s.cfg.corpus.limit is None else "--limit / corpus.limit"
            raise RunError(
                f"{where}: the corpus has no criteria left after filtering; fix: point "
                "[corpus] at a file with criteria, or relax papers/limit/on_empty"
            )
        digest = frame_hash(corpus.frame)
        recorded = (s.run.manifest.get("corpus") or {}).get("content_hash")
        if not s.run.has(CRITERIA) or recorded != digest:
            s.run.write_parquet(CRITERIA, corpus.frame)
            s.run.manifest["corpus"] = {
                "n_criteria": corpus.frame.height,
                "n_tasks": corpus.frame["task_id"].n_unique(),
                "warnings": corpus.warnings,
                "content_hash": digest,
            }
            s.run.save_manifest()
        s._corpus_checked = True
    criteria = s.run.read_parquet(CRITERIA, "discover")
    if s.configured_merge is None:
        _bound_merge(s, criteria)
    return criteria


def _bound_merge(s: Session, criteria: pl.DataFrame) -> None:
    """The merge bounds the corpus's distinct criteria can meet, set once a session has its corpus (before any
    fingerprint is taken) and recorded as the run's merge settings: both backends merge under them, and the
    tagger, `edit` and the report read the same ones."""
    s.configured_merge = s.cfg.merge
    s.cfg.merge, s.bounds_note = corpus_bounds(s.cfg.merge, criteria["text"].to_list())
    if "settings" in s.run.manifest:
        s.run.manifest["settings"]["merge"] = json.loads(s.cfg.merge.model_dump_json())


def _merge_config(s: Session, micro: list[MicroCapability]) -> tuple[PipelineConfig, str | None]:
    """The session's config, its merge bounds narrowed where Stage 2 found fewer kinds of check than the corpus
    has distinct criteria (the stage records them; `recorded_bounds` reads them back), and the merge's note."""
    texts = ensure_criteria(s)["text"].to_list()
    bounds, note = corpus_bounds(s.configured_merge or s.cfg.merge, texts, [m.n_criteria for m in micro])
    if all(getattr(bounds, k) == getattr(s.cfg.merge, k) for k in BOUND_KEYS):
        return s.cfg, s.bounds_note
    return s.cfg.model_copy(
        update={"merge": bounds.model_copy(update={"accept_violations": s.cfg.merge.accept_violations})}
    ), note


def stage_usage(s: Session, stage: str) -> dict[str, Any]:
    """Paid calls and tokens summed over every process that worked on this run (the run's ledger),
    embeddings included; cache hits, retries and re-asks are this process's."""
    paid = s.run.usage_totals().get(stage)
    here = s.backend.usage.get(stage)
    if paid is None and here is None:
        return {}
    out: dict[str, Any] = here.as_dict(s.cfg.llm.prices) if here is not None else {}
    out.pop("seconds", None)
    paid = paid or {}
    prices = s.cfg.llm.prices
    out.update(
        new_calls=here.calls if here is not None else 0,  # paid by this process; `calls` counts every process
        calls=paid.get("calls", 0),
        prompt_tokens=paid.get("prompt_tokens", 0),
        output_tokens=paid.get("output_tokens", 0),
        cost_usd=round(prices.cost(paid), 6),  # cached prompt tokens at the cached rate
    )
    for key in USAGE_KEYS[3:]:  # the counts besides calls and tokens, where any were paid
        if paid.get(key) or key in out:
            out[key] = paid.get(key, 0)
    return out


def step_discover(s: Session) -> dict[str, Any]:
    criteria = ensure_criteria(s)
    labels = s.backend.discover(criteria, s.cfg)
    s.run.write_parquet(LABELS, labels)
    failed = labels.filter(pl.col("status") == "failed")
    notes = s.backend.brief_notes(criteria, s.cfg)
    return {
        "criteria": labels.height,
        "failed": failed.height,
        "unique_labels": labels["labels"].explode().drop_nulls().n_unique(),
        "notes": notes,
    }


def step_cluster(s: Session) -> dict[str, Any]:
    from taxonomy.stages.cluster import cluster_labels

    stage1 = s.run.read_parquet(LABELS, "discover")
    embedder = s.embedder()
    if stage1["labels"].explode().drop_nulls().is_empty():
        raise RunError(
            f"{s.run.path / LABELS}: no criterion got a valid label "
            f"({stage1.height} failed), so there is nothing to cluster; "
            "fix: read the problems column, and check the [labels] settings and the model"
        )
    embedder = s.backend.label_embedder(ensure_criteria(s), stage1, s.cfg, embedder)
    # The offline backend's labels are already its fine kinds of check, one micro-cluster each.
    criteria = None if s.backend.labels_are_kinds else ensure_criteria(s)
    result = cluster_labels(stage1, embedder, s.cfg.cluster, scaled=s.backend.scales_k, criteria=criteria)
    s.run.write_parquet(CLUSTERS, result.clusters)
    s.run.write_parquet(CRITERION_CLUSTERS, result.criterion_clusters)
    s.run.write_npy(LABEL_EMBEDDINGS, result.embeddings)
    return {
        "unique_labels": result.clusters.height,
        "clusters": result.clusters["cluster_id"].n_unique(),
        "method": result.method,
        "embedder": embedder.name,
        "notes": [result.k_note],
    }


def _micro(s: Session) -> list[MicroCapability]:
    return [MicroCapability.model_validate(m) for m in s.run.read_json(MICRO, "canonicalize")]


def step_canonicalize(s: Session) -> dict[str, Any]:
    micro, notes = s.backend.canonicalize(
        s.run.read_parquet(CLUSTERS, "cluster"),
        s.run.read_parquet(CRITERION_CLUSTERS, "cluster"),
        ensure_criteria(s),
        s.cfg,
        s.run.read_parquet(LABELS, "discover"),
        s.run.read_npy(LABEL_EMBEDDINGS, "cluster"),
    )
    s.run.write_json(MICRO, [m.model_dump() for m in micro])
    return {"micro_capabilities": len(micro), "notes": notes}


def micro_centroids(run: RunDir, micro: list[MicroCapability]) -> np.ndarray:
    """Row i is the label-embedding centroid of micro[i]."""
    from taxonomy.stages.cluster import cluster_centroids

    clusters = run.read_parquet(CLUSTERS, "cluster")
    centroids = cluster_centroids(run.read_npy(LABEL_EMBEDDINGS, "cluster"), clusters["cluster_id"].to_numpy())
    return np.stack([centroids[m.cluster_id] for m in micro])


def micro_co_labels(run: RunDir, micro: list[MicroCapability]) -> np.ndarray:
    """[i, j]: criteria whose Stage 1 labels fall in both micro[i] and micro[j] (sibling choice)."""
    return co_label_counts(
        run.read_parquet(LABELS, "discover"),
        run.read_parquet(CLUSTERS, "cluster"),
        {m.cluster_id: i for i, m in enumerate(micro)},
        len(micro),
    )


def step_merge(s: Session) -> dict[str, Any]:
    from taxonomy.stages.merge import constraint_failure

    micro = _micro(s)
    centroids, co_micro = micro_centroids(s.run, micro), micro_co_labels(s.run, micro)
    cfg, note = _merge_config(s, micro)
    taxonomy = s.backend.merge(
        micro, centroids, cfg, s.cfg.name, co_micro, ensure_criteria(s), s.run.read_parquet(LABELS, "discover")
    )
    if taxonomy.violations and not s.cfg.merge.accept_violations:
        # Kept for inspection under a name no later stage reads; the stage fails.
        s.run.write_json(REJECTED, taxonomy.model_dump())
        s.run.write_text(REJECTED_MD, taxonomy_markdown(taxonomy))
        raise constraint_failure(taxonomy, str(s.run.path / REJECTED_MD))
    for stale in (REJECTED, REJECTED_MD):
        (s.run.path / stale).unlink(missing_ok=True)
    s.run.write_json(TAXONOMY, taxonomy.model_dump())
    s.run.write_text(TAXONOMY_MD, taxonomy_markdown(taxonomy))
    return {
        "capabilities": len(taxonomy.capabilities),
        "content_hash": taxonomy.content_hash,
        "repairs": taxonomy.repairs,
        "violations": taxonomy.violations,
        "notes": [note] if note else [],
        **({"bounds": cfg.merge.model_dump(include=set(BOUND_KEYS))} if cfg is not s.cfg else {}),
    }


def step_tag(s: Session, taxonomy_path: Path | None = None) -> dict[str, Any]:
    source = Path(taxonomy_path or s.run.need(TAXONOMY, "merge"))
    taxonomy = load_taxonomy(source)
    stage1 = s.run.read_parquet(LABELS) if s.run.has(LABELS) else None
    micro_labels = {member: cap.labels for cap in taxonomy.capabilities for member in cap.members}
    criteria = ensure_criteria(s)
    # the run that holds the taxonomy
    tags = s.backend.tag(criteria, taxonomy, s.cfg, stage1, micro_labels, folder=source.parent)
    s.run.write_parquet(TAGS, tags)
    summary = primary_shares(tags, criteria)
    s.run.write_text(TAGS_SUMMARY, summary_markdown(summary))
    notes = s.backend.brief_notes(criteria, s.cfg)
    # the run's own taxonomy: its table gives the tags' shares, and how sure the run is of each capability
    if source.resolve() == (s.run.path / TAXONOMY).resolve():
        taxonomy, said = record_stability(s, taxonomy, tags)
        notes += said
        s.run.write_text(TAXONOMY_MD, taxonomy_markdown(taxonomy, summary))
    # Stage 3 co-tagging is the other half of "nearest sibling": a pair tagged together often must have a boundary.
    notes += unbounded_cotagged(
        tags, taxonomy.names(), [c.non_examples for c in taxonomy.capabilities], s.cfg.tag.cotag_min_share
    )
    return {
        "criteria": tags.height,
        "failed": tags.filter(pl.col("status") == "failed").height,
        "taxonomy_hash": taxonomy.content_hash,
        "notes": notes,
    }


def record_stability(s: Session, taxonomy, tags: pl.DataFrame):
    """The capabilities' stability figures and the criteria's agreement (stages/stability.py), written into
    taxonomy.json and STABILITY; where they cannot be computed, any older ones are removed, never left standing.
    Returns the taxonomy as written and the line that sums the figures up."""
    from taxonomy.stages.stability import resample_stability, summary_note

    result = None
    if s.cfg.stability.resamples and all(s.run.has(n) for n in (LABELS, CLUSTERS, LABEL_EMBEDDINGS)):
        result = resample_stability(
            s.run.read_parquet(LABELS, "discover"),
            s.run.read_parquet(CLUSTERS, "cluster"),
            s.run.read_npy(LABEL_EMBEDDINGS, "cluster"),
            tags,
            taxonomy.names(),
            s.cfg.cluster,
            s.cfg.stability,
            scaled=s.backend.scales_k,
        )
    out = taxonomy.model_copy(deep=True)
    out.stability = None if result is None else result.run.model_copy(update={"membership": out.membership_hash()})
    for cap in out.capabilities:
        cap.stability = None if result is None else result.figures[cap.name]
    if result is None:
        (s.run.path / STABILITY).unlink(missing_ok=True)
    else:
        s.run.write_parquet(STABILITY, result.agreement)
    s.run.write_json(TAXONOMY, out.model_dump())
    if result is not None:
        return out, [summary_note(result.figures, out.stability)]
    off = "[stability] resamples = 0" if not s.cfg.stability.resamples else "too few labelled, tagged criteria"
    return out, [f"stability figures not computed: {off}"]


def stability_stale(s: Session) -> bool:
    """Whether the stability figures on disk are not those this run's settings, taxonomy and tags give."""
    from taxonomy.stages.stability import tags_partition_hash

    if not (s.run.has(TAXONOMY) and s.run.has(TAGS)):
        return False
    meta, want = load_taxonomy(s.run.path / TAXONOMY).stability, s.cfg.stability
    if meta is None or not want.resamples:
        return meta is not None or bool(want.resamples)
    taxonomy = load_taxonomy(s.run.path / TAXONOMY)
    return (
        (meta.resamples, meta.seed, meta.fraction, meta.max_criteria)
        != (want.resamples, want.seed, want.fraction, want.max_criteria)
        or meta.membership != taxonomy.membership_hash()
        or meta.tags != tags_partition_hash(s.run.read_parquet(TAGS, "tag"))
    )


def refresh_stability(s: Session) -> list[str]:
    """Recompute the stability figures alone (the tags are current), and taxonomy.md with them."""
    tags = s.run.read_parquet(TAGS, "tag")
    taxonomy, notes = record_stability(s, load_taxonomy(s.run.path / TAXONOMY), tags)
    s.run.write_text(TAXONOMY_MD, taxonomy_markdown(taxonomy, primary_shares(tags, ensure_criteria(s))))
    return notes


# Each declared stage's step (stagedefs.py), keyed by its name: it reads the stage's inputs, asks the session's
# backend (LLM or key-less) for the stage and writes the stage's files.
STEPS: dict[str, Callable[[Session], dict[str, Any]]] = {
    "discover": step_discover,
    "cluster": step_cluster,
    "canonicalize": step_canonicalize,
    "merge": step_merge,
    "tag": step_tag,
}


def _tag_taxonomy_hash(s: Session, taxonomy_path: Path | None) -> str | None:
    path = taxonomy_path or (s.run.path / TAXONOMY)
    return load_taxonomy(path).content_hash if Path(path).is_file() else None


def require_inputs(s: Session, stage: str) -> None:
    """A single-stage command never builds on an input that is missing or older than its own inputs."""
    for up in STAGE_INPUTS[stage]:
        if stage == "tag" and up == "merge" and not (s.run.manifest.get("stages") or {}).get("merge"):
            continue  # tagging against a frozen or hand-made taxonomy
        reason = why_stale(s, up, _tag_taxonomy_hash(s, None) if up == "tag" else None)
        if reason is not None and reason != "not run yet":
            raise RunError(
                f"{s.run.path}: stage {up} is out of date ({reason}), so {stage} would build on stale input; "
                f"fix: run `taxonomy run` on the pipeline (or `taxonomy {up} {s.run.path}` first)"
            )


def run_stage(s: Session, stage: str, *, check_inputs: bool = False, **kwargs: Any) -> dict[str, Any]:
    start = time.perf_counter()
    ensure_criteria(s)
    if check_inputs:
        require_inputs(s, stage)
    taxonomy_hash = _tag_taxonomy_hash(s, kwargs.get("taxonomy_path")) if stage == "tag" else None
    digest, parts = fingerprint(s, stage, taxonomy_hash)
    info = STEPS[stage](s, **kwargs)
    info.update(stage_usage(s, stage))
    info.update(seconds=elapsed(start), finished=now(), fingerprint=digest, fingerprint_parts=parts)
    s.run.manifest["usage"] = total_usage(s)
    s.run.record(stage, info)
    return info


def total_usage(s: Session) -> dict[str, Any]:
    """The whole run's paid usage: every stage (and use) of every process, embeddings included."""
    totals = dict.fromkeys(USAGE_KEYS, 0)
    for paid in s.run.usage_totals().values():
        for key in totals:
            totals[key] += paid.get(key, 0)
    return {**totals, "cost_usd": round(s.cfg.llm.prices.cost(totals), 6)}


def run_pipeline(
    s: Session, *, force_from: str | None = None, on_stage: Callable[[str, dict], None] | None = None
) -> None:
    """All stages in order. A stage is reused when its files are on disk and its fingerprint is
    unchanged; once one stage is rebuilt (or forced), every stage after it is rebuilt too."""
    ensure_criteria(s)
    rebuild_from: str | None = None
    for stage in STAGES:
        if stage == force_from and rebuild_from is None:
            rebuild_from = stage
        reason = why_stale(s, stage, _tag_taxonomy_hash(s, None) if stage == "tag" else None)
        if reason is None and rebuild_from is None:
            if on_stage:
                on_stage(stage, {"skipped": True})
            continue
        if rebuild_from is None:
            rebuild_from = stage
            if reason != "not run yet" and on_stage:
                on_stage(stage, {"stale": reason})
        info = run_stage(s, stage)
        if on_stage:
            on_stage(stage, info)
    if rebuild_from is None and stability_stale(s):  # only the [stability] settings (or a re-tag elsewhere) changed
        notes = refresh_stability(s)
        if on_stage:
            on_stage("stability", {"notes": notes})
