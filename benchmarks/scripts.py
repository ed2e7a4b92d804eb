"""Does a translated rubric group as its original does? One key-less run per script, scored against the English.

    .venv/bin/python benchmarks/scripts.py

`tests/fixtures/scripts/` holds a hand-written English support rubric and its first 40 rows in eleven languages
(same rows, same order, same gold kind of check). Per file, one offline run through the library API (the
`gold_kind` column is never read), and:
  nmi_vs_en     NMI of its Stage 3 primary tags against the English 40's (1.0: the same grouping)
  nmi_vs_gold   NMI of its primary tags against the gold kind (the English row is the bar)
  kmeans_gold   the same for KMeans(k) on TF-IDF + SVD of the same text (mean of 3 seeds), a plain baseline
  capabilities, largest   how many capabilities, and the largest one's share of primary tags
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

from benchmarks.quality import kmeans_tfidf_svd  # noqa: E402
import taxonomy  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "scripts"
ENGLISH = FIXTURES / "support40_en.csv"
SEEDS = 3


def primaries(path: Path, work: Path) -> pl.DataFrame:
    """criterion_id, text, gold_kind and primary tag of one offline run."""
    run = taxonomy.fit(path, provider="offline", run_dir=work / path.stem)
    crit = run.criteria.select("criterion_id", "text")
    tags = run.tags.select("criterion_id", "primary")
    gold = pl.read_csv(path).select(pl.col("criterion").alias("text"), "gold_kind")
    return crit.join(tags, on="criterion_id").join(gold, on="text", how="left").sort("criterion_id")


def score(path: Path, english: pl.DataFrame, work: Path) -> dict:
    x = primaries(path, work)
    both = x.join(english.select("criterion_id", pl.col("primary").alias("en")), on="criterion_id")
    kinds, primary = x["gold_kind"].to_list(), x["primary"].to_list()
    k = len(set(primary))
    baseline = (
        sum(
            normalized_mutual_info_score(kinds, kmeans_tfidf_svd(x["text"].to_list(), k, seed)) for seed in range(SEEDS)
        )
        / SEEDS
    )
    return {
        "language": path.stem.removeprefix("support40_"),
        "criteria": x.height,
        "capabilities": k,
        "largest": round(max(Counter(primary).values()) / x.height, 3),
        "nmi_vs_en": round(normalized_mutual_info_score(both["en"].to_list(), both["primary"].to_list()), 3),
        "nmi_vs_gold": round(normalized_mutual_info_score(kinds, primary), 3),
        "kmeans_gold": round(baseline, 3),
    }


def main() -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        english = primaries(ENGLISH, Path(tmp) / "en")
        paths = [ENGLISH] + sorted(p for p in FIXTURES.glob("support40_*.csv") if p != ENGLISH)
        rows = [score(p, english, Path(tmp)) for p in paths]
    pl.Config.set_tbl_rows(len(rows))
    pl.Config.set_tbl_cols(10)
    pl.Config.set_tbl_width_chars(160)
    table = pl.DataFrame(rows)
    print(table)
    translations = table.filter(pl.col("language") != "en")
    print(
        f"translations: nmi_vs_en min {translations['nmi_vs_en'].min():.3f}, "
        f"median {translations['nmi_vs_en'].median():.3f}"
    )
    return rows


if __name__ == "__main__":
    main()
