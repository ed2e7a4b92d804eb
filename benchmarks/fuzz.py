"""Generated rubric files through `taxonomy run --provider offline --no-report` and `taxonomy lint`: the tracebacks
found (one per last frame), the hangs, and each command's exit codes.

    python benchmarks/fuzz.py              # 1,000 files, 2 processes
    python benchmarks/fuzz.py --n 200      # a quicker look

The files are drawn from the Hypothesis strategies of the property tests (tests/rubrics.py) under a fixed seed, so
a run names the same files every time: well-formed rubrics, rubrics with one bad row and damaged files, about a
third each (at seed 0, 288, 369 and 343 of 1,000).
Hypothesis rather than a generator of its own: the strategies are the property tests' (one description of what a
rubric may be), and it starts from the small, plain cases where a crash is easiest to read. `.example()` cannot be
seeded, so the files are collected by a seeded @given function.

Each file runs in a worker process that imported the CLI once (a fresh interpreter per command costs more than the
command), through typer's CliRunner as the tests call it. A command still running after --timeout seconds is a
hang: the worker reports where it was; one that does not answer in twice that is killed and replaced."""

from __future__ import annotations

import argparse
import collections
import multiprocessing as mp
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from multiprocessing.connection import wait
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


class Hang(BaseException):
    """Raised by the alarm in a worker: a BaseException, so no `except Exception` of the command swallows it."""


def generate(n: int, seed: int) -> list[tuple[str, object, bytes]]:
    """n cases (kind, rubric, file bytes), the same for the same seed."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as with_seed
    from hypothesis import strategies as st

    from tests.rubrics import file_bytes, file_faults, row_faults, rubrics

    cases: list[tuple[str, object, bytes]] = []
    whole = rubrics().map(lambda r: ("well-formed", r, file_bytes(r)))
    bad_row = row_faults().map(lambda c: (f"bad row ({c[1].kind})", c[0], file_bytes(c[0])))
    damaged = file_faults().map(lambda c: (f"damaged ({c[1].kind})", c[0], c[2]))

    @with_seed(seed)
    @settings(
        max_examples=n,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(st.one_of(whole, whole, bad_row, damaged, damaged))
    def collect(case):
        if len(cases) < n:
            cases.append(case)

    while len(cases) < n:  # Hypothesis may stop short of max_examples (a repeat is not counted twice)
        before = len(cases)
        collect()
        if len(cases) == before:
            break
    return cases


def _last_frame(tb_text: str) -> str:
    frames = [line.strip() for line in tb_text.splitlines() if line.strip().startswith('File "')]
    return frames[-1] if frames else "(no frame)"


def _one(args: list[str], limit: int) -> dict:
    """One command in this process: its exit code, or the traceback it ended in, or where it hung."""
    from typer.testing import CliRunner

    from taxonomy.cli import app

    signal.alarm(limit)
    try:
        result = CliRunner().invoke(app, args)
    except Hang:
        return {"outcome": "hang", "where": _last_frame(traceback.format_exc())}
    finally:
        signal.alarm(0)
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        text = "".join(traceback.format_exception(*result.exc_info))
        return {"outcome": "traceback", "frame": _last_frame(text), "error": f"{type(exc).__name__}: {exc}", "tb": text}
    if "Traceback (most recent call last)" in result.output:
        text = result.output[result.output.index("Traceback (most recent call last)") :]
        return {"outcome": "traceback", "frame": _last_frame(text), "error": text.strip().splitlines()[-1], "tb": text}
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    one_line = result.exit_code != 2 or (len(errors) == 1 and "; fix: " in errors[0])
    return {"outcome": "exit", "code": result.exit_code, "one_error_line": one_line, "tail": result.output[-400:]}


def _alarm(*_) -> None:
    raise Hang()


def _serve(conn, limit: int) -> None:
    """A worker: the CLI imported once, then one file after another until it is sent None."""
    signal.signal(signal.SIGALRM, _alarm)
    for key in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_API_KEY"):
        os.environ.pop(key, None)
    import taxonomy.cli  # noqa: F401 - imported here once, not once per command

    while (job := conn.recv()) is not None:
        path = Path(job)
        run = ["run", str(path), "--provider", "offline", "--no-report", "-q", "--run-dir", str(path) + ".run"]
        conn.send({"run": _one(run, limit), "lint": _one(["lint", str(path)], limit)})
        shutil.rmtree(str(path) + ".run", ignore_errors=True)


class Worker:
    """A worker process, started fresh (spawn): a forked child of a parent that has polars' thread pool deadlocks."""

    def __init__(self, limit: int):
        self.conn, child = mp.Pipe()
        self.proc = mp.get_context("spawn").Process(target=_serve, args=(child, limit), daemon=True)
        self.proc.start()
        self.job: int | None = None
        self.since = 0.0

    def send(self, i: int, path: Path) -> None:
        self.job, self.since = i, time.monotonic()
        self.conn.send(str(path))

    def stop(self) -> None:
        if self.proc.is_alive():
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.join()


def check_all(paths: list[Path], jobs: int, limit: int) -> dict[int, dict]:
    """Every file through both commands, `jobs` workers at a time; a worker silent past 2 x limit + 10 s is a hang."""
    results: dict[int, dict] = {}
    todo = list(enumerate(paths))[::-1]
    workers = [Worker(limit) for _ in range(jobs)]
    shown = 0
    for w in workers:
        if todo:
            w.send(*todo.pop())
    while any(w.job is not None for w in workers):
        busy = [w for w in workers if w.job is not None]
        for conn in wait([w.conn for w in busy], timeout=1.0):
            w = next(w for w in busy if w.conn is conn)
            try:
                results[w.job] = conn.recv()
            except EOFError:  # the worker died (a crash below Python): counted as a traceback of both commands
                dead = {"outcome": "traceback", "frame": "(worker process died)", "error": "", "tb": ""}
                results[w.job] = {"run": dead, "lint": dead}
                workers[workers.index(w)] = w = Worker(limit)
            w.job = None
            if todo:
                w.send(*todo.pop())
        for k, w in enumerate(workers):
            if w.job is not None and time.monotonic() - w.since > 2 * limit + 10:
                hung = {"outcome": "hang", "where": "(killed: no answer)"}
                results[w.job] = {"run": hung, "lint": hung}
                w.stop()
                workers[k] = Worker(limit)
                if todo:
                    workers[k].send(*todo.pop())
        if len(results) // 100 > shown:
            shown = len(results) // 100
            print(f"  {len(results)}/{len(paths)} files", file=sys.stderr, flush=True)
    for w in workers:
        w.conn.send(None)
        w.proc.join(timeout=5)
        w.stop()
    return results


def report(cases, paths, results, seconds: float) -> int:
    kinds = collections.Counter(kind.split(" (")[0] for kind, _, _ in cases)
    print(
        f"fuzz: {len(paths)} files ({', '.join(f'{v} {k}' for k, v in kinds.items())}) through `taxonomy run "
        f"--provider offline --no-report` and `taxonomy lint`: {seconds:.0f} s"
    )
    tracebacks: dict[tuple[str, str], list] = collections.defaultdict(list)
    hangs, not_one_line = [], []
    for command in ("run", "lint"):
        codes = collections.Counter()
        for i, res in sorted(results.items()):
            r = res[command]
            codes[r["outcome"] if r["outcome"] != "exit" else f"exit {r['code']}"] += 1
            if r["outcome"] == "traceback":
                tracebacks[(command, r["frame"])].append((i, r))
            elif r["outcome"] == "hang":
                hangs.append((command, i, r["where"]))
            elif not r["one_error_line"]:
                not_one_line.append((command, i, r["tail"]))
        print(f"  {command:4} " + ", ".join(f"{k}: {v}" for k, v in sorted(codes.items())))
    by_kind: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for i, res in results.items():
        r = res["run"]
        by_kind[cases[i][0].split(" (")[0]][r["outcome"] if r["outcome"] != "exit" else f"exit {r['code']}"] += 1
    for kind, codes in sorted(by_kind.items()):
        print(f"    run on {kind}: " + ", ".join(f"{k}: {v}" for k, v in sorted(codes.items())))
    refused = [i for i, res in results.items() if cases[i][0] == "well-formed" and res["run"].get("code") == 2]
    for i in refused[:5]:
        print(f"      well-formed, refused: {paths[i]}: {results[i]['run']['tail'].strip().splitlines()[-1][:240]}")
    n_tb = sum(len(v) for v in tracebacks.values())
    print(f"tracebacks: {n_tb} ({len(tracebacks)} distinct last frames)")
    for (command, frame), hits in sorted(tracebacks.items(), key=lambda kv: -len(kv[1])):
        i, r = hits[0]
        print(f"  {len(hits)} x {command}: {r['error'][:200]}\n    at {frame}\n    e.g. {paths[i]} ({cases[i][0]})")
        print("    " + "\n    ".join(r["tb"].strip().splitlines()[-6:]))
    print(f"hangs: {len(hangs)}")
    for command, i, where in hangs:
        print(f"  {command}: {paths[i]} ({cases[i][0]}) at {where}")
    print(f"exit 2 without one `error:` line with a fix: {len(not_one_line)}")
    for command, i, tail in not_one_line[:10]:
        print(f"  {command}: {paths[i]} ({cases[i][0]}): {tail.strip().splitlines()[-1][:200] if tail.strip() else ''}")
    return 1 if tracebacks or hangs else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="generated files (default 1000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--timeout", type=int, default=60, help="seconds a command may take before it is a hang")
    parser.add_argument("--keep", type=Path, help="write the files here and keep them (default: a temporary folder)")
    args = parser.parse_args()
    start = time.monotonic()
    cases = generate(args.n, args.seed)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="taxonomy-fuzz-"))
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, (_, rubric, data) in enumerate(cases):
        paths.append(folder / f"f{i:04d}.{rubric.fmt}")
        paths[-1].write_bytes(data)
    results = check_all(paths, args.jobs, args.timeout)
    status = report(cases, paths, results, time.monotonic() - start)
    if args.keep is None and not status:
        shutil.rmtree(folder, ignore_errors=True)
    elif status:
        print(f"files kept in {folder}")
    return status


if __name__ == "__main__":
    sys.exit(main())
