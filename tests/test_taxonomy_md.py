"""taxonomy.md's share column: one figure per capability, said as what it is (Stage 3's tags once tagged, the
merge's estimate before)."""

from __future__ import annotations

import re

import polars as pl
import pytest

from taxonomy.shares import primary_shares
from taxonomy.taxonomy_io import load_taxonomy
from tests.conftest import invoke, llm_devai_run, write_pipeline

pytestmark = pytest.mark.slow  # full runs


def _table_shares(markdown: str) -> dict[str, str]:
    return {m[1]: m[2] for m in re.finditer(r"^\| `([^`]+)`[^|]* \| (\d+\.\d)% \|", markdown, re.M)}


def test_taxonomy_md_gives_the_stage3_share_once_tagged(tmp_path):
    run = llm_devai_run(tmp_path)
    tagged = primary_shares(pl.read_parquet(run / "stage3_tags.parquet"), pl.read_parquet(run / "criteria.parquet"))
    shares = {r["capability"]: f"{100 * r['share']:.1f}" for r in tagged.iter_rows(named=True)}
    expected = {name: shares.get(name, "0.0") for name in load_taxonomy(run / "taxonomy.json").names()}
    markdown = (run / "taxonomy.md").read_text()
    assert "| share (Stage 3) |" in markdown and _table_shares(markdown) == expected
    summary = (run / "stage3_summary.md").read_text()
    assert all(f"| {name} | " in summary and f"| {share}% |" in summary for name, share in expected.items())


def test_taxonomy_md_before_stage3_says_its_share_is_the_merge_estimate(tmp_path, offline_env):
    toml = write_pipeline(tmp_path)
    run = tmp_path / "run"
    for stage in ("discover", "cluster", "canonicalize", "merge"):
        invoke(stage, *([toml, "--run-dir", run] if stage == "discover" else [run]), "-q")
    markdown = (run / "taxonomy.md").read_text()
    assert "| share at merge |" in markdown and "Stage 2c's estimate" in markdown and "share (Stage 3)" not in markdown
