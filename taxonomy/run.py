"""A run directory: the only hand-off between stages. Artifacts are written atomically, the
manifest records what ran, and a stage whose artifact is on disk is not run again."""
from __future__ import annotations

import json
import os
import platform
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

import numpy as np
import polars as pl

from taxonomy.config import PipelineConfig
from taxonomy.secrets import redact

STAGES = ("discover", "cluster", "canonicalize", "merge", "tag")
OUTPUTS = {
    "discover": "stage1_labels.parquet",
    "cluster": "clusters.parquet",
    "canonicalize": "micro_capabilities.json",
    "merge": "taxonomy.json",
    "tag": "stage3_tags.parquet",
}
PROMPTS = {"discover": "stage1_discovery.j2", "canonicalize": "stage2_canonicalize.j2", "merge": "stage2_merge.j2", "tag": "stage3_tagging.j2"}


class RunError(ValueError):
    """A run directory that lacks what a stage needs, on one line with the fix."""


def _atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@dataclass
class RunDir:
    path: Path
    manifest: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        self.path.mkdir(parents=True, exist_ok=True)
        if (self.path / "manifest.json").exists():
            self.manifest = json.loads((self.path / "manifest.json").read_text())

    def has(self, name: str) -> bool:
        return (self.path / name).exists()

    def need(self, name: str, stage: str) -> Path:
        if not self.has(name):
            raise RunError(f"{self.path / name}: missing; fix: run `taxonomy {stage} {self.path}` (or `taxonomy run`) first")
        return self.path / name

    def write_parquet(self, name: str, frame: pl.DataFrame) -> None:
        _atomic_write(self.path / name, lambda p: frame.write_parquet(p))

    def read_parquet(self, name: str, stage: str = "run") -> pl.DataFrame:
        return pl.read_parquet(self.need(name, stage))

    def write_json(self, name: str, value: Any) -> None:
        text = redact(json.dumps(value, indent=2, ensure_ascii=False, default=str))
        _atomic_write(self.path / name, lambda p: p.write_text(text, encoding="utf-8"))

    def read_json(self, name: str, stage: str = "run") -> Any:
        return json.loads(self.need(name, stage).read_text(encoding="utf-8"))

    def write_text(self, name: str, text: str) -> None:
        _atomic_write(self.path / name, lambda p: p.write_text(redact(text), encoding="utf-8"))

    def write_npy(self, name: str, array: np.ndarray) -> None:
        _atomic_write(self.path / name, lambda p: np.save(open(p, "wb"), array))

    def read_npy(self, name: str, stage: str = "run") -> np.ndarray:
        return np.load(self.need(name, stage))

    def record(self, stage: str, info: dict[str, Any]) -> None:
        self.manifest.setdefault("stages", {})[stage] = info
        self.save_manifest()

    def save_manifest(self) -> None:
        self.write_json("manifest.json", self.manifest)


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("rubric-taxonomy", "google-genai", "polars", "scikit-learn", "numpy", "pydantic", "openai"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def elapsed(start: float) -> float:
    return round(time.perf_counter() - start, 3)


def default_run_dir(cfg: PipelineConfig, backend: str, model: str, suffix: str = "") -> Path:
    """Deterministic per (pipeline, backend, model), so re-running the same command resumes it.

    `suffix` keeps other jobs over the same corpus (tagging against a frozen taxonomy) out of the run's place."""
    slug = "offline" if backend == "offline" else f"{backend}-{model}".replace("/", "_").replace(":", "_")
    if cfg.corpus.limit is not None:  # a smoke run must not leave its small snapshot in the full run's place
        slug += f"-first{cfg.corpus.limit}"
    return cfg.resolve(cfg.output.dir) / cfg.name / (slug + suffix)
