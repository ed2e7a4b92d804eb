"""benchmarks/tokens.py end to end on a small corpus: a row per LLM stage with tokens and billed cost per
criterion, cached tokens included, the one-per-call comparison for Stages 1 and 3, and the merge ratio."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_tokens_benchmark_prints_every_stage_and_the_merge_ratio():
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "tokens.py"),
            "--pipeline",
            str(ROOT / "pipelines" / "devai.toml"),
            "--limit",
            "150",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {
        m[0]: m[1:]
        for m in re.findall(
            r"^\| (\w+) \| (\d+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|(.*)$", proc.stdout, re.M
        )
    }
    assert list(rows) == ["discover", "canonicalize", "merge", "tag"]
    for stage in ("discover", "tag"):
        calls, prompt, cached, output, cost, rest = rows[stage]
        single, ratio = re.findall(r"([\d.]+)x?", rest)[:2]
        assert 0 < float(cached) < float(prompt) < float(single) and float(cost) > 0
        assert abs(float(ratio) - float(single) / float(prompt)) < 0.1
    merge = re.search(
        r"merge stage \(the first boundary answer rejected for `\w+`\): 3 calls, .* = ([\d.]+)x", proc.stdout
    )
    assert merge and float(merge[1]) <= 1.5, proc.stdout[-2000:]
