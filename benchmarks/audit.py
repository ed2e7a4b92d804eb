"""Does the coverage audit notice criteria that do not belong? One key-less run per bundled corpus, audited
with criteria of the other corpora and with its own held-out tasks.

    nice .venv/bin/python benchmarks/audit.py [--run-criteria 1500] [--audit-criteria 300]

Per bundled corpus (PaperBench, DevAI, HealthBench, via pipelines/*.toml): a fifth of its tasks (by a stable
hash of the task id) is held out; a key-less run (`taxonomy run --provider offline`) is made on a sample of the
other tasks' criteria; then `taxonomy audit --taxonomy RUN` is run on a sample of each other corpus and on a
sample of the held-out tasks' criteria. One row per pair: the share of audited criteria flagged as fitting no
capability, before (the fit-score rule alone: the tagger's confidence below [audit] none_threshold) and after
(the calibrated rule the audit applies). Target: at least 80% of a foreign corpus, at most 10% of the run's own
held-out criteria.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from taxonomy.analysis.audit_run import fit_scores  # noqa: E402
from taxonomy.config import load_config  # noqa: E402
from taxonomy.corpus import load_corpus  # noqa: E402
from taxonomy.taxonomy_io import load_taxonomy  # noqa: E402

CORPORA = ("paperbench", "devai", "healthbench")
HELD_OUT = 5  # one task in this many is held out of the run
TAXONOMY = str(ROOT / ".venv" / "bin" / "taxonomy")


def corpus(name: str) -> pl.DataFrame:
    cfg = load_config(ROOT / "pipelines" / f"{name}.toml")
    frame = load_corpus(cfg.corpus, cfg.base_dir).frame
    held = [zlib.crc32(str(t).encode()) % HELD_OUT == 0 for t in frame["task_id"].to_list()]
    return frame.select(pl.col("task_id").cast(pl.Utf8), criterion=pl.col("text")).with_columns(held=pl.Series(held))


def sample(frame: pl.DataFrame, n: int) -> pl.DataFrame:
    return frame.sample(min(n, frame.height), seed=0, shuffle=True).select("task_id", "criterion")


def cli(*args: str) -> None:
    done = subprocess.run([TAXONOMY, *args, "--provider", "offline", "-q"], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"taxonomy {args[0]} failed ({done.returncode}):\n{done.stderr[-2000:]}")


def audit(csv: Path, run: Path, out: Path) -> tuple[float, float]:
    """(before, after): shares of the audited criteria flagged by the fit-score rule and by the audit."""
    cli("audit", str(csv), "--taxonomy", str(run), "--run-dir", str(out))
    cfg = load_config(out / "pipeline.toml")
    criteria = pl.read_parquet(out / "criteria.parquet")
    tags = fit_scores(
        criteria, pl.read_parquet(out / "stage3_tags.parquet"), load_taxonomy(run / "taxonomy.json"), cfg, run
    )
    before = float((tags["score"].fill_null(0.0) < cfg.audit.none_threshold).mean())
    after = pl.read_csv(out / "audit" / "unmapped.csv").height / max(criteria.height, 1)
    return before, after


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-criteria", type=int, default=1500, help="criteria of each run (a sample)")
    ap.add_argument("--audit-criteria", type=int, default=300, help="criteria audited per pair (a sample)")
    args = ap.parse_args()
    frames = {name: corpus(name) for name in CORPORA}
    print("| run corpus | audited | kind | n | flagged before | flagged after | target | met |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name, frame in frames.items():
            t0 = time.time()
            run = work / f"run_{name}"
            sample(frame.filter(~pl.col("held")), args.run_criteria).write_csv(work / f"{name}_run.csv")
            cli("run", str(work / f"{name}_run.csv"), "--run-dir", str(run))
            for other, of in frames.items():
                own = other == name
                audited = sample(of.filter(pl.col("held")) if own else of, args.audit_criteria)
                csv = work / f"{name}_audit_{other}.csv"
                audited.write_csv(csv)
                before, after = audit(csv, run, work / f"audit_{name}_{other}")
                ok = after <= 0.10 if own else after >= 0.80
                kind = "own held-out" if own else "foreign"
                target = "≤ 10%" if own else "≥ 80%"
                print(
                    f"| {name} | {other} | {kind} | {audited.height} | {100 * before:.1f}% | {100 * after:.1f}% "
                    f"| {target} | {'yes' if ok else 'NO'} |",
                    flush=True,
                )
            print(f"<!-- {name}: {time.time() - t0:.0f} s -->", flush=True)


if __name__ == "__main__":
    main()
