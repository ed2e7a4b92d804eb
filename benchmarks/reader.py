"""A reader test: can a person who sees only `taxonomy.md` place criteria where the tool placed them?

    .venv/bin/python benchmarks/reader.py packet RUN_DIR --n 40 --seed 7 > packet.md
    (a reader, person or model, who has seen nothing else answers one capability name per numbered criterion,
     as JSON: {"1": "name", "2": "name", ...})
    .venv/bin/python benchmarks/reader.py score RUN_DIR answers.json --n 40 --seed 7

Agreement is the share of criteria whose answer is the tool's primary tag; "in tags" counts any of its
1-3 tags. The sample is drawn with the seed over criteria the tool tagged, so packet and score agree.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import polars as pl


def sample(run: Path, n: int, seed: int) -> pl.DataFrame:
    tags = pl.read_parquet(run / "stage3_tags.parquet").filter(pl.col("status") == "ok")
    criteria = pl.read_parquet(run / "criteria.parquet").select("criterion_id", "text", "weight")
    rows = tags.join(criteria, on="criterion_id").sort("criterion_id")
    picked = sorted(random.Random(seed).sample(range(rows.height), min(n, rows.height)))
    return rows[picked]


def packet(run: Path, n: int, seed: int) -> str:
    lines = [
        (run / "taxonomy.md").read_text(),
        "",
        "---",
        "",
        "Place each criterion below in the one capability of the taxonomy above that it belongs to. "
        'Answer JSON only: {"1": "capability_name", ...}.',
        "",
    ]
    for i, r in enumerate(sample(run, n, seed).iter_rows(named=True), 1):
        sign = " (penalty)" if (r["weight"] or 0) < 0 else ""
        lines.append(f"{i}. {r['text']}{sign}")
    return "\n".join(lines) + "\n"


def score(run: Path, answers: dict[str, str], n: int, seed: int) -> dict[str, float]:
    rows = sample(run, n, seed)
    given = [answers.get(str(i), "").strip().strip("`") for i in range(1, rows.height + 1)]
    primary = sum(a == p for a, p in zip(given, rows["primary"].to_list()))
    anywhere = sum(a in t for a, t in zip(given, rows["tags"].to_list()))
    return {
        "criteria": rows.height,
        "agreement": round(primary / rows.height, 3),
        "in_tags": round(anywhere / rows.height, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["packet", "score"])
    ap.add_argument("run", type=Path)
    ap.add_argument("answers", type=Path, nargs="?")
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    if args.what == "packet":
        print(packet(args.run, args.n, args.seed), end="")
    else:
        print(json.dumps(score(args.run, json.loads(args.answers.read_text()), args.n, args.seed)))


if __name__ == "__main__":
    main()
