"""How stable is the taxonomy? The same corpus run with 3 seeds, compared pairwise with `taxonomy diff`.

    .venv/bin/python benchmarks/stability.py                  # offline on PaperBench, LLM path on DevAI
    .venv/bin/python benchmarks/stability.py --offline-corpus devai --seeds 0 1 2 --drop-tasks 0.1

Two perturbations per path, each over seeds 0, 1, 2:
  seed only        the pipeline's seed (cluster.seed: the local embedder's SVD, k-means at scale)
  seed + drop      also leave out a seeded share of the tasks (default 10%); the diff is then over
                   the criteria both runs kept, so it measures how much the induced capabilities
                   depend on which tasks the corpus happens to hold
The LLM path runs the real google-genai SDK against the local Gemini-shaped test server
(tests/fake_gemini.py with the responders of tests/responders.py), except that Stage 3 is
answered by reading the taxonomy: each criterion gets the capabilities whose names share the
most words with the labels the same fake model gave it in Stage 1 (the suite's tagger picks
by a hash of the text, which would agree perfectly whatever the taxonomy). The server answers
deterministically, so these rows measure the pipeline around the model (clustering, merge,
repair, tagging against what was induced), not a real model's sampling variance.

Columns (means over the 3 pairs; min in brackets): ARI and NMI between the primary tags of the
shared criteria; moved = share of shared criteria whose primary tag is not the capability
matched one-to-one to its primary in the other run; same = matched pairs with Jaccard >= 0.5
over the number of capabilities.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from taxonomy.config import load_config  # noqa: E402
from taxonomy.corpus import load_corpus  # noqa: E402
from taxonomy.diff import diff_runs  # noqa: E402
from taxonomy.pipeline import open_session, run_pipeline  # noqa: E402
from taxonomy.run import RunDir  # noqa: E402


def one_run(corpus: str, provider: str, seed: int, drop: float, out: Path) -> tuple[Path, float]:
    cfg = load_config(ROOT / "pipelines" / f"{corpus}.toml")
    cfg.cluster.seed = seed
    cfg.output.dir = str(out)
    run_dir = out / f"{provider}-seed{seed}-drop{drop:g}"
    start = time.perf_counter()
    frame = load_corpus(cfg.corpus, cfg.base_dir).frame
    n_before = frame.height
    if drop > 0:
        tasks = frame["task_id"].unique().sort().to_list()
        rng = np.random.default_rng(1000 + seed)
        gone = set(rng.choice(tasks, size=max(1, round(drop * len(tasks))), replace=False).tolist())
        frame = frame.filter(~pl.col("task_id").is_in(list(gone)))
    RunDir(run_dir).write_parquet("criteria.parquet", frame)
    # from_source=False: the run keeps this (reduced) snapshot instead of re-reading the full corpus.
    s = open_session(cfg, provider=provider, run_dir=run_dir, show_progress=False, from_source=False)
    run_pipeline(s)
    kept = RunDir(run_dir).read_parquet("criteria.parquet").height
    assert kept == frame.height <= n_before, "the run must keep the snapshot it was given"
    return run_dir, time.perf_counter() - start


def reading_tagger(prompt: str) -> dict:
    """Stage 3 by word overlap between a criterion's Stage-1 labels and the capability names."""
    from tests import responders

    names = responders.TAXONOMY_NAME.findall(prompt)
    words = {n: set(n.split("_")) - {"capability"} for n in names}
    items = []
    for i, text in responders.criteria(prompt):
        mine = {w for label in responders.discovery_item(i, text)["capabilities"] for w in label.split("_")} - {
            "capability"
        }
        ranked = sorted(names, key=lambda n: (-len(words[n] & mine), names.index(n)))
        items.append({"criterion_idx": i, "capabilities": ranked[:2]})
    return {"items": items}


def model(req) -> dict:
    from tests import responders

    prompt = req.texts[0]
    return reading_tagger(prompt) if responders.kind(prompt) == "tag" else responders.model(req)


def compare(runs: list[Path]) -> dict[str, list[float]]:
    rows: dict[str, list[float]] = {"ari": [], "nmi": [], "moved": [], "same": []}
    for a, b in itertools.combinations(runs, 2):
        d = diff_runs(a, b)
        rows["ari"].append(d.ari)
        rows["nmi"].append(d.nmi)
        rows["moved"].append(d.moved_share)
        rows["same"].append(sum(m.kind != "weak match" for m in d.matches) / max(len(d.a.names), len(d.b.names)))
    return rows


def fmt(values: list[float], pct: bool = False) -> str:
    mean, low = float(np.mean(values)), float(np.min(values))
    return f"{100 * mean:.1f}% ({100 * low:.1f}%)" if pct else f"{mean:.3f} ({low:.3f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--offline-corpus", default="paperbench")
    ap.add_argument("--llm-corpus", default="devai")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--drop-tasks", type=float, default=0.1)
    ap.add_argument("--skip-llm", action="store_true")
    ap.add_argument("--skip-offline", action="store_true")
    args = ap.parse_args()

    plans = [] if args.skip_offline else [("offline", args.offline_corpus)]
    server = None
    if not args.skip_llm:
        from tests.fake_gemini import FakeGeminiServer

        server = FakeGeminiServer(responder=model)
        os.environ["GOOGLE_GEMINI_BASE_URL"] = server.url
        os.environ["GEMINI_API_KEY"] = "stability-benchmark-local-key"
        plans.append(("gemini", args.llm_corpus))
    print("| path | corpus | perturbation | ARI | NMI | moved | same capabilities | seconds per run |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    try:
        with tempfile.TemporaryDirectory(prefix="stability-") as tmp:
            for provider, corpus in plans:
                for label, drop in (
                    ("seed only", 0.0),
                    (f"seed + drop {100 * args.drop_tasks:g}% tasks", args.drop_tasks),
                ):
                    results = [one_run(corpus, provider, s, drop, Path(tmp) / corpus) for s in args.seeds]
                    r = compare([p for p, _ in results])
                    secs = np.mean([t for _, t in results])
                    print(
                        f"| {'offline' if provider == 'offline' else 'LLM (test server)'} | {corpus} | {label} | "
                        f"{fmt(r['ari'])} | {fmt(r['nmi'])} | {fmt(r['moved'], True)} | {fmt(r['same'], True)} | "
                        f"{secs:.1f} |",
                        flush=True,
                    )
    finally:
        if server is not None:
            server.close()


if __name__ == "__main__":
    main()
