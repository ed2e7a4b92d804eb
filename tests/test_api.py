"""The public Python API (`import taxonomy`): fit on a frame, tag and audit new criteria against the fitted run, lint,
load a run; the LLM path through the fake Gemini server. The first test repeats the README's "From Python" example."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import taxonomy
from taxonomy.config import ConfigError
from taxonomy.run import RunError

ROOT = Path(__file__).resolve().parent.parent
HELDOUT = ROOT / "benchmarks" / "heldout"


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """The README's example: an offline fit on a bundled rubric read as a polars frame, in a fresh folder."""
    folder = tmp_path_factory.mktemp("api")
    with pytest.MonkeyPatch.context() as mp:
        for key in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
            mp.delenv(key, raising=False)
        mp.chdir(folder)
        criteria = pl.read_csv(HELDOUT / "report_writing.csv")
        yield taxonomy.fit(criteria, name="report_writing"), folder


def test_fit_on_a_frame_offline_gives_the_taxonomy_the_tags_and_the_run_folder(fitted):
    run, folder = fitted
    assert run.backend == "offline"
    assert len(run.taxonomy.capabilities) == 10 and run.tags.height == 400
    assert run.path == folder / "outputs" / "report_writing" / "offline"
    assert set(run.tags["primary"].drop_nulls()) <= set(run.taxonomy.names())
    assert (run.path / "pipeline.toml").is_file()  # as `taxonomy run FILE` leaves, to repeat the run from the CLI
    assert "backend='offline', 400 criteria tagged" in repr(run)


def test_load_reads_a_fitted_run_back(fitted):
    run, _ = fitted
    again = taxonomy.load(run.path)
    assert again.taxonomy.content_hash == run.taxonomy.content_hash
    assert again.tags.equals(run.tags) and again.backend == "offline" and again.criteria.height == 400


def test_read_corpus_gives_the_criteria_as_a_run_reads_them(fitted):
    run, _ = fitted
    assert taxonomy.read_corpus(run.path).equals(run.criteria)
    from_file = taxonomy.read_corpus(HELDOUT / "report_writing.csv")
    shared = [c for c in run.criteria.columns if c != "source"]  # source names the file each came from
    assert from_file.select(shared).equals(run.criteria.select(shared))


def test_tag_new_criteria_against_the_fitted_run(fitted, monkeypatch):
    run, folder = fitted
    monkeypatch.chdir(folder)
    tagged = taxonomy.tag(pl.read_csv(HELDOUT / "es_support.csv"), run)
    assert tagged.tags.height == 299 and tagged.taxonomy.content_hash == run.taxonomy.content_hash
    assert set(tagged.tags["primary"].drop_nulls()) <= set(run.taxonomy.names())
    assert tagged.path.name == f"offline-taxonomy-{run.taxonomy.content_hash[:8]}"
    assert taxonomy.load(run.path).tags.equals(run.tags)  # the fitted run is left as it was


def test_audit_a_new_corpus_returns_its_frames(fitted, monkeypatch):
    run, folder = fitted
    monkeypatch.chdir(folder)
    coverage = taxonomy.audit(HELDOUT / "es_support.csv", run, run_dir=folder / "audit-es")
    assert coverage.shares["n"].sum() <= 299 and set(coverage.shares["capability"]) == set(run.taxonomy.names())
    assert coverage.shares["reference_share"].sum() == pytest.approx(1.0, abs=0.01)
    assert (folder / "audit-es" / "audit" / "audit.md").read_text().startswith("# Coverage audit")


def test_lint_rubric_gives_one_row_per_finding_for_a_frame_or_a_file():
    from_frame = taxonomy.lint_rubric(pl.read_csv(HELDOUT / "report_writing.csv"))
    from_file = taxonomy.lint_rubric(HELDOUT / "report_writing.csv")
    assert from_frame.group_by("rule").len().rows() == [("compound", 4)]
    assert from_frame["file"].null_count() == from_frame.height  # a frame has no file to point at
    assert from_file.drop("file", "line").equals(from_frame.drop("file", "line"))
    assert from_file["line"].drop_nulls().len() == from_file.height
    assert taxonomy.lint_rubric(HELDOUT / "es_support.csv", select="compound").height == 0


def test_bad_arguments_stop_with_a_fix_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    frame = pl.read_csv(HELDOUT / "es_support.csv")
    with pytest.raises(ConfigError, match="fix: use one of"):
        taxonomy.fit(frame, provider="gemni")
    with pytest.raises(RunError, match="holds no taxonomy.json; fix:"):
        taxonomy.tag(frame, tmp_path)
    with pytest.raises(TypeError, match="provder"):  # a misspelt keyword is not dropped
        taxonomy.audit(frame, tmp_path, provder="gemini")
    assert list(tmp_path.iterdir()) == []


def test_fit_a_file_with_a_pipelines_settings_and_overrides(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for key in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    (tmp_path / "tuned.toml").write_text('name = "tuned"\n[corpus]\npath = "none.csv"\n[cluster]\nk = 12\n')
    run = taxonomy.fit(
        HELDOUT / "es_support.csv",
        pipeline=tmp_path / "tuned.toml",
        settings={"cluster": {"seed": 7}, "corpus": {"limit": 120}},
    )
    recorded = json.loads((run.path / "manifest.json").read_text())["settings"]
    assert run.criteria.height == 120 and run.path == tmp_path / "outputs" / "es_support" / "offline-first120"
    assert recorded["cluster"]["k"] == 12 and recorded["cluster"]["seed"] == 7
    with pytest.raises(ConfigError, match="unknown key.*sed; fix:"):
        taxonomy.fit(HELDOUT / "es_support.csv", settings={"cluster": {"sed": 7}})


def test_fit_through_the_llm_path(gemini_env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    criteria = pl.read_csv(HELDOUT / "report_writing.csv").head(60)
    run = taxonomy.fit(criteria, provider="gemini", run_dir=tmp_path / "run")
    assert run.backend == "gemini" and gemini_env.count("generate") > 0
    assert run.tags.height == 60 and len(run.taxonomy.capabilities) >= 2
    assert taxonomy.load(tmp_path / "run").backend == "gemini"


def test_import_taxonomy_loads_no_heavy_library():
    code = "import sys, taxonomy; print(sorted(m for m in ('polars', 'sklearn', 'numpy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert set(taxonomy.__all__) <= set(dir(taxonomy)) and all(getattr(taxonomy, n).__doc__ for n in taxonomy.__all__)
