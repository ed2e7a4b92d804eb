"""The default number of micro-clusters scales with the unique labels (the paper's 80 is for thousands of
them); an explicit cluster.k is the user's; the cluster stage says which k ran and why, and the estimate
plans the same k."""

from __future__ import annotations

import json
import re

import polars as pl

from taxonomy.config import ClusterConfig
from tests.conftest import invoke, write_pipeline


def _clustered(tmp_path, extra: str = ""):
    toml = write_pipeline(tmp_path, limit=60, extra=extra)
    invoke("discover", toml, "--provider", "gemini", "--run-dir", tmp_path / "run", "-q")
    result = invoke("cluster", tmp_path / "run", "-q")
    clusters = pl.read_parquet(tmp_path / "run" / "clusters.parquet")
    return toml, result.output, clusters


def test_the_default_k_scales_with_the_unique_labels_and_says_so(gemini_env, tmp_path):
    toml, output, clusters = _clustered(tmp_path)
    unique = clusters.height
    k = clusters["cluster_id"].n_unique()
    assert 20 <= k < 80 and k <= unique / 3, (k, unique)  # a few labels a cluster, not one
    assert re.search(rf"k = {k}: scaled with {unique} unique labels", output), output
    assert "set cluster.k to choose" in output
    planned = json.loads(invoke("estimate", toml, "--provider", "gemini", "--json").output)["stages"]["canonicalize"]
    assert (
        f"k = {planned['calls']}: scaled with" in planned["basis"]
    )  # the estimate plans one naming call per scaled cluster
    assert planned["calls"] == ClusterConfig().k_for(int(re.search(r"scaled with (\d+)", planned["basis"])[1]))[0]


def test_an_explicit_k_is_the_users_own(gemini_env, tmp_path):
    toml, output, clusters = _clustered(tmp_path, extra="[cluster]\nk = 12\n")
    assert clusters["cluster_id"].n_unique() == 12
    assert "k = 12: cluster.k = 12 in the pipeline config" in output
    planned = json.loads(invoke("estimate", toml, "--provider", "gemini", "--json").output)["stages"]["canonicalize"]
    assert planned["calls"] == 12


def test_a_k_below_two_is_refused_in_one_line(gemini_env, tmp_path):
    result = invoke(
        "estimate", write_pipeline(tmp_path, limit=10, extra="[cluster]\nk = 1\n"), "--provider", "gemini", ok=False
    )
    assert result.exit_code == 2 and "k = 1 is below 2" in result.output
