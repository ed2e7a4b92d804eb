"""benchmarks/scale.py end to end on a tiny corpus: offline and batch mode, the table it prints."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_scale_benchmark_prints_a_row_per_stage_and_mode(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "scale.py"),
            "--modes",
            "offline",
            "batch",
            "--n",
            "120",
            "--tasks",
            "6",
            # a job that runs a second still answers over several polls, without the suite waiting 10 s a stage
            "--batch-running-s",
            "1",
            "--keep",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = re.findall(r"^\| (offline|batch) \| (\w+) \| ([\d.]+) \| (\d+) \| ([\d,]+) \|", proc.stdout, re.M)
    stages = ["discover", "cluster", "canonicalize", "merge", "tag"]
    assert [(m, s) for m, s, *_ in rows] == [("offline", s) for s in stages] + [("batch", s) for s in stages]
    batch_calls = {s: int(c.replace(",", "")) for m, s, _, _, c in rows if m == "batch"}
    assert batch_calls["discover"] > 0 and batch_calls["tag"] > 0 and batch_calls["cluster"] == 0
    assert all(0 < float(peak) < 4096 for *_, peak, _ in rows)
    assert "batch items paid twice (server side): 0" in proc.stdout
    # `taxonomy estimate --json --batch` fills the estimated column beside the accounted one, with their ratio.
    total = re.search(
        r"^\| batch \| \*\*all\*\* \|(?:[^|]*\|){4} ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|", proc.stdout, re.M
    )
    assert total, proc.stdout[-3000:]
    est, accounted, ratio = map(float, total.groups())
    assert est > 0 and accounted > 0 and abs(ratio - est / accounted) < 0.01
