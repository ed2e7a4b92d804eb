"""Every prompt that quotes criteria marks the penalties, so a model does not read a fault the rubric
punishes as something the deliverable should do; the naming prompt says whether a one-label cluster
may keep its label as its name."""

from __future__ import annotations

import re

import polars as pl

from taxonomy.prompts import fence
from tests import responders
from tests.conftest import invoke, write_pipeline


def test_naming_and_tagging_prompts_mark_penalties(gemini_env, tmp_path):
    toml = write_pipeline(
        tmp_path,
        corpus="healthbench",
        limit=80,
        extra="[merge]\nmin_caps = 2\nmax_caps = 10\nmin_share = 0\nmax_share = 1\n",
    )
    invoke("run", toml, "--provider", "gemini", "--run-dir", tmp_path / "run", "-q", "--no-report")
    criteria = pl.read_parquet(tmp_path / "run" / "criteria.parquet")
    direction = {fence(t): d for t, d in zip(criteria["text"], criteria["direction"])}
    assert set(direction.values()) == {"reward", "penalty"}
    seen = {"canonicalize": 0, "tag": 0}
    for req in (r for r in gemini_env.requests if r.kind == "generate"):
        prompt, kind = req.texts[0], responders.kind(req.texts[0])
        quoted = {
            "canonicalize": r"<example ([^>]*)>(.*?)</example>",
            "tag": r'<criterion (idx="\d+"[^>]*)>\n(.*?)\n</criterion>',
        }
        if kind not in quoted:
            continue
        assert 'A criterion marked direction="penalty" describes a fault' in prompt, kind
        for attrs, block in re.findall(quoted[kind], prompt, re.S):
            text = max((t for t in direction if block.endswith(t)), key=len)  # after its "(part of: ...)" line, if any
            assert ('direction="penalty"' in attrs) == (direction[text] == "penalty"), (kind, attrs, text)
            seen[kind] += direction[text] == "penalty"
    assert seen["canonicalize"] > 0 and seen["tag"] > 0, seen


def test_the_naming_prompt_says_a_one_label_cluster_may_keep_its_label(gemini_env, tmp_path):
    invoke(
        "run",
        write_pipeline(tmp_path, limit=40, extra="[merge]\nmin_caps = 2\nmin_share = 0\nmax_share = 1\n"),
        "--provider",
        "gemini",
        "--run-dir",
        tmp_path / "run",
        "-q",
        "--no-report",
    )
    naming = [
        r.texts[0]
        for r in gemini_env.requests
        if r.kind == "generate" and responders.kind(r.texts[0]) == "canonicalize"
    ]
    assert naming and all("A cluster of a single label may keep that label as its name" in p for p in naming)
