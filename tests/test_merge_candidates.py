"""The merge prompt shows, for every candidate, how many criteria carry its labels, beside the share it
dominates: a micro-cluster that is no criterion's dominant one is not listed as an empty "0.0% (0 criteria)"."""

from __future__ import annotations

import json
import re

import polars as pl

from tests import responders
from tests.conftest import invoke, write_pipeline

LINE = re.compile(r"^- `([a-z_]+)`: ([\d.]+)% \((\d+) criteria\); (\d+) carry its labels\. ", re.M)


def test_every_merge_candidate_shows_the_criteria_carrying_its_labels(gemini_env, tmp_path):
    run_dir = tmp_path / "run"
    invoke(
        "run", write_pipeline(tmp_path, limit=120), "--provider", "gemini", "--run-dir", run_dir, "-q", "--no-report"
    )
    (prompt,) = [
        r.texts[0] for r in gemini_env.requests if r.kind == "generate" and responders.kind(r.texts[0]) == "merge"
    ]
    micro = {m["name"]: m for m in json.loads((run_dir / "micro_capabilities.json").read_text())}
    lines = LINE.findall(prompt)
    assert len(lines) == len(micro), prompt[:3000]
    labels = {}
    stage1 = pl.read_parquet(run_dir / "stage1_labels.parquet").filter(pl.col("status") == "ok")
    dominant = pl.read_parquet(run_dir / "criterion_clusters.parquet")
    for name, share, dominated, labelled in lines:
        carried = set(micro[name]["member_labels"])
        holding = {c for c, labs in stage1.select("criterion_id", "labels").iter_rows() if carried & set(labs or [])}
        # Stage 2a places criteria by their text too, so a criterion a cluster dominates may hold none of its labels
        own = set(dominant.filter(pl.col("dominant_cluster") == micro[name]["cluster_id"])["criterion_id"])
        expected = len(holding | own)
        assert int(labelled) == expected >= max(1, int(dominated)), (name, labelled, expected, dominated)
        labels[name] = int(labelled)
    assert any(int(d) < labels[n] for n, _, d, _ in lines)  # criteria a label shares with another cluster are shown too
