"""The `taxonomy lint` command's options; cli.py registers it. Imports stay lazy so `taxonomy --help` is fast."""
from __future__ import annotations

from pathlib import Path

import typer


def lint(target: Path = typer.Argument(..., help="a corpus file, a pipeline TOML or a run directory")) -> None:
    """Find defective criteria: inverted signs, contradictions, duplicates, compound, vague, weight outliers."""
    raise NotImplementedError("taxonomy lint is being built")
