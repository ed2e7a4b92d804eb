"""The pipeline TOML: a misspelt or missing key refused in one line naming the known one, a TOML holding only
[corpus], the run folder's own pipeline.toml, and the default LLM settings' bounds."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import polars as pl
import pytest

from taxonomy.config import LLMConfig
from tests.conftest import ROOT, devai_frame, invoke, refused, support_csv

RUBRIC = ROOT / "benchmarks" / "heldout" / "report_writing.csv"


@pytest.fixture(autouse=True)
def _offline(offline_env):
    return offline_env


RENAME_PTH = ("key corpus.pth: not a setting; did you mean corpus.path?", "fix: rename pth to path")


@pytest.mark.parametrize(
    "toml, said",
    [
        ('name = "p"\n[corpus]\npth = "{rubric}"\n', RENAME_PTH),
        ('[corpus]\npth = "{rubric}"\n', RENAME_PTH),
        (
            'name = "p"\n[corpus]\npath = "{rubric}"\n[corpus.colums]\ntext = "criterion"\n',
            ("key corpus.colums: not a setting; did you mean corpus.columns?", "taxonomy init CORPUS"),
        ),
        (
            'name = "p"\n[corpus]\npath = "{rubric}"\n[cluster]\nzzz = 1\n',
            ("not a setting in [cluster] (its keys: unit, label_weight, k, linkage",),
        ),
    ],
    ids=["named", "unnamed", "a-table", "no-close-key"],
)
def test_a_misspelt_key_is_named_with_the_known_one(tmp_path, toml, said):
    (tmp_path / "p.toml").write_text(toml.replace("{rubric}", str(RUBRIC)))
    error = refused("run", tmp_path / "p.toml")
    assert all(part in error for part in said), error
    assert "remove corpus.path" not in error and "key name" not in error and "Extra inputs" not in error


def test_a_missing_path_is_asked_for_not_removed(tmp_path):
    toml = tmp_path / "p.toml"
    toml.write_text('[corpus]\nformat = "table"\n')
    error = refused("run", toml)
    assert "key corpus.path: required and missing; fix: add path = ... under [corpus]" in error


def test_the_default_settings_stop_a_silent_server_within_minutes():
    cfg = LLMConfig()
    assert (cfg.timeout_retries + 1) * cfg.timeout_s <= 300 and cfg.timeout_retries < cfg.max_retries


def test_a_toml_with_only_corpus_names_the_pipeline_and_detects_columns(here):
    support_csv(here / "support.csv", 60)
    (here / "support.toml").write_text('[corpus]\npath = "support.csv"\n')
    invoke("discover", "support.toml", "-q")
    run = here / "outputs" / "support" / "offline"  # named after the corpus file
    assert json.loads((run / "manifest.json").read_text())["pipeline"] == "support"
    criteria = pl.read_parquet(run / "criteria.parquet")
    assert criteria["text"].to_list() == devai_frame()["text"].head(60).to_list()
    assert criteria["weight"].unique().to_list() == [2.0] and criteria["brief"].str.len_chars().min() > 0
    # a column the TOML names still wins over detection
    (here / "brief.toml").write_text('[corpus]\npath = "support.csv"\n[corpus.columns]\ntext = "brief"\n')
    invoke("discover", "brief.toml", "--run-dir", "brief-run", "-q")
    named = pl.read_parquet(here / "brief-run" / "criteria.parquet")
    assert set(named["text"]) == set(devai_frame()["brief"].head(60))  # one brief a task: repeats collapsed


@pytest.mark.slow  # a full run, moved and run again
def test_the_run_folders_pipeline_toml_holds_relative_paths_and_moves(here, tmp_path, monkeypatch):
    support_csv(here / "support.csv", 60)
    invoke("run", "support.csv", "-q", "--no-report")
    toml = here / "outputs" / "support" / "offline" / "pipeline.toml"
    raw = tomllib.loads(toml.read_text())
    assert not Path(raw["corpus"]["path"]).is_absolute() and not Path(raw["output"]["dir"]).is_absolute()
    assert str(tmp_path) not in toml.read_text()
    moved = tmp_path / "elsewhere" / "support"
    monkeypatch.chdir(tmp_path)
    shutil.move(here, moved)  # the folder with its corpus and its outputs
    again = invoke("run", moved / "outputs" / "support" / "offline" / "pipeline.toml", "-q", "--no-report")
    assert again.output.count("already on disk and up to date, skipped") == 5, again.output
    assert str(moved / "outputs" / "support" / "offline") in again.output
