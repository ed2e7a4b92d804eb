"""Can a reader tell what each capability checks? Proxies, one offline run per bundled corpus.

    .venv/bin/python benchmarks/legibility.py                 # paperbench, devai, healthbench
    .venv/bin/python benchmarks/legibility.py --run-dir outputs/devai/offline   # score a run, don't re-run

Per corpus (targets of issue 21 in brackets):
  name coverage  per capability with 5+ criteria, the share of its primary criteria whose text holds a
                 content word of its name or title (long words matched on their first five letters);
                 mean [>= 0.8] and minimum [>= 0.5]
  template       the longest run of words found in every capability's description [<= 5]
  2+ tags        share of criteria with two or more tags; distinct scores: how many primary scores differ
  leak           adjusted mutual information between the primary tag and the source task [<= 0.15]
  placed         going down taxonomy.md's placement list as a reader would (openings and phrases matched on
                 the words as written, as the list's intro says): the share of criteria some
                 line catches, and the share of those it places as Stage 3 tagged them
These are proxies; the measure that counts is a reader who sees only taxonomy.md placing criteria.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
from sklearn.metrics import adjusted_mutual_info_score

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from taxonomy.config import load_config  # noqa: E402
from taxonomy.pipeline import open_session, run_pipeline  # noqa: E402
from taxonomy.validate import FUNCTION_WORDS  # noqa: E402

CORPORA = ("paperbench", "devai", "healthbench")
NAME_FRAME = {"check", "capability", "kind"}  # the name's fixed frame, not its content
_WORD = re.compile(r"[^\W\d_]+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _terms(cap: dict) -> list[str]:
    src = " ".join([cap["name"].replace("_", " "), cap.get("title") or ""])
    return sorted({w for w in _words(src) if w not in FUNCTION_WORDS and w not in NAME_FRAME and (len(w) >= 3 or not w.isascii())})


def _hit(term: str, text: str) -> bool:
    if not term.isascii():
        return term in text
    if len(term) >= 6:
        return re.search(r"\b" + re.escape(term[:5]), text) is not None
    return re.search(r"\b" + re.escape(term) + r"\w{0,3}\b", text) is not None


def _common_run(descs: list[str]) -> int:
    toks = [_words(d) for d in descs]
    if not toks or any(not t for t in toks):
        return 0
    best = 0
    for n in range(1, 40):
        grams = {tuple(toks[0][i:i + n]) for i in range(len(toks[0]) - n + 1)}
        if not any(all(g in {tuple(t[i:i + n]) for i in range(len(t) - n + 1)} for t in toks[1:]) for g in grams):
            break
        best = n
    return best


def _matches(want: list[str], got: list[str]) -> bool:
    """The intro's reading: a line word of more than 5 letters matches a word of more than 5 sharing its first 5,
    one of 5 letters any word beginning with it, a shorter one only itself."""
    return len(got) == len(want) and all(
        (len(c) > 5 and c[:5] == w[:5]) if len(w) > 5 else c.startswith(w) if len(w) == 5 else c == w
        for w, c in zip(want, got))


def _placed(rules: list[dict], crit: pl.DataFrame) -> tuple[float, float]:
    """(share of criteria a placement line catches, share of those it places as tagged)."""
    caught = right = 0
    for text, primary in zip(crit["text"].to_list(), crit["primary"].to_list()):
        words = _WORD.findall(text.lower())
        for r in rules:
            if r["kind"] not in ("opens", "uses"):  # the steps after the lines say where the rest goes; they catch nothing
                continue
            # an opening family is written "A / B": the criterion opens with one of its words
            wants = [_WORD.findall(alt.lower()) for alt in r["text"].split(" / ")] if r["kind"] == "opens" \
                else [_WORD.findall(r["text"].lower())]
            at = [0] if r["kind"] == "opens" else range(len(words) - len(wants[0]) + 1)
            if any(_matches(want, words[i:i + len(want)]) for want in wants for i in at):
                caught += 1
                right += r["capability"] == primary
                break
    return round(caught / max(crit.height, 1), 3), round(right / max(caught, 1), 3)


def measure(run_dir: Path) -> dict:
    crit = pl.read_parquet(run_dir / "criteria.parquet").join(pl.read_parquet(run_dir / "stage3_tags.parquet"), on="criterion_id")
    taxonomy = json.loads((run_dir / "taxonomy.json").read_text())
    caps = taxonomy["capabilities"]
    placed, placed_right = _placed(taxonomy.get("placement", []), crit)
    cov = {}
    for cap in caps:
        texts = [t.lower() for t in crit.filter(pl.col("primary") == cap["name"])["text"].to_list()]
        if len(texts) >= 5:
            terms = _terms(cap)
            cov[cap["name"]] = sum(any(_hit(w, t) for w in terms) for t in texts) / len(texts)
    worst = min(cov, key=cov.get) if cov else None
    return {
        "capabilities": len(caps),
        "name_cov_mean": round(sum(cov.values()) / max(len(cov), 1), 3),
        "name_cov_min": round(cov[worst], 3) if worst else 0.0, "worst": worst,
        "template_words": _common_run([c["description"] for c in caps]),
        "multi_tag": round(float((crit["tags"].list.len() >= 2).mean()), 3),
        "distinct_scores": int(crit["score"].n_unique()),
        "leak": round(adjusted_mutual_info_score(crit["task_id"].to_list(), crit["primary"].fill_null("-").to_list()), 3),
        "placed": placed, "placed_right": placed_right,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", action="append", choices=CORPORA)
    ap.add_argument("--run-dir", type=Path, help="score this run instead of running the bundled corpora")
    args = ap.parse_args()
    if args.run_dir:
        print(json.dumps(measure(args.run_dir)))
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.corpus or CORPORA:
            cfg = load_config(ROOT / "pipelines" / f"{name}.toml")
            session = open_session(cfg, provider="offline", run_dir=Path(tmp) / name, show_progress=False)
            start = time.perf_counter()
            run_pipeline(session)
            rows.append({"corpus": name, "seconds": round(time.perf_counter() - start, 1), **measure(Path(tmp) / name)})
    cols = ["corpus", "capabilities", "name_cov_mean", "name_cov_min", "worst", "template_words", "multi_tag", "distinct_scores", "leak", "placed", "placed_right", "seconds"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")


if __name__ == "__main__":
    main()
