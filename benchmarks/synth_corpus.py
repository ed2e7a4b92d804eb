"""A large synthetic rubric corpus, built deterministically from the bundled real criteria.

    .venv/bin/python benchmarks/synth_corpus.py outputs/synth/synth100k.parquet
    .venv/bin/python benchmarks/synth_corpus.py out.jsonl --n 20000 --tasks 400 --seed 1 --pipeline out.toml

No run larger than the bundled corpora exists, so scale is measured on this. Each synthetic task
takes one real task's brief and draws its criteria from that task's criteria, each one either kept,
spliced from two of them, reordered, trimmed or lightly re-worded. Every operation is generic
(sentence and clause boundaries, parentheses, punctuation): nothing here knows a topic, so the
corpus keeps the source corpora's mix of check kinds and topics.

The output is a plain table (.parquet, .jsonl or .csv) the `table` corpus format reads with its
default column names; `category` carries the source's own category (a gold field, for measurement
only) and `origin`/`operation` say where each criterion came from. `--pipeline` also writes a
pipeline TOML pointing at it.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import taxonomy  # noqa: E402

DEFAULT_SOURCES = [ROOT / "pipelines" / "paperbench.toml", ROOT / "pipelines" / "devai.toml"]
OPERATIONS = ("splice", "splice", "join", "join", "reorder", "trim", "reword")
KEEP_P = 0.10  # share of criteria kept verbatim
_SENTENCE = re.compile(r"(?<=[.;!?])\s+(?=\S)")
_CLAUSE = re.compile(r",\s+")
_PAREN = re.compile(r"\s*\([^()]{1,80}\)")
_MIN_WORDS = 4


def load_sources(pipelines: list[Path]) -> pl.DataFrame:
    """Every criterion of the source pipelines, task ids prefixed by the pipeline file's name (its `name`)."""
    frames = []
    for path in pipelines:
        frame = taxonomy.read_corpus(path)
        frames.append(
            frame.select(
                "task_id", "criterion_id", "text", "weight", "category", "direction", "brief", "context"
            ).with_columns(task_id=pl.lit(f"{path.stem}:") + pl.col("task_id"))
        )
    return pl.concat(frames).sort("task_id", "criterion_id")


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE.split(text.strip()) if s]


def _clauses(text: str) -> list[str]:
    parts = _CLAUSE.split(text)
    return parts if len(parts) > 1 and all(_words(c) >= 3 for c in parts) else [text]


def _words(text: str) -> int:
    return len(text.split())


def _splice(a: str, b: str, rng: random.Random) -> str | None:
    """The first part of one criterion, then the rest of another from the same task, cut at
    sentence or clause boundaries chosen at random."""
    for split, glue in ((_sentences, " "), (_clauses, ", ")):
        pa, pb = split(a), split(b)
        if len(pa) > 1 or len(pb) > 1:
            head = pa[: rng.randint(1, len(pa) - 1) if len(pa) > 1 else 1]
            tail = pb[rng.randint(1, len(pb) - 1) if len(pb) > 1 else 0 :]
            if glue == ", ":
                head = [h.rstrip(".") for h in head]
            return glue.join(head + tail)
    return None


def _join(a: str, b: str) -> str | None:
    """Two short criteria checked together, as rubrics often do."""
    return f"{a.rstrip('. ')}; {b[:1].lower()}{b[1:]}" if _words(a) + _words(b) <= 40 else None


def _reorder(text: str) -> str | None:
    parts = _sentences(text)
    if len(parts) > 1:
        return " ".join(parts[1:] + parts[:1])
    clauses = _clauses(text.rstrip("."))
    if len(clauses) > 1:
        return ", ".join(clauses[1:] + clauses[:1]) + ("." if text.endswith(".") else "")
    return None


def _trim(text: str) -> str | None:
    """Drop a parenthetical, keeping a criterion that still says something."""
    cut = _PAREN.sub("", text, count=1)
    return cut if cut != text and _words(cut) >= _MIN_WORDS else None


def _reword(text: str, rng: random.Random) -> str | None:
    """Punctuation-level re-wording: quotes, final stop, capital, spacing after colons."""
    choice = rng.randrange(4)
    if choice == 0 and ('"' in text or "`" in text):
        return text.replace("`", '"') if "`" in text else text.replace('"', "`")
    if choice == 1:
        return text[:-1] if text.endswith(".") else text + "."
    if choice == 2 and text[:1].isalpha():
        return text[0].swapcase() + text[1:]
    out = re.sub(r"\s*:\s*", ": ", text) if ":" in text else None
    return out if out != text else None


def _sizes(n: int, tasks: int, rng: random.Random) -> list[int]:
    """Criteria per task: log-normal like real benchmarks (a few large rubrics), summing to n."""
    raw = [rng.lognormvariate(0.0, 0.6) for _ in range(tasks)]
    total = sum(raw)
    sizes = [max(1, int(r / total * n)) for r in raw]
    order = sorted(range(tasks), key=lambda i: -raw[i])
    while sum(sizes) != n:  # hand out the rounding remainder (or take back max(1, .)'s excess) largest first
        step = 1 if sum(sizes) < n else -1
        for i in order[: abs(n - sum(sizes))]:
            if sizes[i] + step >= 1:
                sizes[i] += step
    return sizes


def _pools(sources: pl.DataFrame, size: int) -> list[list[dict]]:
    """Each source task's criteria, topped up with the next tasks of the same corpus when it has
    fewer than `size`, so small rubrics (a few criteria per task) still give distinct variants."""
    tasks = [g.to_dicts() for _, g in sources.group_by(["task_id"], maintain_order=True)]
    pools = []
    for i, rows in enumerate(tasks):
        corpus, pool, j = rows[0]["task_id"].split(":")[0], list(rows), i + 1
        while len(pool) < size and j < i + len(tasks):
            nxt = tasks[j % len(tasks)]
            if nxt[0]["task_id"].split(":")[0] == corpus:
                pool += nxt
            j += 1
        pools.append(pool)
    return pools


def _variant(rows: list[dict], rng: random.Random) -> tuple[str | None, str, list[dict]]:
    """One criterion: a real one, or one or two generic operations applied to one or two real ones."""
    a, b = rng.choice(rows), rng.choice(rows)
    if rng.random() < KEEP_P:
        return a["text"], "keep", [a]
    text, ops, used = a["text"], [], [a]
    for _ in range(1 + (rng.random() < 0.5)):
        op = rng.choice(OPERATIONS)
        if op in ("splice", "join"):
            out = None if b is a else _splice(text, b["text"], rng) if op == "splice" else _join(text, b["text"])
            used = [a, b] if out else used
        else:
            out = {"reorder": _reorder, "trim": _trim}[op](text) if op != "reword" else _reword(text, rng)
        if out:
            text = out
            ops.append(op)
    return (text if ops else None), "+".join(ops), used


def synth_corpus(sources: pl.DataFrame, n: int = 100_000, tasks: int = 2_000, seed: int = 0) -> pl.DataFrame:
    if n < tasks:
        raise ValueError(f"--n {n} is smaller than --tasks {tasks}; fix: ask for at least one criterion per task")
    rng = random.Random(seed)
    sizes = _sizes(n, tasks, rng)
    pools = _pools(sources, 2 * max(1, n // tasks))
    rows: list[dict] = []
    for t, size in enumerate(sizes):
        pool = pools[rng.randrange(len(pools))]
        lead, seen = pool[0], set()
        for j in range(size):
            for _ in range(20):  # another draw when the operations did not apply or the text repeats
                text, op, used = _variant(pool, rng)
                if text and text.strip() and text not in seen:
                    break
            else:  # a small pool ran out of variants: a numbered copy keeps texts unique within the task
                used, op = [rng.choice(pool)], "keep"
                text = f"{used[0]['text']} ({j + 1})"
            seen.add(text)
            a = used[0]
            rows.append(
                {
                    "task_id": f"synth{t:05d}",
                    "criterion_id": f"c{j:04d}",
                    "text": text,
                    "weight": a["weight"],
                    "category": a["category"],
                    "direction": a["direction"],
                    "brief": lead["brief"],
                    "context": a["context"],
                    "origin": " + ".join(f"{u['task_id']}/{u['criterion_id'].split('/')[-1]}" for u in used),
                    "operation": op,
                }
            )
    return pl.DataFrame(rows)


def write(frame: pl.DataFrame, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    name = out.name.lower()
    if name.endswith(".parquet"):
        frame.write_parquet(out)
    elif name.endswith(".jsonl"):
        frame.write_ndjson(out)
    elif name.endswith(".csv"):
        frame.write_csv(out)
    else:
        raise SystemExit(f"{out}: unknown suffix; fix: end the output name in .parquet, .jsonl or .csv")


def pipeline_toml(corpus: Path, name: str, k: int = 80) -> str:
    return (
        f'name = "{name}"\n\n[corpus]\n# Synthetic, from benchmarks/synth_corpus.py.\npath = "{corpus.resolve()}"\n'
        f'format = "table"\n\n[llm]\nprovider = "auto"\nmodel = "gemini-3-flash-preview"\n\n[cluster]\nk = {k}\n'
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="output file: .parquet, .jsonl or .csv")
    ap.add_argument("--n", type=int, default=100_000, help="criteria in all")
    ap.add_argument("--tasks", type=int, default=2_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sources", type=Path, nargs="*", default=DEFAULT_SOURCES, help="pipeline TOMLs of real corpora")
    ap.add_argument("--pipeline", type=Path, help="also write a pipeline TOML for the corpus here")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    sources = load_sources(args.sources)
    frame = synth_corpus(sources, args.n, args.tasks, args.seed)
    write(frame, args.out)
    if args.pipeline:
        args.pipeline.parent.mkdir(parents=True, exist_ok=True)
        args.pipeline.write_text(pipeline_toml(args.out, args.pipeline.stem))
    ops = frame["operation"].value_counts().sort("operation")
    print(
        f"{frame.height:,} criteria over {frame['task_id'].n_unique():,} tasks from {sources.height:,} real ones "
        f"-> {args.out} in {time.perf_counter() - start:.1f} s; operations: "
        + ", ".join(f"{o} {c:,}" for o, c in ops.iter_rows())
    )


if __name__ == "__main__":
    main()
