"""Provenance: what each stage of a run was built from, and why a stage on disk is stale.

Every stage records a fingerprint of what it was built from (the corpus snapshot's content hash, the
config sections it reads, its prompt template, the backend and model, and its inputs' fingerprints).
A stage is reused only when its files exist and that fingerprint is unchanged."""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from taxonomy.config import PipelineConfig
from taxonomy.embed.choose import embedding_choice
from taxonomy.prompts import template_hash
from taxonomy.run import PROMPTS, STAGE_FILES, RunDir
from taxonomy.stagedefs import DECLARED

# Derived from the declarations (stagedefs.py): the config a stage reads ("section" or "section.key"), and the
# stages whose outputs it reads.
STAGE_CONFIG = {d.name: d.config for d in DECLARED}
STAGE_INPUTS = {d.name: d.inputs for d in DECLARED}


class Built(Protocol):
    """What provenance reads of a session (pipeline.Session)."""

    cfg: PipelineConfig
    run: RunDir
    backend_name: str
    backend: Any

    def corpus_hash(self) -> str: ...


def _setting(cfg: PipelineConfig, dotted: str) -> Any:
    section, _, key = dotted.partition(".")
    value = json.loads(getattr(cfg, section).model_dump_json())
    return value[key] if key else value


@lru_cache(maxsize=1)
def code_hash() -> str:
    """The project's own source. Where no model runs, the code is the model: a run built by another version of
    the offline backend (or of the local embedder, or of the code around them) is not current, as one built
    by another model is not. Offline stages are cheap to rebuild, so any change counts."""
    root = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for source in sorted(root.rglob("*.py")):
        digest.update(source.relative_to(root).as_posix().encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()[:16]


def _backend_identity(s: Built, stage: str) -> dict[str, Any]:
    if stage == "cluster":  # the embedder, not the LLM, makes the clusters
        choice = embedding_choice(s.cfg, s.backend_name)
        if choice == "local":
            return {"embedder": "local", "code": code_hash()}
        if choice == "openai":
            return {"embedder": "openai", "base_url": s.cfg.embedding.base_url or s.cfg.llm.base_url}
        return {"embedder": choice, "backend": s.backend_name}
    return s.backend.identity(s.cfg)


def fingerprint(s: Built, stage: str, taxonomy_hash: str | None = None) -> tuple[str, dict[str, Any]]:
    """(fingerprint, its parts): what `stage` would be built from right now."""
    stages = s.run.manifest.get("stages") or {}
    parts: dict[str, Any] = {
        "corpus": s.corpus_hash(),
        "config": {key: _setting(s.cfg, key) for key in STAGE_CONFIG[stage]},
        "prompt": template_hash(PROMPTS[stage]) if stage in PROMPTS else None,
        "backend": _backend_identity(s, stage),
        "inputs": {up: (stages.get(up) or {}).get("fingerprint") for up in STAGE_INPUTS[stage]},
    }
    if stage == "tag":
        parts["taxonomy"] = taxonomy_hash
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return digest, parts


def _diff(old: Any, new: Any, where: str) -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        return [
            d
            for k in sorted(set(old) | set(new))
            for d in _diff(old.get(k), new.get(k), f"{where}.{k}" if where else k)
        ]
    if old == new:
        return []
    show = lambda v: json.dumps(v)[:40]  # noqa: E731
    return [f"{where} {show(old)} -> {show(new)}"]


def why_stale(s: Built, stage: str, taxonomy_hash: str | None = None) -> str | None:
    """None when the stage's files are on disk and were built from what it would read now; else why not."""
    missing = [name for name in STAGE_FILES[stage] if not s.run.has(name)]
    record = (s.run.manifest.get("stages") or {}).get(stage)
    if not isinstance(record, dict) and not missing:
        return "its files are on disk but the manifest records no such stage (an interrupted run); rebuilding them"
    if not isinstance(record, dict):
        return "not run yet"
    if missing:
        return f"{', '.join(missing)} missing"
    digest, parts = fingerprint(s, stage, taxonomy_hash)
    if record.get("fingerprint") == digest:
        return None
    old = record.get("fingerprint_parts")
    if not isinstance(old, dict):
        return "no fingerprint recorded (made by an older version of rubric-taxonomy)"
    reasons = []
    if old.get("corpus") != parts["corpus"]:
        n = (s.run.manifest.get("corpus") or {}).get("n_criteria")
        reasons.append(f"the corpus changed (content hash {old.get('corpus')} -> {parts['corpus']}, now {n} criteria)")
    reasons += [f"config {d}" for d in _diff(old.get("config"), parts["config"], "")]
    if old.get("prompt") != parts["prompt"]:
        reasons.append(f"prompt template {PROMPTS.get(stage)} changed")
    reasons += [f"backend {d}" for d in _diff(old.get("backend"), parts["backend"], "")]
    reasons += [
        f"its input `{up}` was rebuilt"
        for up in STAGE_INPUTS[stage]
        if (old.get("inputs") or {}).get(up) != parts["inputs"].get(up)
    ]
    if old.get("taxonomy") != parts.get("taxonomy"):
        reasons.append(f"taxonomy {old.get('taxonomy')} -> {parts.get('taxonomy')}")
    return "; ".join(reasons) or "fingerprint changed"
