"""Quality probe of the offline Stage 1 against the corpora's own categories.

For PaperBench and DevAI, the Stage-1 primary check kind (and the first label) is compared
with the gold fields (PaperBench task_category and finegrained_category, DevAI category)
by NMI and ARI, and with the task by adjusted mutual information (the topic leak: a check
kind should not tell which paper a criterion came from). Beside them: plain topic
baselines with the same number of clusters (KMeans on TF-IDF + SVD of the criterion text,
several seeds), and the check kind with the category hidden (text only).

    .venv/bin/python benchmarks/offline_probe.py [--data data] [--seeds 3] [--json out.json]

Targets (for the final taxonomy; probed here at Stage 1): NMI above the best plain
baseline on every gold field, topic leak <= 0.15 on PaperBench, no kind above 35%.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
from sklearn.cluster import KMeans
from sklearn.decomposition import TruncatedSVD
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics import adjusted_mutual_info_score, adjusted_rand_score, normalized_mutual_info_score

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from taxonomy.config import LabelRules  # noqa: E402
from taxonomy.corpus import CorpusConfig, load_corpus  # noqa: E402
from taxonomy.offline import check_kind, discover_offline  # noqa: E402

CORPORA = {"paperbench": ("category", "finegrained_category"), "devai": ("category",)}
LEAK_TARGET, SHARE_TARGET = 0.15, 0.35


def plain_baseline(texts: list[str], k: int, seed: int) -> np.ndarray:
    """KMeans on TF-IDF + SVD of the criterion text: what topic clustering alone finds."""
    x = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2), min_df=2).fit_transform(texts)
    dims = max(2, min(100, x.shape[1] - 1, x.shape[0] - 1))
    z = TruncatedSVD(dims, random_state=seed).fit_transform(x)
    z /= np.linalg.norm(z, axis=1, keepdims=True) + 1e-12
    return KMeans(k, n_init=4, random_state=seed).fit_predict(z)


def scores(pred, frame: pl.DataFrame, golds: tuple[str, ...]) -> dict[str, float]:
    out = {}
    for g in golds:
        gold = frame[g].fill_null("(none)").to_list()
        out[f"nmi:{g}"] = normalized_mutual_info_score(gold, pred)
        out[f"ari:{g}"] = adjusted_rand_score(gold, pred)
    out["leak"] = adjusted_mutual_info_score(frame["task_id"].to_list(), pred)
    return out


def probe(name: str, data: Path, seeds: int, rules: LabelRules) -> dict:
    frame = load_corpus(CorpusConfig(path=str(data / name), format=name), ROOT).frame
    golds = CORPORA[name]
    t0 = time.perf_counter()
    stage1 = discover_offline(frame, rules)
    seconds = time.perf_counter() - t0
    first = [labels[0] for labels in stage1["labels"].to_list()]
    kinds = [check_kind(label, rules.suffix) or "(unknown)" for label in first]
    blind = discover_offline(frame.with_columns(pl.lit(None, pl.Utf8).alias("category")), rules)
    blind_kinds = [check_kind(labels[0], rules.suffix) or "(unknown)" for labels in blind["labels"].to_list()]

    rows = {
        "check kind": scores(kinds, frame, golds),
        "check kind, text only": scores(blind_kinds, frame, golds),
        "first label": scores(first, frame, golds),
    }
    k_kind, k_label = len(set(kinds)), len(set(first))
    texts = frame["text"].to_list()
    for k, tag in ((k_kind, "kinds"), (k_label, "labels")):
        runs = [scores(plain_baseline(texts, k, s), frame, golds) for s in range(seeds)]
        rows[f"plain k={k} ({tag}) mean"] = {m: float(np.mean([r[m] for r in runs])) for m in runs[0]}
        rows[f"plain k={k} ({tag}) best"] = {m: float(np.max([r[m] for r in runs])) if m != "leak" else float(np.min([r[m] for r in runs])) for m in runs[0]}

    # Context for the leak target: how much the corpus's own categories already tell the task.
    reference = {g: adjusted_mutual_info_score(frame["task_id"].to_list(), frame[g].fill_null("(none)").to_list()) for g in golds}
    if len(golds) > 1:
        joint = [" / ".join(str(v) for v in row) for row in frame.select(golds).fill_null("(none)").iter_rows()]
        reference[" x ".join(golds)] = adjusted_mutual_info_score(frame["task_id"].to_list(), joint)

    shares = pl.Series(kinds).value_counts(sort=True).with_columns((pl.col("count") / len(kinds)).alias("share"))
    return {
        "corpus": name, "n": frame.height, "seconds": seconds, "k_kinds": k_kind, "k_labels": k_label,
        "unique_labels": stage1.explode("labels")["labels"].n_unique(), "rows": rows,
        "shares": {k: round(s, 4) for k, _, s in shares.iter_rows()}, "golds": golds, "gold_leak": reference,
    }


def report(res: dict) -> list[str]:
    golds = res["golds"]
    metrics = [f"nmi:{g}" for g in golds] + [f"ari:{g}" for g in golds] + ["leak"]
    short = {"category": "cat", "finegrained_category": "fine"}
    head = f"{'':34}" + "".join(f"{m.split(':')[0].upper() + (' ' + short.get(m.split(':')[1], '') if ':' in m else ''):>11}" for m in metrics)
    lines = [f"== {res['corpus']}: {res['n']} criteria, Stage 1 in {res['seconds']:.2f}s, "
             f"{res['k_kinds']} check kinds, {res['k_labels']} distinct first labels ({res['unique_labels']} labels in all)", head]
    for row, vals in res["rows"].items():
        lines.append(f"{row:34}" + "".join(f"{vals[m]:>11.3f}" for m in metrics))
    kind = res["rows"]["check kind"]
    verdicts = []
    for g in golds:
        best = max(v[f"nmi:{g}"] for r, v in res["rows"].items() if r.startswith("plain") and "(kinds)" in r)
        verdicts.append(f"NMI {short.get(g, g)} {kind[f'nmi:{g}']:.3f} vs best plain {best:.3f}: {'PASS' if kind[f'nmi:{g}'] > best else 'FAIL'}")
    top = max(res["shares"].values())
    verdicts.append(f"largest kind {top:.1%}: {'PASS' if top <= SHARE_TARGET else 'FAIL'}")
    if res["corpus"] == "paperbench":
        verdicts.append(f"leak {kind['leak']:.3f} (target <= {LEAK_TARGET}): {'PASS' if kind['leak'] <= LEAK_TARGET else 'FAIL'}")
    lines.append("targets: " + "; ".join(verdicts))
    lines.append("leak of the gold fields themselves: " + ", ".join(f"{g} {v:.3f}" for g, v in res["gold_leak"].items()))
    lines.append("shares: " + ", ".join(f"{k} {v:.1%}" for k, v in res["shares"].items()))
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=ROOT / "data")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    results = [probe(name, args.data, args.seeds, LabelRules()) for name in CORPORA]
    for res in results:
        print("\n".join(report(res)), end="\n\n")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
