"""How the offline backend groups corpora it was never tuned on: synthetic rubric corpora in
other domains and languages, each criterion with a gold kind of check.

    .venv/bin/python benchmarks/heldout.py

`benchmarks/heldout/` holds them. A model wrote them for this benchmark, criteria and gold kinds
alike, in the styles of different rubric authors (facts in them are unchecked):
  de_analysis.csv      300 German criteria for data analyses done with code, 8 tasks, 7 kinds (data
                       handling, numeric results, method, code execution, plots, interpretation,
                       report format), 11% penalties
  es_support.csv       299 Spanish criteria for customer-support replies, 8 tasks, 7 kinds (coverage,
                       facts, policy, actions taken, tone, format, privacy and safety), 11% penalties
  report_writing.csv   400 English criteria for research reports, 10 tasks, 8 kinds
                       (content coverage, factual accuracy, citation, structure, audience, analysis,
                       quantitative work, recommendations), 10% penalties
  zh_en_writing.csv    317 writing-task criteria, 70% Chinese and 30% English, 10 tasks, 7 kinds

Per corpus, one offline run through the library API (the `gold_kind` column is never read: a bare
corpus file's columns are detected by name, and no stage takes that one), scored like
benchmarks/quality.py: NMI of the Stage 3 primary against the gold kind, the same for KMeans(k) on
TF-IDF + SVD (mean of 3 seeds), topic leak (AMI of the primary against the task), the largest
capability's share, and NMI of the primary against the criterion's script (written without spaces
or not, as the offline features read it: near 0 when capabilities do not split by language). NMI of
the Stage 1 labels (about 80 fine kinds) against the gold kind, and of the best
merge of those labels (each to its label's majority gold kind, which only gold allows), say how
much of the signal the merge into 8-10 capabilities keeps.
"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter
from pathlib import Path

import polars as pl
from sklearn.metrics import normalized_mutual_info_score

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.quality import kmeans_tfidf_svd, topic_leak  # noqa: E402
import taxonomy  # noqa: E402
from taxonomy.text import is_spaceless  # noqa: E402

CORPORA = sorted((ROOT / "benchmarks" / "heldout").glob("*.csv"))
BASELINE_SEEDS = 3


def score(path: Path, work: Path) -> dict:
    run = taxonomy.fit(path, provider="offline", run_dir=work / path.stem)
    gold = dict(zip(*pl.read_csv(path).select("criterion", "gold_kind").to_dict(as_series=False).values()))
    crit = run.criteria.select("criterion_id", "task_id", "text")
    tags = run.tags.select("criterion_id", "primary")
    labels = pl.read_parquet(run.path / "stage1_labels.parquet").select(
        "criterion_id", pl.col("labels").list.first().alias("label")
    )
    x = crit.join(tags, on="criterion_id").join(labels, on="criterion_id")
    kinds = [gold[t] for t in x["text"].to_list()]
    primary, label = x["primary"].to_list(), x["label"].to_list()
    k = len(set(primary))
    majority = {lab: Counter(g for g, b in zip(kinds, label) if b == lab).most_common(1)[0][0] for lab in set(label)}
    baseline = (
        sum(
            normalized_mutual_info_score(kinds, kmeans_tfidf_svd(x["text"].to_list(), k, seed))
            for seed in range(BASELINE_SEEDS)
        )
        / BASELINE_SEEDS
    )
    return {
        "corpus": path.stem,
        "criteria": x.height,
        "capabilities": k,
        "nmi": round(normalized_mutual_info_score(kinds, primary), 3),
        "tfidf_svd": round(baseline, 3),
        "labels_nmi": round(normalized_mutual_info_score(kinds, label), 3),
        "best_merge_nmi": round(normalized_mutual_info_score(kinds, [majority[b] for b in label]), 3),
        "leak": round(topic_leak(x["task_id"].cast(str).to_list(), primary), 3),
        "largest": round(max(Counter(primary).values()) / x.height, 3),
        "script_nmi": round(normalized_mutual_info_score([is_spaceless(t) for t in x["text"].to_list()], primary), 3),
    }


def main() -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        rows = [score(p, Path(tmp)) for p in CORPORA]
    pl.Config.set_tbl_cols(20)
    pl.Config.set_tbl_width_chars(200)
    print(pl.DataFrame(rows))
    return rows


if __name__ == "__main__":
    main()
