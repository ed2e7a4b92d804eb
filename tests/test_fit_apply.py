"""The key-less tagger is fitted once, on the run's corpus, and applied to any criteria.

Everything goes through the CLI with no key. A run saves its tagger beside taxonomy.json; `taxonomy tag FILE
--taxonomy RUN` applies it to each criterion's own text, so what else is in the file never moves a tag, a
subset keeps the run's tags, and a tagger fitted for another taxonomy is never applied.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

from taxonomy.offline.model import Tagger
from taxonomy.run import TAGGER
from taxonomy.taxonomy_io import load_taxonomy
from tests.conftest import ROOT, invoke, write_pipeline


@pytest.fixture(autouse=True)
def _in_a_folder_of_its_own(tmp_path, monkeypatch):
    """Commands write their answer cache under ./outputs: each test runs in its own folder, never the checkout."""
    monkeypatch.chdir(tmp_path)


SUPPORT = ROOT / "tests" / "fixtures" / "scripts" / "support_en_120.csv"
REPORT = ROOT / "benchmarks" / "heldout" / "report_writing.csv"


def _run(corpus: Path, run_dir: Path) -> Path:
    invoke("run", corpus, "--provider", "offline", "--run-dir", run_dir, "-q", "--no-report")
    return run_dir


def _tag(corpus: Path, frozen: Path, run_dir: Path) -> dict[str, str]:
    """criterion text -> primary tag, tagging `corpus` against the frozen run."""
    invoke("tag", corpus, "--taxonomy", frozen, "--provider", "offline", "--run-dir", run_dir, "-q")
    return _by_text(run_dir)


def _by_text(run_dir: Path) -> dict[str, str]:
    crit = pl.read_parquet(run_dir / "criteria.parquet").select("criterion_id", "text")
    tags = pl.read_parquet(run_dir / "stage3_tags.parquet").select("criterion_id", "primary")
    return dict(crit.join(tags, on="criterion_id").select("text", "primary").iter_rows())


def _rows(corpus: Path, n: int | None, folder: Path, name: str, skip: int = 0) -> Path:
    frame = pl.read_csv(corpus).slice(skip, n).select("task_id", "criterion")
    path = folder / name
    frame.write_csv(path)
    return path


@pytest.fixture(scope="module")
def support_run(tmp_path_factory) -> Path:
    return _run(SUPPORT, tmp_path_factory.mktemp("support") / "run")


def test_the_run_saves_the_tagger_it_tagged_with(offline_env, support_run):
    tagger = Tagger.load(support_run)
    taxonomy = load_taxonomy(support_run / "taxonomy.json")
    assert tagger is not None and tagger.fits(taxonomy) and tagger.names == taxonomy.names()
    assert (support_run / TAGGER).stat().st_size < 5_000_000
    texts = pl.read_parquet(support_run / "criteria.parquet")["text"].to_list()
    primary = [tagger.names[j] for j in tagger.scores(texts).argmax(axis=1)]
    assert dict(zip(texts, primary)) == _by_text(support_run)


def test_other_criteria_in_the_file_never_move_a_tag(offline_env, tmp_path, support_run):
    """A criterion is tagged by its own text: 30 support criteria alone, and the same 30 among 60 report-writing
    criteria of other tasks, get the same tags (refitting the features on the file moved them)."""
    alone = _tag(_rows(SUPPORT, 30, tmp_path, "alone.csv", skip=45), support_run, tmp_path / "alone")
    mixed = pl.concat(
        [pl.read_csv(tmp_path / "alone.csv"), pl.read_csv(REPORT).head(60).select("task_id", "criterion")]
    )
    mixed.write_csv(tmp_path / "mixed.csv")
    among = _tag(tmp_path / "mixed.csv", support_run, tmp_path / "mixed")
    assert {t: among[t] for t in alone} == alone


def test_a_subset_and_a_single_criterion_keep_the_runs_tags(offline_env, tmp_path, support_run):
    run = _by_text(support_run)
    subset = _tag(_rows(SUPPORT, 25, tmp_path, "last.csv", skip=95), support_run, tmp_path / "last")
    assert sum(run[t] == p for t, p in subset.items()) >= 0.95 * len(subset)
    one = _tag(_rows(SUPPORT, 1, tmp_path, "one.csv", skip=60), support_run, tmp_path / "one")
    assert all(run[t] == p for t, p in one.items()) and len(one) == 1


def test_a_healthbench_subset_keeps_its_tags(offline_env, tmp_path):
    """Once, HealthBench's first 40 criteria kept 20 of 40 primary tags against the full run."""
    run_dir = tmp_path / "run"
    invoke("run", write_pipeline(tmp_path, "healthbench"), "--run-dir", run_dir, "-q", "--no-report")
    first = pl.read_parquet(run_dir / "criteria.parquet").head(40).select("task_id", pl.col("text").alias("criterion"))
    first.write_csv(tmp_path / "first40.csv")
    run, frozen = _by_text(run_dir), _tag(tmp_path / "first40.csv", run_dir, tmp_path / "tagged")
    assert len(frozen) >= 39 and sum(run[t] == p for t, p in frozen.items()) >= 0.95 * len(frozen)


def test_a_tagger_fitted_for_another_taxonomy_is_never_applied(offline_env, tmp_path, support_run):
    """A tagger.npz from another run (another taxonomy) beside the taxonomy is refitted from the run's own
    corpus, not applied: the run's tags hold."""
    frozen = tmp_path / "frozen"
    shutil.copytree(support_run, frozen)
    other = _run(_rows(REPORT, 60, tmp_path, "report60.csv"), tmp_path / "other")
    shutil.copy2(other / TAGGER, frozen / TAGGER)
    tagged = _tag(_rows(SUPPORT, 40, tmp_path, "first40.csv"), frozen, tmp_path / "tagged")
    run = _by_text(support_run)
    assert sum(run[t] == p for t, p in tagged.items()) >= 0.95 * len(tagged)
    assert Tagger.load(frozen).fits(load_taxonomy(frozen / "taxonomy.json"))


def test_an_edit_carries_the_tagger_to_the_new_names(offline_env, tmp_path, support_run):
    run_dir = tmp_path / "run"
    shutil.copytree(support_run, run_dir)
    old = load_taxonomy(run_dir / "taxonomy.json").names()[0]
    invoke("edit", run_dir, "rename", old, "check_renamed_by_hand_capability", "-q")
    assert Tagger.load(run_dir).fits(load_taxonomy(run_dir / "taxonomy.json"))
    run = {t: ("check_renamed_by_hand_capability" if p == old else p) for t, p in _by_text(support_run).items()}
    tagged = _tag(_rows(SUPPORT, 40, tmp_path, "first40.csv"), run_dir, tmp_path / "tagged")
    assert all(run[t] == p for t, p in tagged.items())


def test_a_run_fits_its_tagger_once(offline_env, tmp_path, monkeypatch):
    """The merge fits the tagger to show each capability by its criteria; Stage 3 rebinds that fit to the named
    taxonomy and saves it, rather than fitting the same one again."""
    fits = []
    fit = Tagger.fit.__func__
    monkeypatch.setattr(Tagger, "fit", classmethod(lambda cls, *a, **k: fits.append(1) or fit(cls, *a, **k)))
    run = _run(SUPPORT, tmp_path / "run")
    assert len(fits) == 1
    assert Tagger.load(run).fits(load_taxonomy(run / "taxonomy.json"))
