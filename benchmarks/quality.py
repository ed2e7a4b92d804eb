"""How good is the Stage 3 primary capability as a partition of the criteria?

Three corpora in one run, each scored against the gold fields that ship with it, never
shown to the pipeline: PaperBench (`task_category`, `finegrained_task_category`), DevAI
(`category`) and HealthBench (`axis`). Before the pipeline runs, every column that could
feed it a gold label is blanked in the run's criteria snapshot (`category`, and the
loaders' gold extra columns), so the score measures what was induced from the text.

    .venv/bin/python benchmarks/quality.py                       # offline runs, all three corpora
    .venv/bin/python benchmarks/quality.py --corpus healthbench
    .venv/bin/python benchmarks/quality.py --provider gemini     # also the LLM run (resumes its run dir)
    .venv/bin/python benchmarks/quality.py --run-dir outputs/paperbench/offline   # score, don't re-run

Rows of each table (k = the number of distinct primary capabilities of the run; every row
is the mean over SEEDS seeds: the offline pipeline with cluster.seed = 0, 1, 2, and each
baseline with random_state = 0, 1, 2):
  <backend> taxonomy primary    Stage 3 primary tag of the run
  kmeans-embed                  KMeans(k) on LocalEmbedder(dim=256) embeddings of the criterion text
  kmeans-tfidf-svd              KMeans(k) on TF-IDF (word 1-2 grams) + TruncatedSVD(100) of the text
  random, same sizes            the primary labels shuffled (mean of 5 seeds): chance level
  one cluster                   every criterion in one group

Columns, per gold field: NMI (arithmetic normalisation) and ARI, both 0 at chance and 1 for
identical partitions; H = harmonic purity, the harmonic mean of purity (each cluster counted
by its majority gold class) and inverse purity (each gold class counted by its majority
cluster). H is not corrected for chance -- one cluster already gets 2p/(1+p), p = the largest
gold class's share -- so read it only against the one-cluster row. Rows with no gold value are
left out of that field's scores.
leak = adjusted mutual information between the partition and the criterion's source task
(PaperBench paper, DevAI instance, HealthBench conversation): a capability should say what
kind of check a criterion needs, not which task it came from.

Targets: NMI above the best plain baseline on every gold field (goal 1.25x); leak <= 0.15 on
every corpus; the hard merge constraints hold (no violations, primary shares 2%-40%); the
offline run over all 8,921 PaperBench leaves in <= 15 s.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
from sklearn.cluster import KMeans
from sklearn.decomposition import TruncatedSVD
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics import adjusted_mutual_info_score, adjusted_rand_score, normalized_mutual_info_score
from sklearn.metrics.cluster import contingency_matrix
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import taxonomy  # noqa: E402
from taxonomy.config import load_config  # noqa: E402
from taxonomy.embed.local import LocalEmbedder  # noqa: E402
from taxonomy.llm.providers import resolve_provider_name  # noqa: E402
from taxonomy.run import default_run_dir  # noqa: E402

GOLDS = {"paperbench": ("category", "finegrained_category"), "devai": ("category",), "healthbench": ("axis",)}
# Columns that hold a gold label or could leak one; blanked in the snapshot every stage reads.
GOLD_COLUMNS = ("category", "finegrained_category", "axis", "level", "theme")
SHORT = {"category": "cat", "finegrained_category": "fine", "axis": "axis"}
LEAK_TARGET = 0.15
LEAK_CORPORA = tuple(GOLDS)
TIME_TARGET_S = 15.0
GOAL_RATIO = 1.25
SEED = 0
SEEDS = 3
N_INIT = 4
RANDOM_SEEDS = 5
UNTAGGED = "(untagged)"
OFFLINE = "offline taxonomy primary"
TOP_TASKS = 4


# ---- metrics ---------------------------------------------------------------------------------
def harmonic_purity(gold, pred) -> tuple[float, float, float]:
    """(harmonic purity, purity, inverse purity) of partition `pred` against classes `gold`.

    purity = sum over clusters of the cluster's largest gold class / N; inverse purity = the
    same with the roles swapped. The harmonic mean rewards neither one big cluster (purity
    low) nor singletons (inverse purity low), but it is not corrected for chance.
    """
    c = contingency_matrix(gold, pred)  # rows: gold classes, columns: clusters
    n = c.sum()
    if n == 0:
        return float("nan"), float("nan"), float("nan")
    purity = c.max(axis=0).sum() / n
    inverse = c.max(axis=1).sum() / n
    h = 2 * purity * inverse / (purity + inverse) if purity + inverse else 0.0
    return float(h), float(purity), float(inverse)


def one_cluster_harmonic_purity(gold) -> float:
    """Harmonic purity of the everything-in-one-group partition: 2p/(1+p), p = largest class share."""
    _, counts = np.unique(np.asarray(gold, dtype=object), return_counts=True)
    p = counts.max() / counts.sum()
    return float(2 * p / (1 + p))


def topic_leak(task, pred) -> float:
    """Adjusted mutual information between the partition and the source task."""
    return float(adjusted_mutual_info_score(list(task), list(pred)))


def gold_scores(gold, pred) -> dict[str, float]:
    """NMI, ARI and harmonic purity of `pred` against `gold`, on the rows whose gold is not None."""
    keep = [i for i, g in enumerate(gold) if g is not None]
    g = [gold[i] for i in keep]
    p = [pred[i] for i in keep]
    h, purity, inverse = harmonic_purity(g, p)
    return {
        "nmi": float(normalized_mutual_info_score(g, p)),
        "ari": float(adjusted_rand_score(g, p)),
        "h": h,
        "purity": purity,
        "inverse_purity": inverse,
        "n": len(keep),
    }


def score_partition(pred, golds: dict[str, list], task) -> dict[str, float]:
    """Flat dict: `<field>:nmi|ari|h` for each gold field, `leak`, `k`."""
    pred = list(pred)
    out: dict[str, float] = {"k": len(set(pred))}
    for name, gold in golds.items():
        s = gold_scores(gold, pred)
        out.update({f"{name}:{m}": s[m] for m in ("nmi", "ari", "h")})
    out["leak"] = topic_leak(task, pred)
    return out


def random_same_sizes(pred, seed: int) -> list:
    """The labels of `pred` in a random order: a partition with the same cluster sizes."""
    pred = np.asarray(list(pred), dtype=object)
    return list(pred[np.random.default_rng(seed).permutation(len(pred))])


def mean_scores(runs: list[dict[str, float]]) -> dict[str, float]:
    return {m: float(np.mean([r[m] for r in runs])) for m in runs[0]}


def task_breakdown(task, pred) -> list[dict]:
    """Each task's share of I(task; cluster): p(t) * KL(p(cluster | t) || p(cluster)), largest first.

    A task with a big share is one whose criteria sit in fewer clusters, or other clusters,
    than the corpus as a whole; `top_cluster` / `top_share` say where most of them went.
    """
    c = contingency_matrix(list(task), list(pred)).astype(float)  # tasks x clusters
    tasks = np.unique(np.asarray(list(task), dtype=object))
    clusters = np.unique(np.asarray(list(pred), dtype=object))
    n = c.sum()
    p_cluster = c.sum(axis=0) / n
    rows = []
    for i, name in enumerate(tasks):
        row = c[i]
        q = row / row.sum()
        nz = q > 0
        top = int(np.argmax(row))
        rows.append(
            {
                "task": str(name),
                "n": int(row.sum()),
                "mi": float(row.sum() / n * np.sum(q[nz] * np.log(q[nz] / p_cluster[nz]))),
                "top_cluster": str(clusters[top]),
                "top_share": float(q[top]),
            }
        )
    total = sum(r["mi"] for r in rows)
    for r in rows:
        r["mi_share"] = r["mi"] / total if total > 0 else 0.0
    return sorted(rows, key=lambda r: -r["mi"])


def leak_breakdown(task, pred) -> list[dict]:
    """Each cluster's share of I(task; cluster): p(c) * KL(p(task | c) || p(task)), largest first.

    Also the cluster's top task, that task's share inside the cluster, and its lift over the
    task's share of the corpus. A cluster with a big share of the MI is a topic, not a check kind.
    """
    c = contingency_matrix(list(task), list(pred)).astype(float)  # tasks x clusters
    tasks = np.unique(np.asarray(list(task), dtype=object))
    clusters = np.unique(np.asarray(list(pred), dtype=object))
    n = c.sum()
    p_task = c.sum(axis=1) / n
    total = 0.0
    rows = []
    for j, name in enumerate(clusters):
        col = c[:, j]
        size = col.sum()
        q = col / size
        nz = q > 0
        contrib = float(size / n * np.sum(q[nz] * np.log(q[nz] / p_task[nz])))
        total += contrib
        top = int(np.argmax(col))
        rows.append(
            {
                "cluster": str(name),
                "n": int(size),
                "mi": contrib,
                "top_task": str(tasks[top]),
                "top_share": float(q[top]),
                "lift": float(q[top] / p_task[top]),
                "tasks": int(nz.sum()),
            }
        )
    for r in rows:
        r["mi_share"] = r["mi"] / total if total > 0 else 0.0
    return sorted(rows, key=lambda r: -r["mi"])


# ---- plain topic baselines -------------------------------------------------------------------
def _kmeans(x: np.ndarray, k: int, seed: int) -> list[int]:
    k = max(1, min(k, x.shape[0]))
    return KMeans(n_clusters=k, n_init=N_INIT, random_state=seed).fit_predict(x).tolist()


def kmeans_embed(texts: list[str], k: int, seed: int = SEED) -> list[int]:
    """KMeans on the criteria's own embeddings from the offline embedder (LocalEmbedder, 256 dims)."""
    return _kmeans(LocalEmbedder(dim=256, seed=seed).embed(texts), k, seed)


def kmeans_tfidf_svd(texts: list[str], k: int, seed: int = SEED) -> list[int]:
    """KMeans on a plain TF-IDF (word 1-2 grams) + TruncatedSVD(100) of the text, rows unit-norm."""
    x = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2)).fit_transform(texts)
    dims = max(1, min(100, x.shape[1] - 1, x.shape[0] - 1))
    z = TruncatedSVD(n_components=dims, random_state=seed).fit_transform(x)
    z /= np.linalg.norm(z, axis=1, keepdims=True) + 1e-12
    return _kmeans(z, k, seed)


# ---- runs ------------------------------------------------------------------------------------
@dataclass
class Scored:
    """One run's Stage 3 primaries, in criteria order."""

    label: str
    backend: str
    run_dir: Path
    primary: list[str]
    seconds: float | None = None  # wall time of run_pipeline; None: an existing run was scored
    peak_rss_mb: float | None = None  # process peak RSS right after the run
    untagged: int = 0
    stages: dict = field(default_factory=dict)
    seed: int = SEED
    scores: dict = field(default_factory=dict)
    violations: list = field(default_factory=list)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _primaries(run_dir: Path, ids: list[str]) -> tuple[list[str], int]:
    tags = pl.read_parquet(run_dir / "stage3_tags.parquet").select("criterion_id", "primary", "status")
    by_id = {cid: (p if s == "ok" and p else None) for cid, p, s in tags.iter_rows()}
    out = [by_id.get(cid) for cid in ids]
    return [p or UNTAGGED for p in out], sum(p is None for p in out)


def execute(cfg, provider: str, run_dir: Path, *, seed: int = SEED) -> tuple[float | None, float, dict]:
    """Fit the pipeline into `run_dir` through the public API unless Stage 3 is already there, with every gold
    column blanked in the corpus it reads. Returns (seconds or None if nothing ran, peak RSS in MiB, per-stage
    seconds)."""
    if (run_dir / "stage3_tags.parquet").exists():
        return None, _peak_rss_mb(), {}
    # The pipeline reads a copy of the corpus with every gold column blanked (a table corpus, so
    # the snapshot it takes, and re-takes when the corpus changes, never holds a gold label).
    pipeline = ROOT / "pipelines" / f"{cfg.name}.toml"
    frame = taxonomy.read_corpus(pipeline)
    blank = [c for c in GOLD_COLUMNS if c in frame.columns]
    run_dir.mkdir(parents=True, exist_ok=True)
    blind = run_dir.parent / f"{run_dir.name}-corpus.parquet"
    frame.drop("source").with_columns([pl.lit(None, frame.schema[c]).alias(c) for c in blank]).write_parquet(blind)
    stages: dict = {}
    start = time.perf_counter()
    taxonomy.fit(
        blind,
        pipeline=pipeline,
        name=cfg.name,
        # a broken constraint is scored and reported as FAIL, not raised
        settings={"cluster": {"seed": seed}, "merge": {"accept_violations": True}},
        provider=provider,
        run_dir=run_dir,
        on_stage=lambda st, info: stages.__setitem__(st, info.get("seconds")),
    )
    return time.perf_counter() - start, _peak_rss_mb(), stages


def _manifest(run_dir: Path) -> dict:
    path = run_dir / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else {}


# ---- one corpus ------------------------------------------------------------------------------
def score_corpus(
    corpus: str, provider: str, work: Path, existing: Path | None, seeds: int = SEEDS, llm_dir: Path | None = None
) -> dict:
    cfg = load_config(ROOT / "pipelines" / f"{corpus}.toml")
    runs: list[Scored] = []

    def add(label: str, backend: str, run_dir: Path, seed: int = SEED) -> None:
        seconds, rss, stages = execute(cfg, backend, run_dir, seed=seed)
        runs.append(Scored(label, backend, run_dir, [], seconds, rss, stages=stages, seed=seed))

    existing_backend = _manifest(existing).get("backend") if existing else None
    if existing_backend == "offline":
        add(OFFLINE, "offline", existing)
    else:
        for seed in range(seeds):
            add(OFFLINE, "offline", work / corpus / f"offline-seed{seed}", seed)
    if existing is not None and existing_backend not in (None, "offline"):
        add(f"{existing_backend} taxonomy primary", existing_backend, existing)
    elif resolve_provider_name(provider) != "offline":
        backend = resolve_provider_name(provider)
        add(f"{backend} taxonomy primary", backend, llm_dir or _llm_run_dir(cfg, backend))

    # Gold comes from the loader, never from the (blanked) snapshot the pipeline read.
    criteria = pl.read_parquet(runs[0].run_dir / "criteria.parquet").select("criterion_id", "task_id", "text")
    gold_frame = taxonomy.read_corpus(ROOT / "pipelines" / f"{corpus}.toml")
    wanted = [g for g in GOLDS[corpus] if g in gold_frame.columns]
    criteria = criteria.join(gold_frame.select("criterion_id", *wanted), on="criterion_id", how="left")
    ids = criteria["criterion_id"].to_list()
    texts = [t or "" for t in criteria["text"].to_list()]
    task = criteria["task_id"].to_list()
    golds = {g: criteria[g].to_list() for g in wanted}
    for r in runs:
        r.primary, r.untagged = _primaries(r.run_dir, ids)
        r.scores = score_partition(r.primary, golds, task)
        r.violations = list(json.loads((r.run_dir / "taxonomy.json").read_text()).get("violations") or [])

    rows: dict[str, dict] = {}
    labels = list(dict.fromkeys(r.label for r in runs))
    for label in labels:
        rows[label] = mean_scores([r.scores for r in runs if r.label == label])
    t0 = time.perf_counter()
    ks = sorted({int(r.scores["k"]) for r in runs})
    # One BLAS thread: on a shared 2-core box OpenBLAS's spinning threads make these small
    # factorisations ~10x slower under load. The baselines are not timed against a target.
    with threadpool_limits(limits=1):
        for k in ks:
            tag = f" k={k}" if len(ks) > 1 else ""
            rows[f"baseline kmeans-embed{tag}"] = mean_scores(
                [score_partition(kmeans_embed(texts, k, seed), golds, task) for seed in range(seeds)]
            )
            rows[f"baseline kmeans-tfidf-svd{tag}"] = mean_scores(
                [score_partition(kmeans_tfidf_svd(texts, k, seed), golds, task) for seed in range(seeds)]
            )
    for label in labels:
        tag = "" if len(labels) == 1 else f" ({label.split()[0]})"
        first = next(r for r in runs if r.label == label)
        rows[f"random, same sizes{tag}"] = mean_scores(
            [score_partition(random_same_sizes(first.primary, s), golds, task) for s in range(RANDOM_SEEDS)]
        )
    rows["one cluster"] = score_partition([0] * len(ids), golds, task)
    baseline_seconds = time.perf_counter() - t0

    one_h = {g: one_cluster_harmonic_purity([v for v in gold if v is not None]) for g, gold in golds.items()}
    gold_leak = {
        g: topic_leak([t for t, v in zip(task, gold) if v is not None], [v for v in gold if v is not None])
        for g, gold in golds.items()
    }
    shown = [next(r for r in runs if r.label == label) for label in labels]  # seed 0 of each row
    return {
        "corpus": corpus,
        "n": len(ids),
        "n_tasks": len(set(task)),
        "golds": list(golds),
        "rows": rows,
        "runs": runs,
        "baseline_seconds": baseline_seconds,
        "one_cluster_h": one_h,
        "gold_leak": gold_leak,
        "breakdown": {r.label: leak_breakdown(task, r.primary) for r in shown},
        "task_breakdown": {r.label: task_breakdown(task, r.primary) for r in shown},
        "shares": {r.label: _shares(r.primary) for r in shown},
        "targets": targets(corpus, rows, runs, list(golds)),
    }


def _llm_run_dir(cfg, backend: str) -> Path:
    # The pipeline's own run dir: resumes it, and its answer cache (next to it) is shared.
    return default_run_dir(cfg, backend, cfg.llm.model)


def _shares(primary: list[str]) -> dict[str, float]:
    values, counts = np.unique(np.asarray(primary, dtype=object), return_counts=True)
    order = np.argsort(-counts, kind="stable")
    return {str(values[i]): float(counts[i] / counts.sum()) for i in order}


def targets(corpus: str, rows: dict, runs: list[Scored], golds: list[str]) -> list[dict]:
    """One PASS/FAIL per target and scored taxonomy row (NMI and leak on the seed mean)."""
    out = []
    best = {g: max((v[f"{g}:nmi"], name) for name, v in rows.items() if name.startswith("baseline")) for g in golds}
    for label in dict.fromkeys(r.label for r in runs):
        v = rows[label]
        mine = [r for r in runs if r.label == label]
        for g in golds:
            value, (ref, ref_name) = v[f"{g}:nmi"], best[g]
            out.append(
                {
                    "row": label,
                    "target": f"NMI {g} > best plain baseline",
                    "value": value,
                    "ref": ref,
                    "ref_name": ref_name,
                    "margin": value - ref,
                    "pass": value > ref,
                    "informational": False,
                }
            )
            out.append(
                {
                    "row": label,
                    "target": f"NMI {g} >= {GOAL_RATIO}x best plain baseline (goal)",
                    "value": value,
                    "ref": GOAL_RATIO * ref,
                    "ref_name": f"{GOAL_RATIO}x {ref_name}",
                    "margin": value - GOAL_RATIO * ref,
                    "pass": value >= GOAL_RATIO * ref,
                    "informational": True,
                }
            )
        if corpus in LEAK_CORPORA:
            out.append(
                {
                    "row": label,
                    "target": f"topic leak <= {LEAK_TARGET}",
                    "value": v["leak"],
                    "ref": LEAK_TARGET,
                    "ref_name": "",
                    "margin": LEAK_TARGET - v["leak"],
                    "pass": v["leak"] <= LEAK_TARGET,
                    "informational": False,
                }
            )
        broken = sum(len(r.violations) for r in mine)
        worst = max(max(_shares(r.primary).values()) for r in mine)
        least = min(min(_shares(r.primary).values()) for r in mine)
        ok = broken == 0 and least >= 0.02 - 1e-9 and worst <= 0.40 + 1e-9
        out.append(
            {
                "row": label,
                "target": "constraints hold on every seed (no violation, primary shares 2%-40%)",
                "value": worst,
                "ref": 0.40,
                "ref_name": f"{broken} violations, shares {least:.1%}-{worst:.1%}",
                "margin": 0.40 - worst,
                "pass": ok,
                "informational": False,
            }
        )
        timed = [r.seconds for r in mine if r.seconds is not None and r.backend == "offline"]
        if corpus == "paperbench" and timed:
            out.append(
                {
                    "row": label,
                    "target": f"offline run <= {TIME_TARGET_S:.0f} s (slowest seed)",
                    "value": max(timed),
                    "ref": TIME_TARGET_S,
                    "ref_name": "",
                    "margin": TIME_TARGET_S - max(timed),
                    "pass": max(timed) <= TIME_TARGET_S,
                    "informational": False,
                }
            )
    return out


# ---- printing --------------------------------------------------------------------------------
def render(res: dict) -> str:
    golds = res["golds"]
    cols = [
        (f"{g}:{m}", f"{SHORT.get(g, g)} {m.upper() if m != 'h' else 'H'}") for g in golds for m in ("nmi", "ari", "h")
    ]
    cols.append(("leak", "leak AMI"))
    width = max(len(name) for name in res["rows"]) + 2
    lines = [
        f"== {res['corpus']}: {res['n']} criteria, {res['n_tasks']} tasks; gold fields: "
        + ", ".join(f"{SHORT.get(g, g)} = {g}" for g in golds)
    ]
    for r in res["runs"]:
        when = (
            f"pipeline {r.seconds:.1f} s ({', '.join(f'{k} {v:.1f}' for k, v in r.stages.items() if v is not None)})"
            if r.seconds is not None
            else "existing run, not re-run"
        )
        rss = f"process peak RSS so far {r.peak_rss_mb:.0f} MiB" if r.peak_rss_mb else ""
        lines.append(
            f"   {r.label} (seed {r.seed}): {when}; {rss}; k = {len(set(r.primary))}"
            + (f"; {r.untagged} untagged" if r.untagged else "")
            + f"; {r.run_dir}"
        )
    lines.append(
        f"   baselines and references scored in {res['baseline_seconds']:.1f} s "
        f"(KMeans n_init={N_INIT}; every row the mean of its seeds; random = mean of {RANDOM_SEEDS} shuffles)"
    )
    head = f"{'':{width}}{'k':>4}" + "".join(f"{title:>10}" for _, title in cols)
    lines += [head, "-" * len(head)]
    for name, v in res["rows"].items():
        lines.append(f"{name:{width}}{v['k']:>4.1f}" + "".join(f"{v[key]:>10.3f}" for key, _ in cols))
    lines.append(
        "H = harmonic purity (harmonic mean of purity and inverse purity; not chance-corrected): one-cluster value "
        + ", ".join(f"{SHORT.get(g, g)} {h:.3f}" for g, h in res["one_cluster_h"].items())
    )
    lines.append(
        "leak of the gold fields themselves (AMI gold vs task): "
        + ", ".join(f"{SHORT.get(g, g)} {v:.3f}" for g, v in res["gold_leak"].items())
    )
    for t in res["targets"]:
        verdict = "PASS" if t["pass"] else "FAIL"
        if t["informational"]:
            verdict = f"({verdict}, informational)"
        ref = f" vs {t['ref_name']} {t['ref']:.3f}" if t["ref_name"] else ""
        lines.append(f"{verdict:>6} {t['row']}: {t['target']}: {t['value']:.3f}{ref} (margin {t['margin']:+.3f})")
    for label, rows in res["breakdown"].items():
        lines.append(
            f"   where the leak comes from, {label} (share of I(task; capability), top task in the capability):"
        )
        share = res["shares"][label]
        for b in rows:
            lines.append(
                f"     {b['mi_share']:>6.1%}  {b['cluster'][:52]:52} {share[b['cluster']]:>6.1%} of criteria, "
                f"{b['tasks']:>2} tasks, top {b['top_task'][:28]} {b['top_share']:.0%} (lift {b['lift']:.1f})"
            )
        lines.append(
            "     tasks carrying most of it: "
            + "; ".join(
                f"{t['task'][:28]} ({t['n']} criteria) {t['mi_share']:.0%}, {t['top_share']:.0%} in "
                f"{t['top_cluster'][:40]}"
                for t in res["task_breakdown"][label][:TOP_TASKS]
            )
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", choices=[*GOLDS, "all"], default="all")
    ap.add_argument(
        "--seeds", type=int, default=SEEDS, help=f"offline runs and baseline seeds per corpus (default {SEEDS})"
    )
    ap.add_argument(
        "--provider",
        default="offline",
        help="offline (default), or auto | gemini | vertex | openai to score that LLM run beside the offline one",
    )
    ap.add_argument(
        "--run-dir",
        type=Path,
        action="append",
        default=[],
        help="score this existing run (its manifest names the corpus) instead of running; repeatable",
    )
    ap.add_argument(
        "--work-dir",
        type=Path,
        help="where fresh runs go (default: offline runs in a temporary folder; an LLM run in the "
        "pipeline's own run dir, which it resumes, with its answer cache); a run already finished "
        "there is scored, not re-run",
    )
    ap.add_argument("--json", type=Path, help="also write the scores here")
    args = ap.parse_args(argv)

    corpora = list(GOLDS) if args.corpus == "all" else [args.corpus]
    existing: dict[str, Path] = {}
    for d in args.run_dir:
        name = _manifest(d).get("pipeline")
        if not (d / "stage3_tags.parquet").exists() or name not in GOLDS:
            ap.error(f"{d}: not a finished run of {', '.join(GOLDS)} (needs manifest.json and stage3_tags.parquet)")
        existing[name] = d
    results = []
    with tempfile.TemporaryDirectory(prefix="quality-") as tmp:
        work = args.work_dir or Path(tmp)
        for corpus in corpora:
            llm_dir = args.work_dir / corpus / "llm" if args.work_dir else None
            res = score_corpus(corpus, args.provider, work, existing.get(corpus), args.seeds, llm_dir)
            print(render(res), end="\n\n", flush=True)
            results.append(res)
    if args.json:
        args.json.write_text(json.dumps([_jsonable(r) for r in results], indent=2))
    return results


def _jsonable(res: dict) -> dict:
    out = {k: v for k, v in res.items() if k != "runs"}
    out["runs"] = [
        {
            "label": r.label,
            "backend": r.backend,
            "run_dir": str(r.run_dir),
            "seconds": r.seconds,
            "seed": r.seed,
            "peak_rss_mb": r.peak_rss_mb,
            "untagged": r.untagged,
            "stages": r.stages,
            "scores": r.scores,
            "violations": r.violations,
        }
        for r in res["runs"]
    ]
    return json.loads(json.dumps(out, default=lambda x: None if isinstance(x, float) and math.isnan(x) else str(x)))


if __name__ == "__main__":
    main()
