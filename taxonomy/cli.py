"""The `taxonomy` command. Thin: parse, call the library, print."""

from __future__ import annotations

import inspect
import json
import logging
import os
import resource
import time
from functools import wraps
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Optional

import polars as pl
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from taxonomy.config import ConfigError
from taxonomy.corpus.config import show_path
from taxonomy.lint import run_summary
from taxonomy.lint.command import lint as _lint
from taxonomy.run import (
    CRITERIA,
    LABELS,
    REPORT,
    STAGES,
    TAGS,
    TAXONOMY,
    TAXONOMY_MD,
    RunDir,
    RunError,
    record_use,
    taxonomy_in_use,
    unwritable,
)
from taxonomy.secrets import redact
from taxonomy.shares import primary_shares
from taxonomy.stagedefs import DECLARED

# lazy: each command imports what it runs (the pipeline, an analysis, an export) in its body. At the top, every one
# would load into `taxonomy --help` and the light commands (`init`, `breakdown`) what only some commands use: jinja2
# and the LLM runner (0.1 s), matplotlib (0.4 s), scikit-learn (1.2 s); even the lightest cost 10-35 ms each.
# errors.py too (asyncio, ssl: 50 ms): _guard imports it when a command runs.

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Induce a verifier-capability taxonomy from a rubric corpus and use it.",
)
console = Console(stderr=True, soft_wrap=True)
# Markdown tables and paths must never be wrapped, or they break when piped to a file.
out = Console(soft_wrap=True)

# Choices are written with spaces around "|" so the help panel wraps between them instead of cutting one off.
ProviderOpt = typer.Option(
    None,
    "--provider",
    "-p",
    help="auto | gemini | vertex | openai | offline (default: the "
    "config's llm.provider; auto = gemini with a key, else offline)",
)
RunDirOpt = typer.Option(
    None,
    "--run-dir",
    help="run directory (default: one per pipeline, backend and "
    "model, under the output dir, so the same command resumes)",
)
QuietOpt = typer.Option(False, "--quiet", "-q", help="no progress bars")
TARGET_HELP = (
    "a pipeline TOML, or a corpus file (.csv, .tsv, .jsonl, .json, .parquet) whose columns are detected: "
    "criterion/text/requirement/rubric, task/task_id/prompt_id, weight/points/score, category, brief/prompt"
)
BatchOpt = typer.Option(
    None,
    "--batch/--online",
    help="Gemini Batch API: half the price, hours of latency; the job is recorded in the "
    "run directory, so the same command resumes it (default: the config's llm.mode)",
)


def _version(value: bool) -> None:
    if value:
        try:
            out.print(f"rubric-taxonomy {version('rubric-taxonomy')}", highlight=False)
        except PackageNotFoundError:
            out.print("rubric-taxonomy (not installed: running from a checkout)", highlight=False)
        raise typer.Exit()


@app.callback()
def _main(
    show_version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="print the installed version and exit"
    ),
) -> None:
    """Induce a verifier-capability taxonomy from a rubric corpus and use it."""


def _fail(exc: BaseException) -> None:
    # markup=False: a message holds literal brackets ("[corpus]", "[labels]") that Rich would eat as tags.
    console.print(f"error: {redact(str(exc))}", style="red", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def _guard(fn):
    """Known bad input becomes one clear line and exit code 2; nothing already written is touched."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from taxonomy.errors import USER_ERRORS

        try:
            return fn(*args, **kwargs)
        except USER_ERRORS as exc:
            _fail(exc)
        # a write refused outside the run's own atomic writes (a report, a backup, the answer cache)
        except OSError as exc:
            refused = unwritable(exc)
            if refused is None:
                raise
            _fail(refused)
        except KeyboardInterrupt:
            console.print("interrupted: finished calls are cached; run the same command again to resume")
            raise typer.Exit(130)

    return wrapper


def _session(
    target: Path,
    provider: Optional[str],
    run_dir: Optional[Path],
    quiet: bool,
    limit: Optional[int] = None,
    frozen: Optional[Path] = None,
    batch: Optional[bool] = None,
):
    """The target's session (taxonomy.targets), its notice printed, and for a bare corpus the pipeline TOML it keeps."""
    from taxonomy.targets import keep_pipeline_toml, open_target

    s, found = open_target(target, provider, run_dir, quiet, limit, frozen, batch, on_detect=_print_detected)
    console.print(s.notice(), highlight=False)
    if found is not None:
        shown = show_path(keep_pipeline_toml(s, found))
        console.print(
            f"Pipeline used: {shown} (edit it and run `taxonomy run {shown}` to tune this run)",
            markup=False,
            highlight=False,
        )
    return s


def _print_detected(found) -> None:
    console.print(found.describe(), markup=False, highlight=False)


def _print_stage(stage: str, info: dict) -> None:
    if info.get("skipped"):
        console.print(f"[dim]{stage}: already on disk and up to date, skipped[/dim]")
        return
    if info.get("stale"):
        console.print(f"{stage}: recomputing (with every later stage): {info['stale']}", markup=False, highlight=False)
        return
    keys = (
        "criteria",
        "failed",
        "unique_labels",
        "clusters",
        "micro_capabilities",
        "capabilities",
        "calls",
        "new_calls",
        "batch_calls",
        "embed_calls",
        "cache_hits",
        "retries",
        "reasks",
        "prompt_tokens",
        "output_tokens",
        "cost_usd",
        "seconds",
    )
    parts = [f"{k}={info[k]}" for k in keys if k in info]
    console.print(f"[green]{stage}[/green]: " + ", ".join(parts), highlight=False)
    for note in (info.get("repairs") or []) + (info.get("notes") or []):
        console.print(f"  note: {note}", markup=False, highlight=False)
    for v in info.get("violations") or []:
        console.print(f"  violation (accepted): {v}", markup=False, highlight=False)


def _print_failures(s, artifact: str, limit: int = 5) -> None:
    frame = s.run.read_parquet(artifact)
    failed = frame.filter(pl.col("status") == "failed")
    if failed.height:
        console.print(
            f"[yellow]{failed.height} criteria failed validation after re-asks (kept as failed in {artifact}):[/yellow]"
        )
        for r in failed.head(limit).iter_rows(named=True):
            console.print(f"  {r['criterion_id']}: {'; '.join(r['problems'])[:200]}", markup=False, highlight=False)


def discover(
    pipeline: Path = typer.Argument(..., help=TARGET_HELP),
    provider: Optional[str] = ProviderOpt,
    run_dir: Optional[Path] = RunDirOpt,
    limit: Optional[int] = typer.Option(None, help="only the first N criteria"),
    quiet: bool = QuietOpt,
    batch: Optional[bool] = BatchOpt,
) -> None:
    from taxonomy.pipeline import run_stage

    s = _session(pipeline, provider, run_dir, quiet, limit, batch=batch)
    _print_stage("discover", run_stage(s, "discover"))
    _print_failures(s, LABELS)
    out.print(f"Stage 1 labels: {s.run.path / LABELS}")


def _run_dir_command(stage: str):
    """The command of a stage with no options of its own: it re-runs the stage on a run directory."""

    def command(
        run_dir: Path = typer.Argument(..., help="run directory"),
        provider: Optional[str] = ProviderOpt,
        quiet: bool = QuietOpt,
        batch: Optional[bool] = BatchOpt,
    ) -> None:
        from taxonomy.pipeline import run_stage

        s = _session(run_dir, provider, None, quiet, batch=batch)
        _print_stage(stage, run_stage(s, stage, check_inputs=True))

    return command


AcceptOpt = typer.Option(
    False,
    "--accept-violations",
    help="keep a taxonomy that still breaks a hard merge constraint (count, "
    "shares, mapping, or a name or boundary rule) after repair, "
    "with the violations listed, instead of failing",
)


def merge_command(
    run_dir: Path = typer.Argument(..., help="run directory"),
    provider: Optional[str] = ProviderOpt,
    quiet: bool = QuietOpt,
    batch: Optional[bool] = BatchOpt,
    accept_violations: bool = AcceptOpt,
) -> None:
    """Exits 2 with one line naming the constraint when the repaired taxonomy still breaks one
    (it is kept as taxonomy.rejected.json / .md), unless --accept-violations is given."""
    from taxonomy.pipeline import run_stage
    from taxonomy.targets import record_accepted_violations

    s = _session(run_dir, provider, None, quiet, batch=batch)
    if accept_violations:
        record_accepted_violations(s)
    _print_stage("merge", run_stage(s, "merge", check_inputs=True))


def tag(
    target: Path = typer.Argument(..., help="run directory, or a pipeline TOML / corpus to tag against --taxonomy"),
    taxonomy: Optional[Path] = typer.Option(
        None, "--taxonomy", help="a frozen taxonomy to tag against: a run directory or its taxonomy.json"
    ),
    distilled: Optional[Path] = typer.Option(
        None,
        "--distilled",
        help="a model from `taxonomy distill`: tag cheaply, send only low-confidence "
        "criteria to the run's backend (the LLM, or offline without a key)",
    ),
    threshold: Optional[float] = typer.Option(
        None,
        help="with --distilled: confidence below which a criterion goes "
        "to the run's backend (default: the one saved at training)",
    ),
    provider: Optional[str] = ProviderOpt,
    run_dir: Optional[Path] = RunDirOpt,
    quiet: bool = QuietOpt,
    batch: Optional[bool] = BatchOpt,
) -> None:
    from taxonomy.pipeline import run_stage
    from taxonomy.targets import check_provider, check_taxonomy_to_tag_against, frozen_taxonomy, is_run

    taxonomy = frozen_taxonomy(taxonomy) if taxonomy is not None else None
    if taxonomy is None and not is_run(target):
        check_provider(provider)
        check_taxonomy_to_tag_against(target, provider, run_dir)
    s = _session(target, provider, run_dir, quiet, frozen=None if is_run(target) else taxonomy, batch=batch)
    if distilled is not None:
        from taxonomy.distill import tag_with_distilled

        info = tag_with_distilled(s, distilled, taxonomy, threshold)
    else:
        info = run_stage(s, "tag", taxonomy_path=taxonomy)
    _print_stage("tag", info)
    _print_failures(s, TAGS)
    _print_shares(primary_shares(s.run.read_parquet(TAGS), s.run.read_parquet(CRITERIA)))
    out.print(f"Stage 3 tags: {s.run.path / TAGS}")


# The stages whose commands have options of their own; every other declared stage gets _run_dir_command's.
_OWN_COMMANDS = {"discover": discover, "merge": merge_command, "tag": tag}


def _register_stage_commands() -> None:
    """One command per declared stage (stagedefs.py), in the stage order, its help opening with the stage's summary
    and going on with its own command's docstring, if any."""
    for stage in DECLARED:
        command = _OWN_COMMANDS.get(stage.name) or _run_dir_command(stage.name)
        more = inspect.getdoc(command)
        command.__doc__ = stage.summary + (f"\n\n{more}" if more else "")
        app.command(name=stage.name)(_guard(command))


_register_stage_commands()


def _print_shares(shares) -> None:
    rows = [
        (
            r["capability"],
            str(r["n"]),
            f"{100 * r['share']:.1f}%",
            "–" if r["share_of_tagged"] is None else f"{100 * r['share_of_tagged']:.1f}%",
        )
        for r in shares.iter_rows(named=True)
    ]
    header = ("capability", "criteria", "share of all", "share of tagged")
    if not out.is_terminal:
        # Piped or captured: a markdown table, never cut to a terminal width nobody has.
        out.print("Share of criteria by primary capability\n", markup=False, highlight=False)
        out.print("| " + " | ".join(header) + " |\n|---|---:|---:|---:|", markup=False, highlight=False)
        for row in rows:
            out.print("| " + " | ".join(row) + " |", markup=False, highlight=False)
        return
    table = Table(title="Share of criteria by primary capability")
    table.add_column(header[0], no_wrap=True)
    for name in header[1:]:
        table.add_column(name, justify="right")
    for row in rows:
        table.add_row(*row)
    out.print(table)


LikeOpt = typer.Option(
    None,
    "--like",
    help="an earlier run directory: capabilities that hold the same criteria (matched by text, as "
    "`taxonomy diff` matches) keep its names, so a benchmark's v2 keeps v1's",
)


def _earlier_run(like: Optional[Path]):
    """`--like`'s run, checked before anything runs (its tags must belong to its taxonomy), or None."""
    from taxonomy.like import check_like

    return check_like(like) if like is not None else None


def _run_all(s, force: Optional[str], earlier) -> None:
    """Every stage, then, with `--like`, the earlier run's names kept where the corpus agrees, said in one line."""
    from taxonomy.like import keep_names
    from taxonomy.pipeline import run_pipeline

    run_pipeline(s, force_from=force, on_stage=_print_stage)
    if earlier is None:
        return
    kept = keep_names(s, earlier)
    out.print(kept.line(), markup=False, highlight=False)
    for note in kept.notes:
        console.print(f"  note: {note}", markup=False, highlight=False)


@app.command()
@_guard
def run(
    pipeline: Path = typer.Argument(..., help=TARGET_HELP),
    provider: Optional[str] = ProviderOpt,
    run_dir: Optional[Path] = RunDirOpt,
    force: Optional[str] = typer.Option(None, help="re-run from this stage on: " + " | ".join(STAGES)),
    limit: Optional[int] = typer.Option(None, help="only the first N criteria"),
    report: bool = typer.Option(True, help="write report.html at the end"),
    quiet: bool = QuietOpt,
    batch: Optional[bool] = BatchOpt,
    accept_violations: bool = AcceptOpt,
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="print what each stage would cost (`taxonomy estimate`) and stop; nothing is sent or written",
    ),
    like: Optional[Path] = LikeOpt,
) -> None:
    """All stages, resuming from what is on disk; ends with the taxonomy and report paths."""

    from taxonomy.targets import record_accepted_violations, record_totals

    if force is not None and force not in STAGES:
        _fail(ValueError(f"--force {force}: unknown stage; fix: use one of {', '.join(STAGES)}"))
    if dry_run:
        _print_estimate(pipeline, provider, limit, batch)
        return
    start = time.perf_counter()
    earlier = _earlier_run(like)  # a bad --like stops before anything runs
    s = _session(pipeline, provider, run_dir, quiet, limit, batch=batch)
    if accept_violations:
        record_accepted_violations(s)
    _run_all(s, force, earlier)
    _print_failures(s, LABELS)
    _print_failures(s, TAGS)
    _print_shares(primary_shares(s.run.read_parquet(TAGS), s.run.read_parquet(CRITERIA)))
    found = run_summary(s.run.path)  # the rubric's own defects, offline, and the command that lists them
    if not found.startswith("Lint: 0 errors, 0 warnings"):
        # A run that exits 0 printing "N errors" reads as a failed run unless the line says whose errors they are.
        out.print(
            "note: the run went through; the lint line below counts "
            "defects of the rubric itself (its criteria as written), "
            "not errors of this run",
            markup=False,
            highlight=False,
        )
    out.print(found, markup=False, highlight=False)
    if report:
        s.run.check_readable()
        _render_report(s.run.path)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    record_totals(s, time.perf_counter() - start, peak_mb)
    out.print(f"Done in {time.perf_counter() - start:.1f} s (peak memory {peak_mb:.0f} MB).")
    out.print(f"Taxonomy: {s.run.path / TAXONOMY_MD}")
    if report:
        out.print(f"Report:   {s.run.path / REPORT}")


def _print_estimate(
    pipeline: Path, provider: Optional[str], limit: Optional[int], batch: Optional[bool], as_json: bool = False
) -> None:
    from taxonomy.estimate import estimate as estimate_cost
    from taxonomy.llm.providers import ProviderError, make_provider, resolve_provider_name
    from taxonomy.embed.choose import embedding_choice
    from taxonomy.targets import check_provider, config_for

    check_provider(provider)
    cfg, _, _ = config_for(pipeline, limit, batch, on_detect=_print_detected)
    backend = resolve_provider_name(provider or cfg.llm.provider)
    result = estimate_cost(cfg, backend, embedding_choice(cfg, backend))
    stop = None
    if backend != "offline":
        try:
            make_provider(cfg.llm, backend)  # no request is sent: only the key, project or URL is checked
        except ProviderError as exc:
            stop = str(exc)
    if as_json:
        figures = result.as_dict(backend, cfg.llm.mode)
        figures["run_would_stop"] = stop
        typer.echo(json.dumps(figures, indent=1))
        return
    out.print(
        f"Estimate for {cfg.name} ({result.n_criteria} criteria), before anything is paid:",
        markup=False,
        highlight=False,
    )
    out.print(result.markdown(), markup=False, highlight=False)
    if stop is not None:
        out.print(
            f"A run would stop before its first call, for lack of credentials: {stop}", markup=False, highlight=False
        )


@app.command()
@_guard
def init(
    corpus: Path = typer.Argument(..., help="a corpus file (.csv, .tsv, .jsonl, .json, .parquet) or folder"),
    out_file: Optional[Path] = typer.Option(None, "--out", help="the TOML to write (default: ./<corpus name>.toml)"),
    force: bool = typer.Option(False, "--force", help="replace an existing TOML"),
) -> None:
    """Write the pipeline TOML `taxonomy run CORPUS` would use, without running: columns detected, every other key shown with its default."""  # noqa: E501
    from taxonomy.pipeline_toml import init_pipeline

    path, found, n = init_pipeline(corpus, out_file, force)
    console.print(found.describe(), markup=False, highlight=False)
    out.print(f"Wrote {path} ({n} criteria). Edit it, then: taxonomy run {path}", markup=False, highlight=False)


@app.command()
@_guard
def estimate(
    pipeline: Path = typer.Argument(..., help=TARGET_HELP),
    provider: Optional[str] = ProviderOpt,
    limit: Optional[int] = typer.Option(None, help="only the first N criteria"),
    batch: Optional[bool] = BatchOpt,
    as_json: bool = typer.Option(
        False,
        "--json",
        help="print the same figures as JSON (per stage and total: calls, tokens, online and batch cost USD)",
    ),
) -> None:
    """Per stage: the calls, tokens and cost a run would pay, from the prompts it would send and the configured prices."""  # noqa: E501
    _print_estimate(pipeline, provider, limit, batch, as_json)


@app.command()
@_guard
def breakdown(
    run_dir: Path = typer.Argument(..., help="a run directory with Stage 3 tags"),
    verdicts: list[str] = typer.Option(
        ...,
        "--verdicts",
        help="devai:PATH, paperbench:PATH, a CSV/JSONL/parquet with criterion_id, verifier, verdict[, system], "
        "or VERIFIER=FILE for a file of one verifier's verdicts without a verifier column; repeatable",
    ),
    reference: str = typer.Option("human", help="the verifier whose verdicts are the ground truth"),
    by: str = typer.Option("primary", help="primary | any | a criteria column"),
    boot: int = typer.Option(1000, help="bootstrap resamples of tasks for the 95% CI (0: none)"),
    against: Optional[Path] = typer.Option(
        None,
        "--against",
        help="a second run tagged with this run's taxonomy (`taxonomy tag CORPUS "
        "--taxonomy RUN_DIR/taxonomy.json`): one table, a block per corpus",
    ),
) -> None:
    """Per-capability verifier error rate, FP, FN, F1 (unmet), CIs and paired tests against human labels."""
    from taxonomy.analysis.breakdown_files import Options, run_against, run_breakdown

    if boot < 0:
        raise ConfigError(
            f"--boot {boot}: must be 0 or more; fix: pass the number "
            "of bootstrap resamples (0: no confidence intervals)"
        )
    run = RunDir(run_dir)
    columns = run.read_parquet(CRITERIA, "discover").columns
    if by not in ("primary", "any") and by not in columns:
        raise ConfigError(
            f"--by {by}: no such column in {run.path / CRITERIA}; fix: use primary, any, or one of {', '.join(columns)}"
        )
    used = taxonomy_in_use(run, "breakdown")
    if against is not None:
        if not against.is_dir():
            raise RunError(
                f"{against}: no such run directory; fix: pass the run made "
                f"by `taxonomy tag CORPUS --taxonomy {run_dir / TAXONOMY}`"
            )
        result = run_against(run, RunDir(against), verdicts, Options(reference=reference, by=by, n_boot=0))
        out.print(result.markdown, markup=False, highlight=False)
        out.print(f"Table: {result.files[-1]}")
        return
    result = run_breakdown(run, verdicts, Options(reference=reference, by=by, n_boot=boot))
    record_use(run, "breakdown", used)
    out.print(result.markdown, markup=False, highlight=False)
    out.print(f"Tables: {run_dir / 'breakdown'}")


def _render_report(run_dir: Path, **kwargs: Any) -> Path:
    """matplotlib keeps a font cache. Unless the user chose its place (MPLCONFIGDIR), it goes beside the
    run, with the answer cache, so a command writes nothing outside its outputs (not ~/.cache, ~/.config)."""
    os.environ.setdefault("MPLCONFIGDIR", str(Path(run_dir).resolve().parent / ".matplotlib"))
    from taxonomy.analysis.report import render_report

    return render_report(run_dir, **kwargs)


@app.command()
@_guard
def report(
    run_dir: Path = typer.Argument(..., help="a run directory"),
    against: Optional[Path] = typer.Option(
        None, "--against", help="another run directory (the baseline) to add a `taxonomy diff` section against"
    ),
) -> None:
    """One self-contained HTML page for a run (criteria, tags, label map, hierarchy, charts); opens offline."""
    run = RunDir(run_dir)
    taxonomy_in_use(run, "report")
    run.check_readable()
    diff_md = None
    if against is not None:
        from taxonomy.diff import diff_runs, write_diff

        d = diff_runs(against, run_dir)
        out.print(f"Diff:   {write_diff(d)}")
        diff_md = d.to_markdown()
    out.print(f"Report: {_render_report(run_dir, diff_markdown=diff_md)}")


@app.command()
@_guard
def edit(
    run_dir: Path = typer.Argument(..., help="a run directory with a taxonomy and Stage 3 tags"),
    op: str = typer.Argument(..., help="rename | merge | split | describe"),
    names: list[str] = typer.Argument(
        ...,
        help='rename OLD NEW | merge A B (B folds into A) | split A | describe A "what it checks, in one sentence"',
        show_default=False,
    ),
    accept_violations: bool = typer.Option(
        False,
        "--accept-violations",
        help="keep an edit that breaks a merge constraint, recording the violations in taxonomy.json",
    ),
    # Hidden: the other spelling still works in commands already written down.
    allow_violations: bool = typer.Option(False, "--allow-violations", hidden=True),
    provider: Optional[str] = ProviderOpt,
    quiet: bool = QuietOpt,
) -> None:
    """Edit the taxonomy (rename, merge, split, or describe what a capability checks) and propagate it: new hash, constraints re-checked, tags updated, report redrawn."""  # noqa: E501
    from taxonomy.edit import apply_edit

    s = _session(run_dir, provider, None, quiet)
    result = apply_edit(s, op, names, allow_violations=accept_violations or allow_violations)
    out.print(
        f"Taxonomy {result.old_hash} -> {result.new_hash}: {len(result.taxonomy.capabilities)} capabilities; "
        f"{result.retagged} criteria re-tagged. Before the edit: {result.backup}",
        highlight=False,
    )
    # names and messages are printed as they are (escape), never read as markup
    for note in result.notes:
        console.print(f"  [yellow]note:[/yellow] {escape(note)}", highlight=False)
    for v in result.violations:
        console.print(f"  [red]constraint:[/red] {escape(v)}", highlight=False)
    for why in result.stale:
        console.print(f"  [yellow]stale:[/yellow] {escape(why)}", highlight=False)
    if (run_dir / REPORT).exists():
        out.print(f"Report: {_render_report(run_dir)}")


@app.command()
@_guard
def diff(
    run_a: Path = typer.Argument(..., help="the first run directory (the baseline)"),
    run_b: Path = typer.Argument(..., help="the second run directory"),
    out_file: Optional[Path] = typer.Option(
        None, "--out", help="markdown file to write (default: RUN_B/diff/HASH_A-vs-HASH_B.md)"
    ),
) -> None:
    """Compare two taxonomies by the criteria they tag: one-to-one matches, renames, splits, merges, moved criteria, ARI and NMI."""  # noqa: E501
    from taxonomy.diff import diff_runs, write_diff

    d = diff_runs(run_a, run_b)
    out.print(d.to_markdown(max_moved=20), markup=False, highlight=False)
    out.print(f"Diff: {write_diff(d, out_file)}")


@app.command()
@_guard
def audit(
    target: Path = typer.Argument(..., help="the new corpus: a pipeline TOML or a corpus file"),
    taxonomy: Path = typer.Option(
        ..., "--taxonomy", help="the frozen taxonomy to audit against: a run directory or its taxonomy.json"
    ),
    provider: Optional[str] = ProviderOpt,
    run_dir: Optional[Path] = RunDirOpt,
    quiet: bool = QuietOpt,
) -> None:
    """Coverage audit of a new corpus against a frozen taxonomy: shares, gaps, unmapped, duplicates, bundles."""
    from taxonomy.analysis.audit_run import run_audit
    from taxonomy.targets import frozen_taxonomy

    taxonomy = frozen_taxonomy(taxonomy)
    s = _session(target, provider, run_dir, quiet, frozen=taxonomy)
    result = run_audit(s, taxonomy)
    out.print(result.to_markdown(max_rows=15), markup=False, highlight=False)
    out.print(f"Audit: {s.run.path / 'audit'}")


@app.command()
@_guard
def guidance(
    run_dir: Path = typer.Argument(..., help="a run directory with Stage 3 tags"),
    notes: Optional[Path] = typer.Option(None, "--notes", help="domain notes (markdown) to weave into the guidance"),
    provider: Optional[str] = ProviderOpt,
    quiet: bool = QuietOpt,
) -> None:
    """One guidance file per capability, a criterion -> guidance routing table, and one judge-guidance file per task."""
    from taxonomy.guidance import generate_guidance

    s = _session(run_dir, provider, None, quiet)
    used = taxonomy_in_use(s.run, "guidance")
    info = generate_guidance(s, notes)
    s.run.record("guidance", info)
    record_use(s.run, "guidance", used)
    out.print(
        f"{info['capabilities']} capability files, {info['tasks']} task files, "
        f"routing for {info['routed_criteria']} criteria: {info['folder']}"
    )


@app.command()
@_guard
def export(
    run_dir: Path = typer.Argument(..., help="a run directory with Stage 3 tags"),
    to: list[str] = typer.Option(
        ["all"], "--to", help="vally | openjudge | gandalf | jsonl | all; repeatable or comma-separated"
    ),
    out_dir: Optional[Path] = typer.Option(
        None, "--out", help="output folder (default: RUN_DIR/export/), one subfolder per format"
    ),
    notes: Optional[Path] = typer.Option(
        None, "--notes", help="domain notes for the guidance; drafts it again if it was drafted with other notes"
    ),
    provider: Optional[str] = ProviderOpt,
    quiet: bool = QuietOpt,
) -> None:
    """The guidance and routing as grader configs: vally eval.yaml, OpenJudge graders.json, Gandalf markdown, routing.jsonl."""  # noqa: E501
    from taxonomy.guidance.export import export_run, parse_formats

    formats = parse_formats(to)
    s = _session(run_dir, provider, None, quiet)
    result = export_run(s, formats, out_dir, notes)
    if result.guidance == "drafted":
        console.print("guidance: drafted for this export (no current guidance/drafts.json in the run)", highlight=False)
    if result.unrecorded:
        console.print(
            f"note: the export is whole but not listed in the run's manifest ({result.unrecorded})",
            markup=False,
            highlight=False,
        )
    for fmt in result.files:
        counts = ", ".join(f"{k}={v}" for k, v in result.counts[fmt].items())
        out.print(
            f"{fmt}: {result.files[fmt][0]} ({counts}; {len(result.files[fmt])} files, "
            f"{result.bytes(fmt) / 1024:.0f} KiB, {result.seconds[fmt]:.2f} s)",
            highlight=False,
        )


@app.command()
@_guard
def distill(
    run_dir: Path = typer.Argument(..., help="a run directory with a finished Stage 3"),
    holdout: float = typer.Option(0.2, help="share of tasks held out to measure agreement"),
    seed: int = typer.Option(0),
) -> None:
    """Train a cheap classifier on the Stage 3 tags (held-out agreement by task) for `taxonomy tag --distilled`."""
    from taxonomy.distill import train_distilled

    report = train_distilled(RunDir(run_dir), holdout=holdout, seed=seed)
    out.print(report.markdown(), markup=False, highlight=False)
    out.print(f"Model: {report.model_path}")


# The linter's command lives with the linter (taxonomy/lint/command.py): its options are its own.
app.command(name="lint")(_guard(_lint))


def main() -> None:  # pragma: no cover - console entry point
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    app()
