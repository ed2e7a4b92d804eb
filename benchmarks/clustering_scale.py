"""How Stage 2a scales: embed + cluster synthetic unique labels at growing sizes.

    .venv/bin/python benchmarks/clustering_scale.py            # 1k .. 100k
    .venv/bin/python benchmarks/clustering_scale.py --max 10000
    .venv/bin/python benchmarks/clustering_scale.py --sizes 1000000   # the 1M target: <= 5 min within 8 GB
                                                                      # (75 s, +2.9 GB at load average 2)

Each size runs in its own subprocess so the peak memory of one size never hides
another's. Labels look like Stage 1 output: a verifier verb, an optional
qualifier and 1-3 objects drawn from the bundled rubric text (data/paperbench) when it
exists, else from a built-in list.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SIZES = [1_000, 3_000, 10_000, 30_000, 100_000]
TARGET = {"n": 1_000_000, "seconds": 300, "peak_mb": 8 * 1024}
VERBS = [
    "recompute",
    "trace",
    "inspect",
    "compare",
    "cross_check",
    "verify",
    "confirm",
    "audit",
    "reconcile",
    "validate",
    "locate",
    "read",
]
QUALIFIERS = ["", "", "", "reported", "stated", "final", "each", "every", "numeric", "cited", "consistent"]
BUILTIN_WORDS = (
    "revenue margin ebitda formula reference chart axis legend slide table column row sheet footnote citation "
    "source filing date quarter period currency unit scale ratio multiple growth rate discount cash flow terminal "
    "value valuation assumption scenario sensitivity output metric score loss accuracy baseline ablation dataset "
    "split seed experiment result figure plot hyperparameter learning schedule model checkpoint training evaluation "
    "benchmark reward policy environment agent episode trajectory sample batch layer attention embedding token"
).split()
_STOP = set(
    "that this with from have been into such their which when will should must also used uses using each "
    "than then they them these those there where while other over under only more most code implemented "
    "paper results section same shown".split()
)


def vocabulary() -> list[str]:
    """Frequent content words of the bundled rubrics, or a built-in list without them."""
    rubrics = sorted((ROOT / "data" / "paperbench" / "papers").glob("*/rubric.json.gz"))
    if not rubrics:
        return BUILTIN_WORDS
    counts: Counter[str] = Counter()

    def walk(node: dict) -> None:
        counts.update(w for w in re.findall(r"[a-z]{4,12}", node.get("requirements", "").lower()) if w not in _STOP)
        for child in node.get("sub_tasks", []):
            walk(child)

    for path in rubrics:
        walk(json.loads(gzip.decompress(path.read_bytes())))
    return [w for w, c in counts.most_common(2000) if c >= 3]


def synthetic_labels(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    words = np.asarray(vocabulary())
    # Zipf-like object choice: a few objects dominate, as in real rubric corpora.
    p = 1.0 / np.arange(1, len(words) + 1) ** 0.8
    p /= p.sum()
    out: set[str] = set()
    while len(out) < n:
        # Drawn a block at a time (one rng.choice per label took minutes at 1,000,000 labels).
        m = max(1_000, (n - len(out)) * 2)
        objects = rng.choice(words, size=(m, 3), p=p)
        counts = rng.integers(1, 4, size=m)
        verbs = rng.integers(len(VERBS), size=m)
        quals = rng.integers(len(QUALIFIERS), size=m)
        for row, c, v, q in zip(objects.tolist(), counts.tolist(), verbs.tolist(), quals.tolist()):
            objs = row[:c]
            if len(set(objs)) < c:  # an object named twice in one label
                continue
            out.add("_".join(x for x in (VERBS[v], QUALIFIERS[q], *objs, "capability") if x))
            if len(out) == n:
                break
    return sorted(out)


class _Precomputed:
    """Hands cluster_labels the embeddings already timed, whatever order it asks in."""

    def __init__(self, labels: list[str], x: np.ndarray, name: str):
        self.rows = {lab: i for i, lab in enumerate(labels)}
        self.x, self.name = x, name

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.x[[self.rows[t] for t in texts]]


def _rss_mb() -> float:
    """Peak resident memory of this process, in MB."""
    # VmHWM belongs to this process's own address space; ru_maxrss also keeps the parent's
    # peak across fork+exec, which hid the child's peak whenever the parent was bigger.
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def run_one(labels_file: Path, seed: int) -> dict:
    import polars as pl

    from taxonomy.config import ClusterConfig, EmbeddingConfig
    from taxonomy.embed.local import LocalEmbedder
    from taxonomy.stages.cluster import cluster_labels

    # Labels come from a file: generating them here (parsing the rubrics) would set a
    # high-water mark that hides the peak of the work being measured.
    labels = labels_file.read_text(encoding="utf-8").split("\n")
    n = len(labels)
    # Built column-wise: a list column made from 100,000 Python lists cost polars ~0.5 GB.
    stage1 = pl.DataFrame(
        {
            "criterion_id": pl.int_range(n, eager=True).cast(pl.Utf8),
            "labels": pl.Series(labels),
            "status": pl.repeat("ok", n, eager=True),
        }
    ).with_columns(pl.concat_list("labels"))
    base = _rss_mb()
    t0 = time.perf_counter()
    embedder = LocalEmbedder(dim=EmbeddingConfig().local_dim, seed=seed)
    x = embedder.embed(labels)
    t1 = time.perf_counter()
    embed_peak = _rss_mb()
    result = cluster_labels(stage1, _Precomputed(labels, x, embedder.name), ClusterConfig(seed=seed))
    t2 = time.perf_counter()
    return {
        "n": n,
        "dim": int(x.shape[1]),
        "embed_s": t1 - t0,
        "cluster_s": t2 - t1,
        "method": result.method,
        "clusters": int(result.clusters["cluster_id"].n_unique()),
        "embed_peak_mb": embed_peak - base,
        "peak_mb": _rss_mb() - base,
        "rss_mb": _rss_mb(),
    }


def growth(prev: dict | None, row: dict, key: str) -> str:
    """Factor by which `key` grows per 10x in n between consecutive sizes."""
    if prev is None or prev[key] <= 0 or row[key] <= 0:
        return "-"
    return f"{(row[key] / prev[key]) ** (1 / math.log10(row['n'] / prev['n'])):.1f}x"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max", type=int, default=SIZES[-1], help="largest size to run")
    ap.add_argument("--sizes", type=int, nargs="+", help="run exactly these sizes (e.g. 1000000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--threads",
        type=int,
        help="BLAS/OpenMP threads per run (default: the libraries' own choice); "
        "1 gives steadier numbers when other jobs share the cores",
    )
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_one(args.child, args.seed)))
        return

    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(Console().width, 150))
    words = vocabulary()
    console.print(
        f"vocabulary: {len(words)} words "
        f"({'data/paperbench rubrics' if words is not BUILTIN_WORDS else 'built-in list'}); "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start"
    )
    env = dict(os.environ)
    if args.threads:
        env.update({v: str(args.threads) for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")})
    rows = []
    for n in args.sizes or [s for s in SIZES if s <= args.max]:
        with console.status(f"n = {n:,} ..."), tempfile.TemporaryDirectory() as tmp:
            labels_file = Path(tmp) / "labels.txt"
            labels_file.write_text("\n".join(synthetic_labels(n, args.seed)), encoding="utf-8")
            proc = subprocess.run(
                [sys.executable, __file__, "--child", str(labels_file), "--seed", str(args.seed)],
                capture_output=True,
                text=True,
                cwd=ROOT,
                env=env,
            )
        if proc.returncode != 0:
            console.print(f"[red]n = {n:,} failed[/red]\n{proc.stderr[-2000:]}")
            break
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        row["total_s"] = row["embed_s"] + row["cluster_s"]
        rows.append(row)
        console.print(
            f"n = {n:,}: {row['total_s']:.1f} s, peak +{row['peak_mb']:.0f} MB, load average {os.getloadavg()[0]:.1f}"
        )

    table = Table(title="Stage 2a scaling (LocalEmbedder + default ClusterConfig)")
    for col in ["n", "embed s", "cluster s", "method", "peak MB embed", "peak MB", "time/10x", "memory/10x"]:
        # The method names the sampled fit above KMEANS_FIT_MAX: folded, not cut off.
        table.add_column(col, justify="left" if col == "method" else "right", no_wrap=col != "method", overflow="fold")
    prev = None
    for row in rows:
        table.add_row(
            f"{row['n']:,}",
            f"{row['embed_s']:.1f}",
            f"{row['cluster_s']:.1f}",
            row["method"],
            f"{row['embed_peak_mb']:.0f}",
            f"{row['peak_mb']:.0f}",
            growth(prev, row, "total_s"),
            growth(prev, row, "peak_mb"),
        )
        prev = row
    console.print(table)
    console.print(
        "peak MB = growth of the peak resident set (VmHWM) in a fresh process after imports and reading the labels; "
        "growth columns compare each size with the previous one, scaled to a 10x step."
    )


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
