"""What a command says besides its results: why it changed a setting, whose errors a count holds, a misspelt
option or a missing key refused before anything is written."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT, invoke, refused, support_csv

RUBRIC = ROOT / "benchmarks" / "heldout" / "report_writing.csv"


@pytest.fixture(autouse=True)
def _offline(offline_env):
    return offline_env


@pytest.mark.slow  # a full run
def test_a_run_says_why_k_is_lower_and_whose_lint_errors_it_counts(here):
    """The rubric holds one criterion twice with opposite signs (a lint error); cluster.k asks for more clusters
    than labels."""
    rows = (
        RUBRIC.read_text().rstrip("\n")
        + "\n"
        + "".join(
            f'eu_ev_battery_market,"The report includes a table of gigafactory capacities by country.",{w},x\n'
            for w in (2, -2)
        )
    )
    (here / "rubric.csv").write_text(rows)
    (here / "rubric.toml").write_text(
        '[corpus]\npath = "rubric.csv"\n[cluster]\nk = 5000\n[merge]\naccept_violations = true\n'
    )
    output = invoke("run", "rubric.toml", "-q", "--no-report").output
    k = re.search(
        r"note: k = (\d+), not the pipeline config's cluster.k = 5000: Stage 1 gave only (\d+) unique labels", output
    )
    assert k and k[1] == k[2], output
    lines = output.splitlines()
    lint = next(i for i, line in enumerate(lines) if line.startswith("Lint: "))
    assert re.match(r"Lint: [1-9]\d* errors?", lines[lint]), lines[lint]
    assert "defects of the rubric itself" in lines[lint - 1] and "not errors of this run" in lines[lint - 1]


@pytest.mark.parametrize("command", ["run", "estimate", "discover"])
def test_a_misspelt_provider_stops_before_anything_is_written(here, command):
    support_csv(here / "support.csv", 20)
    line = refused(command, "support.csv", "--provider", "gemni")
    assert "gemni" in line and all(p in line for p in ("gemini", "vertex", "openai", "offline"))
    assert sorted(p.name for p in here.iterdir()) == ["support.csv"]


def test_a_missing_key_stops_before_a_run_folder_is_made(here, monkeypatch):
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    support_csv(here / "support.csv", 20)
    line = refused("run", "support.csv", "--provider", "gemini")
    assert "GEMINI_API_KEY" in line
    assert not list(here.glob("outputs/support/gemini*")), "an empty run folder was left behind"
