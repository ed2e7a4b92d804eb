"""The `taxonomy lint` command's options; cli.py registers it. Imports stay lazy so `taxonomy --help` is fast."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer


def lint(
    target: Path = typer.Argument(..., help="a corpus file, a pipeline TOML or a run directory (which adds its capabilities)"),
    fmt: str = typer.Option("text", "--format", "-f", help="text (grouped by task) | json | sarif (2.1.0) | github (workflow annotations)"),
    select: Optional[str] = typer.Option(None, help="only these rules, comma-separated (default: all)"),
    ignore: Optional[str] = typer.Option(None, help="leave out these rules, comma-separated"),
    fail_on: str = typer.Option("error", "--fail-on", help="exit 1 when a finding is at or above this severity: error | warning | never"),
    provider: Optional[str] = typer.Option(None, "--provider", "-p", help="auto | gemini | vertex | openai | offline (default: the config's llm.provider; "
                                           "auto = gemini with a key, else offline): with a model, one review call per task is added"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bars"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print what the model's review would cost (calls, tokens, USD) and stop; nothing is sent"),
) -> None:
    """Find defective criteria: inverted signs, contradictions, duplicates, compound, vague, weight outliers, uncovered briefs."""
    from taxonomy.lint.check import FAIL_ON, check, choice, fails, rules
    from taxonomy.lint.output import FORMATS, render

    fmt, fail_on = choice("--format", fmt, FORMATS), choice("--fail-on", fail_on, FAIL_ON)
    if dry_run:
        from taxonomy.lint.check import review_cost

        sys.stdout.write(review_cost(target))
        return
    chosen = rules(select, ignore)
    # A progress bar would break the JSON, SARIF or annotations a program reads from stdout.
    found, summ = check(target, chosen, provider, quiet or fmt != "text")
    sys.stdout.write(render(fmt, found, summ))
    sys.stdout.flush()
    if fails(found, fail_on):
        raise typer.Exit(1)
