"""The whole pipeline on a 100,000-criterion corpus, per stage, in offline, batch and online mode.

    nice .venv/bin/python benchmarks/scale.py                          # all three modes, 100k criteria
    nice .venv/bin/python benchmarks/scale.py --modes offline batch --n 20000 --tasks 400

The corpus comes from benchmarks/synth_corpus.py. LLM modes run against the local Gemini-shaped
test server in its own process (tests/fake_gemini.py + tests/fake_batch.py), answering like
tests/responders.py; online answers wait a log-normal latency (median --latency-median, long
tail), batch jobs answer at once (the Batch API's own hours are Google's, not the client's).
Each mode runs in its own process through the library path `taxonomy run` takes; per stage its
wall time, CPU and peak memory (VmHWM, reset between stages) are its own. Per stage it prints wall,
peak MB, calls, tokens, the cost `taxonomy estimate --json` predicted (at the mode's price) against
the cost the run accounted,
and for online mode wall / max(sum of latencies / concurrency, tokens / TPM, calls / RPM) and
the client's CPU share of wall. Targets (issue 12): peak <= 4 GB, Stage 2 <= 2 min, online
within 1.1x of its bound with client CPU <= 10% of wall, estimates within 10%.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STAGES = ["discover", "cluster", "canonicalize", "merge", "tag"]
LLM_STAGES = ["discover", "canonicalize", "merge", "tag"]


def serve(conn, latency_median: float, sigma: float, cap: float, batch_running_s: float) -> None:
    """The server in its own process, as a real endpoint: its work must not share the client's GIL."""
    from tests import responders
    from tests.fake_gemini import FakeGeminiServer

    lock = threading.Lock()
    slept = {"online": 0.0, "n": 0}
    latency = {"on": False}

    def model(req):
        answer = responders.model(req)
        if req.mode == "gemini" and latency["on"]:
            # Deterministic per request: the same prompt waits the same time in every run.
            rng = random.Random(hash(req.texts[-1]) & 0xFFFFFFFF)
            wait = min(cap, latency_median * math.exp(rng.gauss(0.0, sigma)))
            time.sleep(wait)
            with lock:
                slept["online"] += wait
                slept["n"] += 1
        return answer

    with FakeGeminiServer(responder=model) as server:
        server.batch.running_s = batch_running_s  # answered a share per poll, as a job runs, not all in one GET
        conn.send(server.url)
        while True:
            msg = conn.recv()
            if msg == "stop":
                return
            if msg == "latency on":
                latency["on"] = True
            elif msg == "latency off":
                latency["on"] = False
            elif msg == "stats":
                with lock:
                    conn.send(
                        {
                            "slept": slept["online"],
                            "slept_n": slept["n"],
                            "batch_items": server.batch.items_answered,
                            "batch_paid_twice": sum(1 for c in server.batch.answered_keys.values() if c > 1),
                            "online_generate": server.count("generate", mode="gemini"),
                            "batch_generate": server.count("generate", mode="batch"),
                            "embed": server.count("embed"),
                        }
                    )
                continue
            conn.send("ok")


def _hwm_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _fresh_peak() -> None:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass  # without it, each stage's peak includes the earlier stages' peaks


def child(mode: str, toml: Path, run_dir: Path) -> None:
    """All stages in one process through the public API, as `taxonomy run` does; per stage its wall, CPU and peak
    RSS (VmHWM, reset as each stage ends, before the next begins, through /proc/self/clear_refs)."""
    import taxonomy

    clock = {"wall": time.perf_counter(), "cpu": time.process_time()}

    def measured(stage: str, info: dict) -> None:
        figures = {"wall": time.perf_counter() - clock["wall"], "cpu": time.process_time() - clock["cpu"]}
        line = {"stage": stage, **figures, "peak_mb": _hwm_mb(), "info": info}
        print("STAGE " + json.dumps(line, default=str), flush=True)
        _fresh_peak()
        clock.update(wall=time.perf_counter(), cpu=time.process_time())

    _fresh_peak()
    taxonomy.fit(
        toml,
        provider="offline" if mode == "offline" else "gemini",
        run_dir=run_dir,
        settings={"llm": {"mode": "batch"}} if mode == "batch" else None,
        on_stage=measured,
    )


def estimate(toml: Path, provider: str, batch: bool, env: dict) -> dict:
    """`taxonomy estimate --json`: predicted calls, tokens and cost per stage. A failure stops the
    benchmark: an empty "estimated" column would hide it."""
    cmd = [sys.executable, "-m", "taxonomy", "estimate", str(toml), "--provider", provider, "--json"] + (
        ["--batch"] if batch else ["--online"]
    )
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"taxonomy estimate failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout)


def run_mode(mode: str, corpus: Path, work: Path, url: str | None, conn, args) -> list[dict]:
    out_dir = work / mode
    toml = work / f"scale-{mode}.toml"
    toml.write_text(
        f'name = "scale"\n[corpus]\npath = "{corpus}"\nformat = "table"\n'
        f"[llm]\nconcurrency = {args.concurrency}\nrequests_per_minute = {args.rpm}\ntokens_per_minute = {args.tpm}\n"
        f'[llm.batch]\npoll_s = 0.5\n[output]\ndir = "{out_dir}"\n'
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    provider = "offline" if mode == "offline" else "gemini"
    if url:
        env.update(GOOGLE_GEMINI_BASE_URL=url, GEMINI_API_KEY="benchmark-key-not-secret")
    predicted = estimate(toml, provider, mode == "batch", env) if mode != "offline" else None
    if conn is not None:
        conn.send("latency on" if mode == "online" else "latency off")
        conn.recv()
    cmd = [sys.executable, __file__, "--child", mode, str(toml), str(out_dir / "run")]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT, text=True)
    rows, before, tail = [], _stats(conn), []
    for line in proc.stdout:
        if not line.startswith("STAGE "):
            tail = (tail + [line])[-40:]
            continue
        got = json.loads(line[6:])
        after, info = _stats(conn), got["info"]
        row = {
            "mode": mode,
            "stage": got["stage"],
            **{k: got[k] for k in ("wall", "peak_mb", "cpu")},
            "calls": info.get("calls", 0),
            "batch_calls": info.get("batch_calls", 0),
            "tokens": info.get("prompt_tokens", 0) + info.get("output_tokens", 0),
            "cost": info.get("cost_usd"),
            "est_cost": _predicted_cost(predicted, got["stage"]),
        }
        if after and before:
            row["slept"] = after["slept"] - before["slept"]
            row["paid_twice"] = after["batch_paid_twice"]
        before = after
        rows.append(row)
        print(
            f"  {mode:8s} {row['stage']:12s} {row['wall']:8.1f} s  peak {row['peak_mb']:7.0f} MB  "
            f"calls {row['calls']:6d}  load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    if proc.wait() != 0:
        raise SystemExit(f"{mode} run failed ({proc.returncode}):\n{''.join(tail)}")
    return rows


def _stats(conn) -> dict | None:
    if conn is None:
        return None
    conn.send("stats")
    return conn.recv()


def _predicted_cost(predicted: dict | None, stage: str) -> float | None:
    """The stage's cost at the price of the mode it ran in (`--batch` was passed to the estimate)."""
    if not predicted or stage not in predicted["stages"]:
        return None
    return predicted["stages"][stage]["cost_usd_in_mode"]


def bound(row: dict, args) -> float:
    """What an online stage cannot beat: latency over the concurrency, or the per-minute quotas."""
    return max(row.get("slept", 0.0) / args.concurrency, row["tokens"] / args.tpm * 60, row["calls"] / args.rpm * 60)


def _ratio(est: float | None, cost: float | None) -> str:
    """Estimated over accounted cost (issue 12's target: within 10%); "-" where either is missing or zero."""
    return "-" if est is None or not cost else f"{est / cost:.2f}"


def table(rows: list[dict], args) -> str:
    head = (
        "| mode | stage | wall s | peak MB | calls | tokens | est. cost $ | accounted cost $ | est. / accounted | "
        "online wall / bound | client CPU % of wall |"
    )
    lines = [head, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        est = "-" if r["est_cost"] is None else f"{r['est_cost']:.4f}"
        cost = "-" if r["cost"] is None else f"{r['cost']:.4f}"
        ratio = "-"
        if r["mode"] == "online" and r["stage"] in LLM_STAGES and r["calls"]:
            ratio = f"{r['wall'] / max(bound(r, args), 1e-9):.2f}"
        lines.append(
            f"| {r['mode']} | {r['stage']} | {r['wall']:.1f} | {r['peak_mb']:.0f} | {r['calls']:,} | {r['tokens']:,} | "
            f"{est} | {cost} | {_ratio(r['est_cost'], r['cost'])} | {ratio} | "
            f"{100 * r['cpu'] / max(r['wall'], 1e-9):.0f} |"
        )
    for mode in dict.fromkeys(r["mode"] for r in rows):
        mine = [r for r in rows if r["mode"] == mode]
        stage2 = sum(r["wall"] for r in mine if r["stage"] in ("cluster", "canonicalize", "merge"))
        cost = sum(r["cost"] or 0 for r in mine)
        est = [r["est_cost"] for r in mine if r["est_cost"] is not None]
        est_total = sum(est) if est else None
        est_s = "-" if est_total is None else f"{est_total:.4f}"
        wall = sum(r["wall"] for r in mine)
        lines.append(
            f"| {mode} | **all** | {wall:.1f} | {max(r['peak_mb'] for r in mine):.0f} | "
            f"{sum(r['calls'] for r in mine):,} | {sum(r['tokens'] for r in mine):,} | "
            f"{est_s} | {cost:.4f} | {_ratio(est_total, cost)} | Stage 2 {stage2:.1f} s | "
            f"{100 * sum(r['cpu'] for r in mine) / max(wall, 1e-9):.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--modes", nargs="+", default=["offline", "batch", "online"], choices=["offline", "batch", "online"]
    )
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--tasks", type=int, default=2_000)
    ap.add_argument("--corpus", type=Path, help="an existing corpus file instead of generating one")
    ap.add_argument("--latency-median", type=float, default=3.0, help="online answer latency median, seconds")
    ap.add_argument(
        "--latency-sigma", type=float, default=0.6, help="log-normal sigma: 0.6 puts p99 near 4x the median"
    )
    ap.add_argument("--latency-cap", type=float, default=30.0)
    ap.add_argument("--batch-running-s", type=float, default=10.0, help="how long a batch job runs on the server")
    ap.add_argument("--concurrency", type=int, default=32, help="llm.concurrency (the config default)")
    ap.add_argument("--rpm", type=int, default=1000, help="llm.requests_per_minute (the config default)")
    ap.add_argument("--tpm", type=int, default=4_000_000, help="llm.tokens_per_minute (the config default)")
    ap.add_argument("--keep", type=Path, help="keep run directories here instead of a temporary folder")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child[0], Path(args.child[1]), Path(args.child[2]))

    print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f} at start", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        corpus = args.corpus
        if corpus is None:
            corpus = work / f"synth{args.n}.parquet"
            subprocess.run(
                [
                    sys.executable,
                    str(ROOT / "benchmarks" / "synth_corpus.py"),
                    str(corpus),
                    "--n",
                    str(args.n),
                    "--tasks",
                    str(args.tasks),
                ],
                check=True,
                cwd=ROOT,
            )
        conn = proc = url = None
        if any(m != "offline" for m in args.modes):
            parent, server_end = mp.Pipe()
            proc = mp.get_context("spawn").Process(
                target=serve,
                args=(server_end, args.latency_median, args.latency_sigma, args.latency_cap, args.batch_running_s),
                daemon=True,
            )
            proc.start()
            conn, url = parent, parent.recv()
        rows: list[dict] = []
        try:
            for mode in args.modes:
                rows += run_mode(mode, corpus.resolve(), work, url if mode != "offline" else None, conn, args)
        finally:
            if conn is not None:
                conn.send("stop")
                proc.join(5)
    print()
    print(table(rows, args))
    twice = max((r.get("paid_twice", 0) for r in rows), default=0)
    print(
        f"\nbatch items paid twice (server side): {twice}; load average {os.getloadavg()[0]:.2f} at the end; "
        f"online latency log-normal, median {args.latency_median} s, sigma {args.latency_sigma}; "
        f"concurrency {args.concurrency}, {args.rpm} RPM, {args.tpm:,} TPM"
    )


if __name__ == "__main__":
    main()
