"""A run directory: the only hand-off between stages. Artifacts are written atomically with the
user's umask, the manifest records what ran and from what (fingerprints), and a damaged artifact
is reported on one line instead of a traceback."""

from __future__ import annotations

import errno
import json
import os
import platform
import re
import tempfile
import threading
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
from taxonomy.stagedefs import (  # noqa: F401 - the stages' files are part of the run's catalog
    CLUSTERS,
    CRITERION_CLUSTERS,
    DECLARED,
    LABEL_EMBEDDINGS,
    LABELS,
    MICRO,
    TAGS,
    TAXONOMY,
    TAXONOMY_MD,
)

# The catalog: every file of a run is named once, and every other module uses these names. The files the stages
# write are named in stagedefs.py, beside the stages' declarations; the rest here.
CRITERIA = "criteria.parquet"  # the corpus snapshot, written before Stage 1 and read by every stage
# a merge that broke its constraints, kept for inspection under a name no stage reads
REJECTED = "taxonomy.rejected.json"
REJECTED_MD = "taxonomy.rejected.md"
TAGS_SUMMARY = "stage3_summary.md"
# Per criterion, the share of resamples in which it landed in its primary capability (stages/stability.py);
# written with the tags, beside the capabilities' figures in taxonomy.json.
STABILITY = "stage3_stability.parquet"
MANIFEST = "manifest.json"
PIPELINE_TOML = "pipeline.toml"  # the TOML a run over a bare corpus file was made with
TAGGER = "tagger.npz"  # the offline backend's tagger, fitted on the run's corpus
DISTILLED = "distilled.joblib"  # `taxonomy distill`'s model
REPORT = "report.html"
# Derived from the declarations: the stage order, the files each stage writes, the prompt each one sends.
STAGES = tuple(d.name for d in DECLARED)
STAGE_FILES = {d.name: d.files for d in DECLARED}
PROMPTS = {d.name: d.prompt for d in DECLARED if d.prompt is not None}
# Every artifact a reader parses (markdown is only shown) and the stage a damaged one sends the user back to.
ARTIFACTS = {
    CRITERIA: "discover",
    STABILITY: "tag",
    **{name: stage for stage, names in STAGE_FILES.items() for name in names if not name.endswith(".md")},
}
# Bumped when the run layout or provenance changes; a run made by a newer tool is refused.
RUN_FORMAT = 2


class RunError(ValueError):
    """A run directory that lacks what a stage needs, on one line with the fix."""


_UMASK_LOCK = threading.Lock()
_LEDGER_LOCK = threading.Lock()
LEDGER = "usage.jsonl"  # one line per paid call, appended by every process that works on the run
USAGE_KEYS = (
    "calls",
    "prompt_tokens",
    "output_tokens",
    "batch_calls",
    "batch_prompt_tokens",
    "batch_output_tokens",
    "embed_calls",
    "embed_tokens",
    "cached_prompt_tokens",
    "batch_cached_prompt_tokens",
    "cache_tokens",
    "cache_token_seconds",
)


def user_mode() -> int:
    """The mode a plain `open()` would give a new file: 0666 minus the user's umask."""
    with _UMASK_LOCK:  # reading the umask means setting it; keep other threads out meanwhile
        mask = os.umask(0o022)
        os.umask(mask)
    return 0o666 & ~mask


def apply_umask(path: str | Path) -> None:
    """mkstemp files are 0600; an artifact must be as readable as any file the user writes."""
    os.chmod(path, user_mode())


def _atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise unwritable(exc, path) or exc from None
    os.close(fd)
    try:
        write(Path(tmp))
        apply_umask(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        raise unwritable(exc, path) or exc from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


# The file system's refusals: the user's setup to fix. Any other OSError is a bug and stays a traceback.
_REFUSED = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EISDIR, errno.ENOSPC, errno.EDQUOT}
PROCESS_TIMING = ("totals",)  # manifest keys that say how long this process took, not what the run holds
_TEMPORARY = re.compile(r"^\.(.+)\.[^.]+\.tmp$")  # an atomic write's temporary file: ".NAME.RANDOM.tmp"


def unwritable(exc: OSError, path: str | Path | None = None) -> RunError | None:
    """A write the file system refused, on one line: which file, why, and the fix. Given `path` (the file being
    written), any OSError is such a refusal; without it, only the refusals in _REFUSED are, and None says the
    error is something else. Writes are atomic, so whatever was written before is whole and unchanged."""
    if exc.errno not in _REFUSED and path is None:
        return None
    named = path or exc.filename2 or exc.filename
    target = Path(named) if named else Path(".")
    if _TEMPORARY.match(target.name):
        target = target.with_name(_TEMPORARY.match(target.name)[1])
    # The folder to fix is the nearest that exists: a run folder not made yet cannot be the one refusing.
    folder = next((p for p in target.parents if p.is_dir()), target.parent)
    folder = folder.resolve() if str(folder) == "." else folder
    elsewhere = "or work in a folder you can write: --run-dir, --out or output.dir in the pipeline config"
    if exc.errno == errno.ENOTDIR:
        blocker = next((p for p in [target, *target.parents] if p.exists() and not p.is_dir()), folder)
        why, fix = f"{blocker} is a file, not a folder", f"move {blocker} away, {elsewhere}"
    elif exc.errno == errno.EISDIR:
        why, fix = "a folder is in the place of this file", f"move that folder away, {elsewhere}"
    elif exc.errno in (errno.ENOSPC, errno.EDQUOT):
        why, fix = "no space left on the device (or over quota)", f"free some space, {elsewhere}"
    elif exc.errno == errno.EROFS:
        why, fix = "the file system is read-only", elsewhere.removeprefix("or ")
    elif exc.errno in (errno.EACCES, errno.EPERM):
        why, fix = "permission denied", f"make {folder} writable (`chmod u+w {folder}`), {elsewhere}"
    else:
        why, fix = exc.strerror or type(exc).__name__, f"check {folder}, {elsewhere}"
    # No "run the same command again": after `edit`, whose taxonomy may already be saved when its report is refused,
    # that would repeat the edit. Every write is atomic, so what is on disk is whole either way.
    return RunError(
        f"{target}: cannot be written ({why}); fix: {fix}. Files already on disk are whole (every write is atomic)"
    )


def damaged(path: Path, exc: BaseException, stage: str) -> RunError:
    """A truncated or corrupt artifact: name it and how to rebuild it, never a traceback."""
    what = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
    return RunError(
        f"{path}: damaged or truncated ({type(exc).__name__}: {what}); "
        f"fix: delete it and run `taxonomy {stage} {path.parent}` (or `taxonomy run` on the pipeline) to rebuild it"
    )


@dataclass
class RunDir:
    path: Path
    manifest: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        if self.path.exists() and not self.path.is_dir():
            raise RunError(
                f"{self.path}: not a directory; fix: pass a run directory (or a new folder name) to --run-dir"
            )
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise unwritable(exc, self.path / MANIFEST) or exc from None
        manifest = self.path / MANIFEST
        if manifest.exists():
            try:
                self.manifest = json.loads(manifest.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError) as exc:
                raise RunError(
                    f"{manifest}: damaged ({type(exc).__name__}: {str(exc)[:120]}); fix: restore it, or delete it and "
                    "run `taxonomy run` on the pipeline again (artifacts without "
                    "a valid manifest are recomputed; answers are cached)"
                ) from None
            if not isinstance(self.manifest, dict):
                raise RunError(
                    f"{manifest}: not a JSON object; fix: delete it and run `taxonomy run` on the pipeline again"
                )
            for key in ("stages", "corpus", "uses", "settings"):
                if key in self.manifest and not isinstance(self.manifest[key], dict):
                    raise RunError(
                        f"{manifest}: key {key} is not a JSON object; fix: restore the "
                        "file, or delete it and run `taxonomy run` on the pipeline again"
                    )
            made_by = self.manifest.get("run_format", 0)
            if isinstance(made_by, int) and made_by > RUN_FORMAT:
                raise RunError(
                    f"{manifest}: run_format {made_by} was written by a "
                    f"newer rubric-taxonomy (this one reads {RUN_FORMAT}); "
                    "fix: upgrade rubric-taxonomy, or use another --run-dir"
                )

    def has(self, name: str) -> bool:
        return (self.path / name).exists()

    def need(self, name: str, stage: str) -> Path:
        if not self.has(name):
            raise RunError(
                f"{self.path / name}: missing; fix: run `taxonomy {stage} {self.path}` (or `taxonomy run`) first"
            )
        return self.path / name

    def write_parquet(self, name: str, frame: pl.DataFrame) -> None:
        _atomic_write(self.path / name, lambda p: frame.write_parquet(p))

    def read_parquet(self, name: str, stage: str = "run") -> pl.DataFrame:
        path = self.need(name, stage)
        try:
            return pl.read_parquet(path)
        except Exception as exc:  # noqa: BLE001 - polars/arrow raise many types on a damaged file
            raise damaged(path, exc, stage) from None

    def write_json(self, name: str, value: Any) -> None:
        self._write_text(name, redact(json.dumps(value, indent=2, ensure_ascii=False, default=str)))

    def _write_text(self, name: str, text: str) -> None:
        """A text that is on disk already, byte for byte, is not written again: a finished run re-run in a
        folder the user cannot write has nothing to write and must not fail."""
        path = self.path / name
        try:
            if path.is_file() and path.read_bytes() == text.encode("utf-8"):
                return
        except OSError:
            pass  # unreadable: the write below says what is wrong
        _atomic_write(path, lambda p: p.write_text(text, encoding="utf-8"))

    def read_json(self, name: str, stage: str = "run") -> Any:
        path = self.need(name, stage)
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise damaged(path, exc, stage) from None

    def write_text(self, name: str, text: str) -> None:
        self._write_text(name, redact(text))

    def write_npy(self, name: str, array: np.ndarray) -> None:
        def write(p: Path) -> None:
            with open(p, "wb") as f:  # np.save(path) would append ".npy" to the temporary name
                np.save(f, array)

        _atomic_write(self.path / name, write)

    def read_npy(self, name: str, stage: str = "run") -> np.ndarray:
        path = self.need(name, stage)
        try:
            return np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise damaged(path, exc, stage) from None

    def log_usage(self, stage: str, kind: str, prompt_tokens: int, output_tokens: int, cached_tokens: int = 0) -> None:
        """One paid call, appended to usage.jsonl as soon as its answer arrives, so a run killed and
        resumed any number of times still accounts for every call any of its processes paid for.
        `cached_tokens`: the part of the prompt served from a context cache. Kind "cache" is a context
        cache written (prompt_tokens), "cache_storage" one deleted (prompt_tokens = token-seconds kept)."""
        entry = {"stage": stage, "kind": kind, "prompt_tokens": prompt_tokens, "output_tokens": output_tokens}
        if cached_tokens:
            entry["cached_tokens"] = cached_tokens
        line = json.dumps(entry) + "\n"
        with _LEDGER_LOCK:
            fd = os.open(self.path / LEDGER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)

    def usage_totals(self) -> dict[str, dict[str, int]]:
        """Per stage, from the ledger: the USAGE_KEYS counts."""
        path = self.path / LEDGER
        out: dict[str, dict[str, int]] = {}
        if not path.exists():
            return out
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                entry = json.loads(line)
                stage, kind = str(entry["stage"]), entry["kind"]
                prompt, output = int(entry["prompt_tokens"]), int(entry["output_tokens"])
                cached = int(entry.get("cached_tokens", 0))
            except (ValueError, KeyError, TypeError):
                continue  # a line torn by a kill mid-write
            totals = out.setdefault(stage, dict.fromkeys(USAGE_KEYS, 0))
            if kind == "embed":
                totals["embed_calls"] += 1
                totals["embed_tokens"] += prompt
                continue
            if kind in ("cache", "cache_storage"):
                totals["cache_tokens" if kind == "cache" else "cache_token_seconds"] += prompt
                continue
            totals["calls"] += 1
            totals["prompt_tokens"] += prompt
            totals["output_tokens"] += output
            totals["cached_prompt_tokens"] += cached
            if kind == "batch":  # also counted above; priced at the batch rate
                totals["batch_calls"] += 1
                totals["batch_prompt_tokens"] += prompt
                totals["batch_output_tokens"] += output
                totals["batch_cached_prompt_tokens"] += cached
        return out

    def check_readable(self) -> None:
        """Every artifact on disk opens: a damaged one is one line naming it, before a reader trips on it."""
        for name, stage in ARTIFACTS.items():
            if not self.has(name):
                continue
            if name.endswith(".parquet"):
                self.read_parquet(name, stage)
            elif name.endswith(".npy"):
                self.read_npy(name, stage)
            else:
                self.read_json(name, stage)

    def record(self, stage: str, info: dict[str, Any]) -> None:
        self.manifest.setdefault("stages", {})[stage] = info
        self.save_manifest()

    def save_manifest(self) -> None:
        self.manifest["run_format"] = RUN_FORMAT
        try:
            self.write_json(MANIFEST, self.manifest)
        except RunError:
            # Refused: when all that changed is this process's own timing, a run with nothing else to record
            # (a finished run re-run in a read-only folder) goes on; anything else is a write that matters.
            if not self._only_timing_changed():
                raise

    def _only_timing_changed(self) -> bool:
        try:
            on_disk = json.loads((self.path / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        ours = json.loads(redact(json.dumps(self.manifest, ensure_ascii=False, default=str)))
        return isinstance(on_disk, dict) and {k: v for k, v in on_disk.items() if k not in PROCESS_TIMING} == {
            k: v for k, v in ours.items() if k not in PROCESS_TIMING
        }


def config_from_run(run_dir: Path) -> PipelineConfig:
    """The settings a run recorded in its manifest, paths read from where its pipeline TOML was."""
    manifest = RunDir(run_dir).manifest
    if "settings" not in manifest:
        raise RunError(
            f"{run_dir / MANIFEST}: missing or has no settings; fix: pass "
            "a pipeline TOML, or a run directory made by `taxonomy run`"
        )
    return PipelineConfig.model_validate({**manifest["settings"], "base_dir": manifest.get("config_dir", ".")})


def taxonomy_in_use(run: RunDir, command: str) -> str:
    """The content hash of the run's taxonomy.json, after checking Stage 3 was tagged against it.

    breakdown, guidance, audit and report call this at their entry (and `record_use` after),
    so tags made with an older taxonomy are never shown under the edited taxonomy's names."""
    # lazy, here and in stale_uses: taxonomy_io.py builds the pydantic models of every artifact (about 20 ms, 4% of
    # `taxonomy --help`, which imports this module)
    from taxonomy.taxonomy_io import load_taxonomy

    current = load_taxonomy(run.need(TAXONOMY, "merge")).content_hash
    tagged = (run.manifest.get("stages", {}).get("tag") or {}).get("taxonomy_hash")
    if run.has(TAGS) and tagged and tagged != current:
        raise RunError(
            f"{run.path / TAGS}: tagged against taxonomy {tagged}, but taxonomy.json is now {current} "
            f"(edited since); fix: run `taxonomy tag {run.path}` to re-tag, then `taxonomy {command}` again"
        )
    return current


def record_use(run: RunDir, command: str, taxonomy_hash: str, **info: Any) -> None:
    run.manifest.setdefault("uses", {})[command] = {"taxonomy_hash": taxonomy_hash, "finished": now(), **info}
    run.save_manifest()


def stale_uses(run: RunDir) -> dict[str, str]:
    """Uses (breakdown, guidance, audit) whose outputs were made with another taxonomy than the current one."""
    if not run.has(TAXONOMY):
        return {}
    from taxonomy.taxonomy_io import TaxonomyError, load_taxonomy

    try:
        current = load_taxonomy(run.path / TAXONOMY).content_hash
    except TaxonomyError:
        return {}
    return {
        name: (
            f"{name}/ was computed with taxonomy {rec.get('taxonomy_hash')}, not the current {current}; "
            f"re-run `taxonomy {name}`"
        )
        for name, rec in (run.manifest.get("uses") or {}).items()
        if isinstance(rec, dict) and rec.get("taxonomy_hash") != current
    }


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
