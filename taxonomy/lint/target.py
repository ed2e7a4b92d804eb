"""What `taxonomy lint TARGET` reads: the criteria of a corpus file, a pipeline TOML or a run
directory (with that run's tags), and where each criterion sits in its file."""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import polars as pl

from taxonomy.config import PipelineConfig, load_config
from taxonomy.corpus import load_corpus
from taxonomy.corpus.config import show_path
from taxonomy.pipeline_toml import corpus_config, detect
from taxonomy.run import CRITERIA, TAGS, RunDir, config_from_run
from taxonomy.targets import is_run

_SOURCE = re.compile(r"^(?P<file>.*?)(?::(?P<line>\d+))?(?:#(?P<pointer>.*))?$")


@dataclass
class Target:
    frame: pl.DataFrame
    cfg: PipelineConfig
    run_dir: Path | None = None
    capability: dict[str, str] = field(default_factory=dict)  # criterion_id -> primary capability, from a run's tags

    def corpus_root(self) -> Path:
        path = Path(self.cfg.corpus.path).expanduser()
        path = path if path.is_absolute() else Path(self.cfg.base_dir) / path
        return path if path.is_dir() else path.parent

    def locations(self, wanted: set[str] | None = None) -> dict[str, dict]:
        """criterion_id -> {"file", "line", "pointer"} for the `wanted` criteria (all when None): the file as
        it is on disk (rubric.json.gz when the loader read that), its own line, found for JSON nodes by their
        text, and the node's JSON pointer."""
        root = self.corpus_root()
        frame = self.frame if wanted is None else self.frame.filter(pl.col("criterion_id").is_in(list(wanted)))
        sources = frame["source"].to_list() if "source" in frame.columns else [""] * frame.height
        shown: dict[str, tuple] = {}  # a file's shown name and path once, not once per criterion
        out = {}
        for cid, text, source in zip(frame["criterion_id"].to_list(), frame["text"].to_list(), sources):
            m = _SOURCE.match(source or "")
            name = m["file"] if m and m["file"] else None
            if name is not None and name not in shown:
                file = _on_disk(root / name)
                shown[name] = (file, show_path(file))
            file, show = shown[name] if name is not None else (None, None)
            line = int(m["line"]) if m and m["line"] and not m["file"].endswith(".parquet") else None
            pointer = m["pointer"] if m and m["pointer"] is not None else None
            if file is not None and line is None and pointer is not None:
                line = _line_of(str(file), text or "")
            out[cid] = {"file": show, "line": line, "pointer": pointer}
        return out


def load_target(target: Path) -> Target:
    """A run directory, a pipeline TOML, or a corpus file or folder (detected), told apart as every command does."""
    if is_run(target):
        return _from_run(target)
    if target.suffix.lower() == ".toml":
        cfg = load_config(target)
    else:
        cfg = corpus_config(detect(target))
    cfg.corpus.on_duplicate = "keep"  # a repeat is a finding to list, not a row to collapse
    return Target(load_corpus(cfg.corpus, cfg.base_dir).frame, cfg)


def _from_run(run_dir: Path) -> Target:
    run = RunDir(run_dir)
    cfg = config_from_run(run_dir)
    frame = run.read_parquet(CRITERIA, "run")
    tags = run.read_parquet(TAGS, "tag") if run.has(TAGS) else None
    return Target(frame, cfg, run_dir, primary_capability(tags))


def primary_capability(tags: pl.DataFrame | None) -> dict[str, str]:
    """Each criterion's primary capability, from a run's Stage 3 tags (none before Stage 3)."""
    if tags is None or "primary" not in tags.columns:
        return {}
    return {c: p for c, p in zip(tags["criterion_id"].to_list(), tags["primary"].to_list()) if p}


def _on_disk(path: Path) -> Path:
    """A loader names the logical file (papers/x/rubric.json); the one on disk may be its .gz."""
    gz = path.with_name(path.name + ".gz")
    return gz if not path.exists() and gz.exists() else path


@lru_cache(maxsize=64)
def _file_text(path: str) -> str:
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rt", encoding="utf-8") as f:
                return f.read()
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, EOFError):  # unreadable: no line, the file and pointer are still named
        return ""


def _line_of(path: str, text: str) -> int | None:
    content = _file_text(path)
    at = content.find(json.dumps(text, ensure_ascii=False)[1:-1]) if text else -1
    if at < 0:
        at = content.find(json.dumps(text)[1:-1]) if text else -1
    return content.count("\n", 0, at) + 1 if at >= 0 else None
