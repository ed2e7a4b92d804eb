"""The public Python API: fit a taxonomy, load a run, tag and audit new criteria against it, lint a rubric.

Each function is a thin wrapper over what the matching command calls, so a run made here is the run the CLI makes
(same backend choice, same run directory, resumable by either). `taxonomy/__init__.py` exposes these names lazily."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypedDict, Union, Unpack

import polars as pl

from taxonomy.analysis.audit import AuditResult
from taxonomy.analysis.breakdown_files import Options, run_breakdown
from taxonomy.analysis.audit_run import run_audit
from taxonomy.config import ConfigError, PipelineConfig, load_config
from taxonomy.corpus import load_corpus
from taxonomy.corpus.config import corpus_stem
from taxonomy.lint.check import check, rules
from taxonomy.pipeline import Session, open_session, run_pipeline, run_stage
from taxonomy.pipeline_toml import corpus_config, detect
from taxonomy.run import CRITERIA, TAGS, TAXONOMY, RunDir, RunError
from taxonomy.schemas import Taxonomy
from taxonomy.targets import check_provider, frozen_suffix, is_run, keep_pipeline_toml
from taxonomy.taxonomy_io import load_taxonomy

Data = Union[pl.DataFrame, str, Path]
FINDING_COLUMNS = ("rule", "severity", "task_id", "criterion_ids", "message", "evidence", "fix", "source")


@dataclass
class Result:
    """A run folder, read back: what `fit`, `load` and `tag` return.

    `taxonomy` is the pydantic model of taxonomy.json (for `tag`, the frozen taxonomy the criteria were tagged
    against); `tags` holds Stage 3's tags (criterion_id, tags, primary, status, ...); `criteria` the run's snapshot
    of its corpus; `path` the run folder; `backend` which backend ran ("offline", "gemini", "vertex", "openai")."""

    taxonomy: Taxonomy
    tags: pl.DataFrame
    criteria: pl.DataFrame
    path: Path
    backend: str

    def __repr__(self) -> str:
        names = ", ".join(self.taxonomy.names())
        return (
            f"Result({self.path}, backend={self.backend!r}, {self.tags.height} criteria tagged, capabilities: {names})"
        )


def _corpus_file(data: Data, name: str | None, folder: Path) -> Path:
    """A frame is written to `folder/<name>.parquet` so the run, like a CLI run, reads its corpus from a file it can
    re-read (and resume from); a path is used as it is."""
    if not isinstance(data, pl.DataFrame):
        return Path(data)
    path = folder / f"{corpus_stem(name or 'rubric')}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    data.write_parquet(path)
    return path


def _frame_folder(name: str | None, run_dir: str | Path | None) -> Path:
    # Under the run folder's input/ when one is given; else beside the default run folders, outputs/<name>/.
    if run_dir is not None:
        return Path(run_dir) / "input"
    return Path.cwd() / "outputs" / corpus_stem(name or "rubric") / "input"


def _check_provider(provider: str | None) -> None:
    check_provider(provider, f"provider={provider!r}")


def _with_settings(cfg: PipelineConfig, settings: dict[str, dict[str, Any]]) -> PipelineConfig:
    """`{"cluster": {"seed": 1}}` over the config, each value checked as the TOML's would be."""
    raw = cfg.model_dump()
    sections = ", ".join(k for k, v in raw.items() if isinstance(v, dict))
    for section, values in settings.items():
        if not isinstance(raw.get(section), dict) or not isinstance(values, dict):
            raise ConfigError(f"settings[{section!r}]: no such section; fix: use one of {sections}")
        unknown = set(values) - set(raw[section])
        if unknown:
            raise ConfigError(
                f"settings[{section!r}]: unknown key(s) {', '.join(sorted(unknown))}; "
                "fix: use the keys a pipeline TOML shows for that section"
            )
        raw[section].update(values)
    return PipelineConfig.model_validate(raw)


def _config(path: Path, pipeline: str | Path | None, settings: dict | None) -> tuple[PipelineConfig, Any]:
    """A pipeline TOML as written, else a corpus through detection, with `pipeline`'s settings when given."""
    found = None
    if path.suffix.lower() == ".toml":
        cfg = load_config(path)
    else:
        found = detect(path)
        cfg = corpus_config(found)  # read once, by the session or the caller
        if pipeline is not None:
            cfg = load_config(pipeline).model_copy(update={"corpus": cfg.corpus, "name": cfg.name})
    return (_with_settings(cfg, settings) if settings else cfg), found


def _open(
    data: Data,
    name: str | None,
    provider: str | None,
    run_dir: str | Path | None,
    quiet: bool,
    frozen: Taxonomy | None = None,
    pipeline: str | Path | None = None,
    settings: dict | None = None,
) -> Session:
    """A session as the CLI opens one over a pipeline TOML or a corpus (a frame is a corpus written to a file)."""
    _check_provider(provider)
    suffix = frozen_suffix(frozen)
    folder = (
        _frame_folder(name, run_dir) if frozen is None else _frame_folder(name, run_dir).with_name("input" + suffix)
    )
    cfg, found = _config(_corpus_file(data, name, folder), pipeline, settings)
    if name is not None:
        cfg.name = corpus_stem(name)
    s = open_session(
        cfg,
        provider=provider,
        run_dir=Path(run_dir) if run_dir is not None else None,
        show_progress=not quiet,
        run_suffix=suffix,
        load_now=True,
    )
    if found is not None and pipeline is None and not settings:
        keep_pipeline_toml(s, found)  # to repeat or tune the run with `taxonomy run`, as the CLI's run keeps it
    return s


def _run_folder(run: str | Path | Result) -> Path:
    path = run.path if isinstance(run, Result) else Path(run)
    if not (path / TAXONOMY).is_file():
        raise RunError(f"{path}: holds no taxonomy.json; fix: pass a finished run's folder (what fit() returns)")
    return path


def fit(
    data: Data,
    *,
    name: str | None = None,
    provider: str | None = None,
    run_dir: str | Path | None = None,
    pipeline: str | Path | None = None,
    settings: dict[str, dict[str, Any]] | None = None,
    quiet: bool = True,
    on_stage: Callable[[str, dict], None] | None = None,
) -> Result:
    """Induce a taxonomy from a rubric corpus and tag every criterion with it, as `taxonomy run` does.

    `data`: a polars frame of criteria (columns as `taxonomy run` detects them: criterion/text, task/task_id,
    weight, ...), a corpus file (.csv, .tsv, .jsonl, .json, .parquet) or a pipeline TOML.
    `name`: the pipeline's name (default: "rubric" for a frame, a file's own name, a TOML's own).
    `provider`: "auto" (Gemini with a key, else offline), "gemini", "vertex", "openai" or "offline"; default the
    config's llm.provider, as on the command line.
    `run_dir`: default one per pipeline, backend and model under ./outputs, so fitting again resumes from what is on
    disk.
    `pipeline`: a pipeline TOML whose settings a frame or corpus file is fitted with (its [corpus] aside).
    `settings`: overrides, as `{"cluster": {"seed": 1}, "merge": {"max_caps": 8}, "corpus": {"limit": 100}}`.
    `on_stage(stage, info)`: called after each stage with what the command prints for it (info["skipped"] when it
    was on disk)."""
    s = _open(data, name, provider, run_dir, quiet, pipeline=pipeline, settings=settings)
    run_pipeline(s, on_stage=on_stage)
    return load(s.run.path)


def read_corpus(source: str | Path, *, settings: dict[str, dict[str, Any]] | None = None) -> pl.DataFrame:
    """The criteria as a run reads them (criterion_id, task_id, text, weight, category, direction, brief, context,
    source, and the file's other columns), from a pipeline TOML, a corpus file or folder, or a run folder (its
    snapshot). `settings`, as for `fit`, e.g. `{"corpus": {"on_duplicate": "keep"}}` to keep repeated criteria."""
    path = Path(source)
    if is_run(path):
        return RunDir(path).read_parquet(CRITERIA, "run")
    cfg = _config(path, None, settings)[0]
    return load_corpus(cfg.corpus, cfg.base_dir).frame


def load(run: str | Path) -> Result:
    """A finished run folder (from `fit` or `taxonomy run`) read back as a `Result`."""
    path = _run_folder(run)
    folder = RunDir(path)
    return Result(
        taxonomy=load_taxonomy(path / TAXONOMY),
        tags=folder.read_parquet(TAGS, "tag"),
        criteria=folder.read_parquet(CRITERIA, "run"),
        path=path,
        backend=folder.manifest.get("backend", "offline"),
    )


class FrozenOptions(TypedDict, total=False):
    """The keywords of `tag` and `audit`: `name` the pipeline's name, `provider` as for `fit`, `run_dir` the run
    folder (default beside the corpus's own runs, named after the taxonomy's hash), `quiet` (default True) no
    progress bars."""

    name: str | None
    provider: str | None
    run_dir: str | Path | None
    quiet: bool


def _frozen_session(data: Data, run: str | Path | Result, options: FrozenOptions) -> tuple[Session, Path, Taxonomy]:
    """A session over `data` that tags against `run`'s frozen taxonomy, that taxonomy's file, and the taxonomy."""
    unknown = set(options) - set(FrozenOptions.__annotations__)
    if unknown:  # a misspelt keyword must not be dropped without a word, as **options alone would
        raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(unknown))}")
    frozen_path = _run_folder(run) / TAXONOMY
    frozen, get = load_taxonomy(frozen_path), options.get
    s = _open(data, get("name"), get("provider"), get("run_dir"), get("quiet", True), frozen=frozen)
    return s, frozen_path, frozen


def tag(data: Data, run: str | Path | Result, **options: Unpack[FrozenOptions]) -> Result:
    """Tag new criteria (a frame, a corpus file or a pipeline TOML) against a fitted run's frozen taxonomy, as
    `taxonomy tag DATA --taxonomy RUN` does: fit once, apply anywhere. The tags go to their own run folder; the
    result's taxonomy is the frozen one. `options`: name, provider, run_dir, quiet (FrozenOptions)."""
    s, frozen_path, frozen = _frozen_session(data, run, options)
    run_stage(s, "tag", taxonomy_path=frozen_path)
    return Result(frozen, s.run.read_parquet(TAGS), s.run.read_parquet(CRITERIA), s.run.path, s.backend_name)


def audit(data: Data, run: str | Path | Result, **options: Unpack[FrozenOptions]) -> AuditResult:
    """Audit a new corpus's coverage against a fitted run's frozen taxonomy, as `taxonomy audit DATA --taxonomy
    RUN` does. Returns the audit's frames: `shares` (against the run's), `task_matrix`, `missing` (tasks lacking a
    capability most tasks have), `unmapped`, `duplicates`, `bundled`; `to_markdown()` gives audit.md. The CSV files
    and audit.md are written under the audit's run folder, in audit/. `options`: as for `tag`."""
    s, frozen_path, _ = _frozen_session(data, run, options)
    return run_audit(s, frozen_path)


def _findings_frame(found: list[Any], from_file: bool) -> pl.DataFrame:
    rows = [
        {
            **{k: getattr(f, k) for k in FINDING_COLUMNS},
            "file": f.location.get("file") if from_file else None,
            "line": f.location.get("line") if from_file else None,
        }
        for f in found
    ]
    schema = {k: pl.String for k in FINDING_COLUMNS} | {"criterion_ids": pl.List(pl.String), "file": pl.String}
    return pl.DataFrame(rows, schema={**schema, "line": pl.Int64}, orient="row" if not rows else None)


def lint_rubric(
    data: Data,
    *,
    select: str | None = None,
    ignore: str | None = None,
    preview: bool = False,
    provider: str | None = "offline",
) -> pl.DataFrame:
    """Find defective criteria in a rubric (a frame, a corpus file, a pipeline TOML or a run folder), as `taxonomy
    lint` does: one row per finding (rule, severity, task_id, criterion_ids, message, evidence, fix, source, file,
    line). `select` / `ignore`: comma-separated rule codes; `preview` adds the preview rules. `provider` defaults
    to "offline" (the rules only); "auto" or a model's name adds one review call per task."""
    _check_provider(provider)
    plan = rules(select, ignore, preview)
    if not isinstance(data, pl.DataFrame):
        return _findings_frame(check(Path(data), plan, provider)[0], True)
    with tempfile.TemporaryDirectory() as folder:  # a frame has no file of its own: its findings name none
        path = _corpus_file(data, "rubric", Path(folder))
        return _findings_frame(check(path, plan, provider)[0], False)


def report(run: str | Path | Result) -> Path:
    """Render a run folder's self-contained report.html, as `taxonomy report RUN` does; returns its path."""
    from taxonomy.analysis.report import render_report  # lazy: matplotlib, which only the report draws with

    return render_report(_run_folder(run))


def breakdown(run: str | Path | Result, verdicts: list[str], **options: Any):
    """A verifier's errors broken down by capability, as `taxonomy breakdown RUN --verdicts SPEC` does (`verdicts`:
    specs such as "devai:data/devai"); writes RUN/breakdown/ and returns its tables and markdown. `options`:
    reference, by, n_boot, as the command's options."""
    return run_breakdown(RunDir(_run_folder(run)), verdicts, Options(**options))
