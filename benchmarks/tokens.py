"""Tokens and billed cost per criterion, per stage, through the real SDK against the local
Gemini-shaped server (which reports cached tokens as Gemini's implicit caching does, and serves
explicit caches): the whole LLM pipeline over a corpus, then, for Stage 1 and Stage 3, the same
criteria one per call for comparison.

Targets (issue 20): prompt tokens per criterion at least 8x below one criterion per call for Stage 1
and Stage 3; the merge stage's prompt tokens at most 1.5x one merge call, with the server's first
boundary answer rejected (`--no-fault` turns that fault off).

    .venv/bin/python benchmarks/tokens.py                      # PaperBench, 8,921 criteria
    .venv/bin/python benchmarks/tokens.py --pipeline pipelines/devai.toml
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from taxonomy.config import load_config  # noqa: E402
from taxonomy.estimate import capture_jobs  # noqa: E402
from taxonomy.estimate import caching  # noqa: E402
from taxonomy.pipeline import ensure_criteria, open_session, run_pipeline  # noqa: E402
from taxonomy.stages.discover import discover  # noqa: E402
from taxonomy.stages.tag import tag  # noqa: E402
from taxonomy.taxonomy_io import load_taxonomy  # noqa: E402
from tests import responders  # noqa: E402
from tests.fake_gemini import FakeGeminiServer  # noqa: E402

STAGES = ("discover", "canonicalize", "merge", "tag")


def one_per_call(fn, criteria, cfg, *args) -> tuple[int, int, int]:
    """(calls, prompt tokens, cached prompt tokens) of the stage with one criterion per call, counted as the
    server counts."""
    single = copy.deepcopy(cfg)
    single.discover.batch_size = single.tag.batch_size = 1
    jobs = capture_jobs(fn, criteria, *args, single)
    cached, _ = caching(jobs, single)
    return len(jobs), sum(len(j.prompt) // 4 for j in jobs), cached


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pipeline", default=str(ROOT / "pipelines" / "paperbench.toml"))
    parser.add_argument("--limit", type=int, default=None, help="only the first N criteria")
    parser.add_argument("--no-fault", action="store_true", help="do not reject the first boundary answer")
    args = parser.parse_args()

    cfg = load_config(args.pipeline)
    cfg.llm.requests_per_minute = 100_000  # measure tokens, not a quota
    if args.limit:
        cfg.corpus.limit = args.limit
    responder, faulted = (responders.model, []) if args.no_fault else responders.boundary_fault_model()
    prices = cfg.llm.prices
    with tempfile.TemporaryDirectory() as tmp, FakeGeminiServer(responder=responder) as server:
        os.environ.update(GOOGLE_GEMINI_BASE_URL=server.url, GEMINI_API_KEY="benchmark-key-not-secret")
        cfg.output.dir = tmp  # a fresh answer cache: every call is really made
        session = open_session(cfg, provider="gemini", run_dir=Path(tmp) / "run", show_progress=False)
        started = time.perf_counter()
        run_pipeline(session)
        seconds = time.perf_counter() - started
        criteria = ensure_criteria(session)
        taxonomy = load_taxonomy(session.run.path / "taxonomy.json")
        paid = session.run.usage_totals()
        ledger = (session.run.path / "usage.jsonl").read_text().splitlines()
        baseline = {
            "discover": one_per_call(discover, criteria, cfg),
            "tag": one_per_call(tag, criteria, cfg, taxonomy),
        }
        naming = [
            r.texts[0]
            for r in server.requests
            if r.kind == "generate" and responders.kind(r.texts[0]) == "canonicalize"
        ]
        no_examples = sum("Criteria that carry labels of this cluster" not in p for p in naming)
        no_nearby = sum("<nearby cluster=" not in p for p in naming)
    n = criteria.height
    print(
        f"corpus {cfg.name}: {n} criteria; model {cfg.llm.model}; prices per million tokens: input {prices.input}, "
        f"cached input {prices.cached()}, output {prices.output}, explicit cache storage {prices.cache_storage}/hour"
    )
    print(
        f"whole LLM pipeline through the test server in {seconds:.0f} s; taxonomy of {len(taxonomy.capabilities)} "
        "capabilities\n"
    )
    print(
        "| stage | calls | prompt tok/criterion | of which cached | output tok/criterion | billed USD/criterion "
        "| one per call: prompt tok/criterion | ratio | one per call: billed USD/criterion | ratio |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for stage in STAGES:
        u = paid.get(stage, {})
        cost = prices.cost(u)
        row = (
            f"| {stage} | {u.get('calls', 0)} | {u.get('prompt_tokens', 0) / n:.1f} | "
            f"{u.get('cached_prompt_tokens', 0) / n:.1f} | "
            f"{u.get('output_tokens', 0) / n:.1f} | {cost / n:.8f} |"
        )
        if stage in baseline:
            calls, prompt, cached = baseline[stage]
            # The same answers, one per call: the output is the batched run's; the prompt is priced with the
            # same caching of its shared prefix as the batched run.
            single = prices.cost(
                {"prompt_tokens": prompt, "cached_prompt_tokens": cached, "output_tokens": u.get("output_tokens", 0)}
            )
            row += (
                f" {prompt / n:.1f} | {prompt / max(u.get('prompt_tokens', 1), 1):.1f}x | {single / n:.8f} | "
                f"{single / max(cost, 1e-12):.1f}x |"
            )
        else:
            row += " | | | |"
        print(row)
    total = {
        k: sum(paid.get(s, {}).get(k, 0) for s in paid)
        for k in ("prompt_tokens", "cached_prompt_tokens", "output_tokens")
    }
    print(
        f"\ntotal: {total['prompt_tokens']:,} prompt tokens ({total['cached_prompt_tokens']:,} cached), "
        f"{total['output_tokens']:,} output tokens, USD {sum(prices.cost(u) for u in paid.values()):.4f} billed "
        "(embeddings included)"
    )
    print(
        f"canonicalize prompts without example criteria: {no_examples} of {len(naming)}; without nearby clusters: "
        f"{no_nearby}"
    )
    merge = [
        int(re.search(r'"prompt_tokens": (-?\d+)', line)[1])
        for line in ledger
        if '"stage": "merge"' in line and '"kind": "generate"' in line
    ]
    fault = f"the first boundary answer rejected for `{faulted[0]}`" if faulted else "no fault"
    print(
        f"merge stage ({fault}): {len(merge)} calls, prompt tokens {merge} = {sum(merge) / merge[0]:.2f}x the "
        "membership call "
        f"(target <= 1.5x)"
    )


if __name__ == "__main__":
    main()
