"""The `taxonomy lint` command's options; cli.py registers it. Imports stay lazy so `taxonomy --help` is fast."""
from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer


class Format(str, Enum):
    text = "text"
    json = "json"
    sarif = "sarif"
    github = "github"


class FailOn(str, Enum):
    error = "error"
    warning = "warning"
    never = "never"


def lint(
    target: Path = typer.Argument(..., help="a corpus file, a pipeline TOML or a run directory (which adds its capabilities)"),
    fmt: Format = typer.Option(Format.text, "--format", "-f", help="text (grouped by task) | json | sarif (2.1.0) | github (workflow annotations)"),
    select: Optional[str] = typer.Option(None, help="only these rules, comma-separated (default: all)"),
    ignore: Optional[str] = typer.Option(None, help="leave out these rules, comma-separated"),
    fail_on: FailOn = typer.Option(FailOn.error, "--fail-on", help="exit 1 when a finding is at or above this severity: error | warning | never"),
    provider: Optional[str] = typer.Option(None, "--provider", "-p", help="auto | gemini | vertex | openai | offline (default: the config's llm.provider; "
                                           "auto = gemini with a key, else offline): with a model, one review call per task is added"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bars"),
) -> None:
    """Find defective criteria: inverted signs, contradictions, duplicates, compound, vague, weight outliers, uncovered briefs."""
    from taxonomy.lint.check import check, fails, rules
    from taxonomy.lint.output import render

    chosen = rules(select, ignore)
    found, summ = check(target, chosen, provider, quiet)
    sys.stdout.write(render(fmt.value, found, summ))
    sys.stdout.flush()
    if fails(found, fail_on.value):
        raise typer.Exit(1)
