"""Stage 1 over all PaperBench leaves against a local Gemini-shaped server with a fixed latency.

Prints calls, prompt tokens per criterion (batched vs one criterion per call), and the ratio of
measured wall time to the ideal calls x latency / concurrency. Targets: ratio <= 1.2, tokens >= 4x lower.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from taxonomy.config import load_config  # noqa: E402
from taxonomy.pipeline import ensure_criteria, open_session  # noqa: E402
from taxonomy.estimate import capture_jobs  # noqa: E402
from taxonomy.stages.discover import discover  # noqa: E402
from tests import responders  # noqa: E402
from tests.fake_gemini import FakeGeminiServer  # noqa: E402


def prompt_tokens(criteria, cfg, batch_size: int) -> int:
    """Same estimate the local server reports (characters / 4), so both sides are counted alike."""
    sized = cfg.model_copy(deep=True)
    sized.discover.batch_size = batch_size
    return sum(len(job.prompt) // 4 for job in capture_jobs(discover, criteria, sized))


def serve(conn, latency: float) -> None:
    """The server runs in its own process, as a real endpoint would: its work must not share the client's GIL."""
    with FakeGeminiServer(responder=responders.model, latency_s=latency) as server:
        conn.send(server.url)
        conn.recv()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=20)
    args = parser.parse_args()

    cfg = load_config(ROOT / "pipelines" / "paperbench.toml")
    cfg.llm.concurrency = args.concurrency
    cfg.llm.requests_per_minute = 100_000  # measure the runner, not a quota
    cfg.discover.batch_size = args.batch_size
    parent, child = mp.Pipe()
    proc = mp.get_context("spawn").Process(target=serve, args=(child, args.latency), daemon=True)
    proc.start()
    url = parent.recv()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.update(GOOGLE_GEMINI_BASE_URL=url, GEMINI_API_KEY="benchmark-key-not-secret")
        cfg.output.dir = tmp  # a fresh answer cache: every call is really made
        session = open_session(cfg, provider="gemini", run_dir=Path(tmp) / "run", show_progress=False)
        criteria = ensure_criteria(session)
        cpu_before = time.process_time()
        start = time.perf_counter()
        labels = discover(criteria, cfg, session.runner)
        wall = time.perf_counter() - start
        client_cpu = time.process_time() - cpu_before
        usage = session.runner.usage["discover"]
    parent.send("stop")
    proc.join(5)
    calls = usage.calls
    # An explicit context cache costs two more round trips (made before the calls, deleted after them).
    cache_trips = 2 if usage.cache_tokens else 0
    ideal = calls * args.latency / args.concurrency + cache_trips * args.latency
    single = prompt_tokens(criteria, cfg, 1)
    print(f"criteria            {criteria.height}")
    print(f"failed              {labels.filter(labels['status'] == 'failed').height}")
    print(
        f"calls               {calls} (batch size {args.batch_size}, concurrency {args.concurrency}, latency "
        f"{args.latency * 1000:.0f} ms)" + (f", plus {cache_trips} context-cache round trips" if cache_trips else "")
    )
    print(f"wall / ideal        {wall:.2f} s / {ideal:.2f} s = ratio {wall / ideal:.2f}  (target <= 1.2)")
    # A fixed latency returns each wave of `concurrency` calls together, and the client then handles
    # them one by one: client CPU per call x concurrency is what the wall time adds per wave.
    print(
        f"client CPU per call {1000 * client_cpu / max(calls, 1):.1f} ms "
        "(prompt rendering, SDK, transport, parsing, validation)"
    )
    print(
        f"prompt tok/criterion {usage.prompt_tokens / criteria.height:.0f} batched "
        f"({usage.cached_prompt_tokens / criteria.height:.0f} of them cached) "
        f"vs {single / criteria.height:.0f} one per call = {single / max(usage.prompt_tokens, 1):.1f}x lower  "
        "(target >= 4x; "
        f"benchmarks/tokens.py gives every stage, with billed cost)"
    )


if __name__ == "__main__":
    main()
