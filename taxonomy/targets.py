"""What a command's TARGET is, answered once for the CLI, the linter and the Python API: a run directory, a pipeline
TOML, or a corpus file or folder; the settings it stands for, and the session that runs them."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, get_args

from taxonomy.config import ConfigError, LLMConfig, PipelineConfig, load_config
from taxonomy.corpus import CorpusError
from taxonomy.corpus.detect import Detected, detect
from taxonomy.llm.providers import resolve_provider_name
from taxonomy.pipeline import Session, open_session
from taxonomy.pipeline_toml import config_for_corpus, render
from taxonomy.run import MANIFEST, PIPELINE_TOML, TAXONOMY, RunDir, RunError, config_from_run, default_run_dir
from taxonomy.schemas import Taxonomy
from taxonomy.taxonomy_io import load_taxonomy


def is_run(target: Path) -> bool:
    """A folder is a run when it has a manifest, or when it holds no corpus (its missing manifest is then named)."""
    return target.is_dir() and ((target / MANIFEST).exists() or not corpus_layout(target))


def corpus_layout(folder: Path) -> bool:
    try:
        detect(folder)
        return True
    except CorpusError:
        return False


def positive_limit(limit: int) -> int:
    if limit < 1:
        raise ConfigError(
            f"--limit {limit}: must be 1 or more; fix: pass the "
            "number of criteria to keep, or leave --limit out for all"
        )
    return limit


def check_provider(provider: str | None, shown: str | None = None) -> None:
    """A misspelt provider stops before anything is written (no run folder, no answer cache). `shown`: how the
    caller's user spelt it (default `--provider NAME`)."""
    known = get_args(LLMConfig.model_fields["provider"].annotation)
    if provider is not None and provider not in known:
        shown = shown or f"--provider {provider}"
        raise ConfigError(f"{shown}: unknown provider; fix: use one of {', '.join(known)}")


def config_for(
    target: Path,
    limit: int | None = None,
    batch: bool | None = None,
    on_detect: Callable[[Detected], None] | None = None,
) -> tuple[PipelineConfig, Detected | None, int | None]:
    """(config, what was detected or None, its number of criteria or None): a pipeline TOML as written, a bare
    corpus file or folder through detection (`on_detect` is shown it first), a run directory with its recorded
    settings."""
    found, n = None, None
    if is_run(target):
        cfg = config_from_run(target)
    elif target.suffix.lower() == ".toml":
        cfg = load_config(target)
    else:
        found = detect(target)
        if on_detect is not None:
            on_detect(found)
        cfg, n = config_for_corpus(found)
    if limit is not None:
        cfg.corpus.limit = positive_limit(limit)
    if batch is not None:
        cfg.llm.mode = "batch" if batch else "online"
    return cfg, found, n


def frozen_taxonomy(path: Path) -> Path:
    """`--taxonomy` takes a run directory, as report, export and edit do, or a taxonomy.json."""
    return path / TAXONOMY if path.is_dir() else path


def frozen_suffix(taxonomy: Taxonomy | None) -> str:
    """A corpus tagged against a frozen taxonomy gets its own run, never the pipeline's own run's place."""
    return f"-taxonomy-{taxonomy.content_hash[:8]}" if taxonomy is not None else ""


def open_target(
    target: Path,
    provider: str | None,
    run_dir: Path | None,
    quiet: bool,
    limit: int | None = None,
    frozen: Path | None = None,
    batch: bool | None = None,
    on_detect: Callable[[Detected], None] | None = None,
) -> tuple[Session, Detected | None]:
    """A pipeline TOML or a corpus opens (or resumes) its default run; a run directory reopens with its recorded
    settings. Returns the session and, for a bare corpus, what was detected (see `keep_pipeline_toml`)."""
    check_provider(provider)
    run = is_run(target)
    cfg, found, _ = config_for(target, limit, batch, on_detect)
    if run:
        provider = provider or RunDir(target).manifest.get("backend")
        run_dir = target
    s = open_session(
        cfg,
        provider=provider,
        run_dir=run_dir,
        show_progress=not quiet,
        run_suffix=frozen_suffix(load_taxonomy(frozen) if frozen is not None else None),
        from_source=not run,
        load_now=not run,
    )
    return s, found


def keep_pipeline_toml(s: Session, found: Detected) -> Path:
    """A run over a bare corpus keeps the TOML it used, to repeat or tune the run (`taxonomy run RUN/pipeline.toml`)."""
    path = s.run.path / PIPELINE_TOML
    cfg = s.cfg.model_copy(deep=True)
    cfg.corpus.limit = None  # --limit is a flag of one command, not part of the pipeline
    s.run.write_text(PIPELINE_TOML, render(cfg, found, path, pin_output=True))
    return path


def record_accepted_violations(s: Session) -> None:
    """The run keeps a taxonomy that still breaks a hard merge constraint, and its manifest says so."""
    s.cfg.merge.accept_violations = True
    s.run.manifest.setdefault("settings", {}).setdefault("merge", {})["accept_violations"] = True
    s.run.save_manifest()


def check_taxonomy_to_tag_against(target: Path, provider: str | None, run_dir: Path | None) -> None:
    """A corpus is tagged against --taxonomy, or against the taxonomy its own run already holds; with neither,
    stop before a run folder is made and name the option."""
    if run_dir is None:
        cfg = load_config(target) if target.suffix.lower() == ".toml" else config_for_corpus(detect(target))[0]
        run_dir = default_run_dir(cfg, resolve_provider_name(provider or cfg.llm.provider), cfg.llm.model)
    if not (run_dir / TAXONOMY).exists():
        raise RunError(
            f"{target}: no taxonomy to tag it against (--taxonomy not given, and no run of it has one); "
            f"fix: pass --taxonomy RUN_DIR (a finished run's folder, or its taxonomy.json), "
            f"or build one first with `taxonomy run {target}`"
        )


def record_totals(s: Session, seconds: float, peak_mb: float) -> None:
    """The whole run's wall time and peak memory, in its manifest."""
    s.run.manifest["totals"] = {"wall_seconds": round(seconds, 2), "peak_rss_mb": round(peak_mb, 1)}
    s.run.save_manifest()
