"""benchmarks/heldout.py: the held-out corpora's gold kinds measure the run and never feed it."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parent.parent


def _load():
    spec = importlib.util.spec_from_file_location("benchmarks_heldout", ROOT / "benchmarks" / "heldout.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["benchmarks_heldout"] = module
    spec.loader.exec_module(module)
    return module


def test_the_gold_kind_scores_the_run_and_never_feeds_it(offline_env, tmp_path):
    h = _load()
    source = ROOT / "benchmarks" / "heldout" / "report_writing.csv"
    frame = pl.read_csv(source)
    kinds = frame["gold_kind"].to_list()
    random.Random(0).shuffle(kinds)
    (tmp_path / "true").mkdir()
    (tmp_path / "shuffled").mkdir()
    frame.write_csv(tmp_path / "true" / source.name)
    frame.with_columns(pl.Series("gold_kind", kinds)).write_csv(tmp_path / "shuffled" / source.name)
    true = h.score(tmp_path / "true" / source.name, tmp_path / "runs-true")
    shuffled = h.score(tmp_path / "shuffled" / source.name, tmp_path / "runs-shuffled")
    same = ("criteria", "capabilities", "leak", "largest", "script_nmi")
    assert {k: true[k] for k in same} == {k: shuffled[k] for k in same}, (
        true,
        shuffled,
    )  # the run did not see the kinds
    assert true["criteria"] == frame.height and 8 <= true["capabilities"] <= 10
    # ... and they score it: the true kinds agree with the capabilities and the labels, shuffled ones barely do
    assert true["nmi"] > 2 * shuffled["nmi"] and true["labels_nmi"] > shuffled["labels_nmi"] + 0.1, (true, shuffled)
    assert true["best_merge_nmi"] >= true["nmi"] * 0.9
    # nor does a column the stages read hold them in the run's copy of the corpus (it keeps `gold_kind` as an
    # extra, unread)
    snapshot = pl.read_parquet(tmp_path / "runs-true" / source.stem / "criteria.parquet")
    gold = set(frame["gold_kind"].to_list())
    assert not [
        c
        for c in snapshot.columns
        if c != "gold_kind" and snapshot[c].dtype == pl.Utf8 and set(snapshot[c].drop_nulls().to_list()) & gold
    ]
