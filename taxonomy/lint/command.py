"""The `taxonomy lint` command's options; cli.py registers it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from taxonomy.config import ConfigError
from taxonomy.lint.findings import SEVERITIES
from taxonomy.lint.output import FORMATS, render


def lint(
    target: Path = typer.Argument(
        ..., help="a corpus file, a pipeline TOML or a run directory (which adds its capabilities)"
    ),
    fmt: str = typer.Option(
        "text", "--format", "-f", help="text (grouped by task) | json | sarif (2.1.0) | github (workflow annotations)"
    ),
    select: Optional[str] = typer.Option(
        None, help="only these rules, comma-separated, previews included (default: every rule on by default)"
    ),
    ignore: Optional[str] = typer.Option(None, help="leave out these rules, comma-separated"),
    preview: bool = typer.Option(
        False,
        "--preview",
        help="also run the preview rules, off by default since under half their findings "
        "were judged real (docs/LINT.md)",
    ),
    fail_on: str = typer.Option(
        "error", "--fail-on", help="exit 1 when a finding is at or above this severity: error | warning | never"
    ),
    min_severity: str = typer.Option(
        "info",
        "--min-severity",
        help="list only findings at or above this severity: info | warning | error (the summary still counts all)",
    ),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="write the findings to this file instead of stdout"),
    provider: Optional[str] = typer.Option(
        None,
        "--provider",
        "-p",
        help="auto | gemini | vertex | openai | offline (default: the config's llm.provider; "
        "auto = gemini with a key, else offline): with a model, one review call per task is added",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bars"),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="print what the model's review would cost (calls, tokens, USD) and stop; nothing is sent",
    ),
) -> None:
    """Find defective criteria: inverted signs, contradictions, duplicates, compound, vague, weight outliers, uncovered briefs."""  # noqa: E501
    # lazy: check.py reads its target through the pipeline (jinja2, the LLM runner: about 0.15 s), and cli.py
    # imports this module to build `taxonomy --help`, which needs none of it
    from taxonomy.lint.check import FAIL_ON, at_least, check, choice, fails, review_cost, rules

    fmt, fail_on = choice("--format", fmt, FORMATS), choice("--fail-on", fail_on, FAIL_ON)
    min_severity = choice("--min-severity", min_severity, SEVERITIES)
    if dry_run:
        sys.stdout.write(review_cost(target))
        return
    plan = rules(select, ignore, preview)
    # A progress bar would break the JSON, SARIF or annotations a program reads from stdout.
    found, summ = check(target, plan, provider, quiet or (fmt != "text" and out is None))
    listed = at_least(found, min_severity)
    summ["shown"] = len(listed)
    _write(render(fmt, listed, summ), out)
    if fails(found, fail_on):
        raise typer.Exit(1)


def _write(text: str, out: Path | None) -> None:
    if out is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    except OSError as e:
        raise ConfigError(
            f"--out {out}: cannot write ({e.strerror}); fix: give a file in a folder you can write to"
        ) from None
    sys.stdout.write(f"lint: findings written to {out}\n")
