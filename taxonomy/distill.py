"""A cheap Stage-3 tagger distilled from a finished Stage 3 (TnT-LLM style).

`train_distilled(run)` fits a text classifier to the Stage 3 primary tags of a run (LLM or
offline), measures held-out agreement on tasks it never saw, and saves `distilled.joblib`.
`tag_with_distilled(session, model)` tags a corpus with it and sends only the criteria the model
is unsure of to the real Stage 3 (the LLM, or the offline backend when there is none).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import polars as pl
import sklearn
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score, precision_recall_fscore_support
from sklearn.model_selection import GroupShuffleSplit, ShuffleSplit
from sklearn.pipeline import FeatureUnion, Pipeline

from taxonomy.pipeline import Session, ensure_criteria, stage_usage
from taxonomy.run import CRITERIA, DISTILLED, LABELS, TAGS, TAGS_SUMMARY, TAXONOMY, RunDir, RunError, elapsed, now
from taxonomy.schemas import Taxonomy
from taxonomy.shares import primary_shares, summary_markdown
from taxonomy.stages.tag import SCHEMA
from taxonomy.taxonomy_io import load_taxonomy

REPORT_FILE = "distill_report.json"
FORMAT = 1
TARGET_AGREEMENT = 0.9  # default threshold: the lowest confidence that keeps held-out agreement at least this
FALLBACK_THRESHOLD = 0.5  # when no threshold reaches the target on enough held-out criteria
MIN_SUPPORT = 10  # held-out criteria a threshold must cover before its agreement is trusted
BUCKETS = (0.0, 0.3, 0.5, 0.7, 0.9, 1.0)
TRADEOFF = (0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
SOURCES = ("distilled", "llm", "offline")


class DistillError(RunError):
    """A distilled model that cannot be trained or used, on one line with the fix."""


# ---- features and model -----------------------------------------------------------
def documents(criteria: pl.DataFrame) -> list[str]:
    """The classifier's input: the criterion text, plus the corpus's own category as one token."""
    cats = criteria["category"].to_list() if "category" in criteria.columns else [None] * criteria.height
    out = []
    for text, cat in zip(criteria["text"].to_list(), cats):
        doc = text or ""
        if cat:
            doc += " __category_" + "_".join("".join(ch if ch.isalnum() else " " for ch in cat.lower()).split())
        out.append(doc)
    return out


def make_model(seed: int = 0):
    """TF-IDF (word 1-2 grams + char 3-5 grams) into a multinomial logistic regression.

    Logistic regression rather than LinearSVC + calibration: one convex fit yields a probability
    for every capability, which both the confidence threshold and the "tags within a margin of the
    top" rule need. Calibrating an SVM needs inner cross-validation folds that each contain every
    capability, which the rare capabilities (2% share floor) cannot fill on small corpora; it also
    triples the fit time. We do not trust the probabilities blindly either: the routing threshold
    is chosen from held-out agreement, not from the raw probability scale.
    newton-cg converges in a handful of iterations on these sparse features, several times faster
    than lbfgs here. C and class weights matter little: in 5-fold task-grouped CV over the offline
    runs, accuracy moved by a few points across C in 0.3-10 and "balanced" weights gave no consistent
    gain; C=10 covered the most DevAI criteria at 90% agreement (80% against 75% for C=1) and about
    the same share of PaperBench (16% against 19%).
    """
    words = TfidfVectorizer(
        ngram_range=(1, 2), sublinear_tf=True, lowercase=True, token_pattern=r"(?u)\b\w+\b", min_df=1
    )
    chars = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True, lowercase=True, min_df=2)
    return Pipeline(
        [
            ("features", FeatureUnion([("words", words), ("chars", chars)])),
            ("clf", LogisticRegression(C=10.0, solver="newton-cg", max_iter=1000, random_state=seed)),
        ]
    )


def _fit(model, docs: list[str], y: np.ndarray):
    if len(set(y.tolist())) < 2:
        raise DistillError(
            f"the training criteria carry only one primary capability ({y[0]!r}); "
            "fix: distil from a Stage 3 with at least two capabilities as primary tags"
        )
    try:
        return model.fit(docs, y)
    except ValueError as exc:  # e.g. an all-empty vocabulary
        raise DistillError(
            f"cannot fit the distilled tagger ({exc}); fix: check that criteria.parquet holds criterion text"
        ) from None


# ---- training ---------------------------------------------------------------------
@dataclass
class DistillReport:
    run: str
    model_path: str
    taxonomy_hash: str
    split: str  # "task": held-out tasks never seen in training; "criterion": one task only
    holdout: float
    seed: int
    n_criteria: int  # Stage 3 ok rows used
    n_train: int
    n_holdout: int
    train_tasks: list[str]
    holdout_tasks: list[str]
    classes: list[str]
    agreement: float  # held-out accuracy against the Stage 3 primary tag
    macro_f1: float
    primary_in_tags: float  # held-out share whose predicted primary is among the Stage 3 tags
    majority_baseline: float  # held-out agreement of always answering the commonest training class
    threshold: float  # the default routing threshold saved with the model
    threshold_target: float
    target_met: bool
    coverage_at_threshold: float
    agreement_at_threshold: float | None
    buckets: list[dict[str, Any]] = field(default_factory=list)
    tradeoff: list[dict[str, Any]] = field(default_factory=list)
    per_class: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def markdown(self) -> str:
        pct = lambda x: "n/a" if x is None else f"{100 * x:.1f}%"  # noqa: E731
        lines = [
            "# Distilled Stage-3 tagger",
            "",
            f"Trained on {self.n_train} criteria ({len(self.train_tasks)} tasks); held out {self.n_holdout} criteria "
            f"of {len(self.holdout_tasks)} tasks never seen in training (split by {self.split}, seed {self.seed}).",
            "",
            f"- **Held-out agreement with the Stage 3 primary tag:** {pct(self.agreement)} "
            f"(majority-class baseline {pct(self.majority_baseline)})",
            f"- **Macro-F1:** {self.macro_f1:.3f}",
            f"- **Predicted primary among the Stage 3 tags:** {pct(self.primary_in_tags)}",
            f"- **Default threshold:** {self.threshold:.2f} — covers "
            f"{pct(self.coverage_at_threshold)} of held-out criteria "
            f"at {pct(self.agreement_at_threshold)} agreement; the rest go to the LLM"
            + ("" if self.target_met else f" (no threshold reached {pct(self.threshold_target)}; fallback)"),
            f"- **Taxonomy hash:** `{self.taxonomy_hash}`",
            "",
            "## Agreement by confidence",
            "",
            "| confidence | criteria | share | agreement |",
            "|---|---:|---:|---:|",
        ]
        lines += [f"| {b['bucket']} | {b['n']} | {pct(b['share'])} | {pct(b['agreement'])} |" for b in self.buckets]
        lines += [
            "",
            "## Coverage against agreement",
            "",
            "| threshold | tagged by the model | agreement on them | sent to the LLM |",
            "|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {t['threshold']:.2f} | {pct(t['coverage'])} | {pct(t['agreement'])} | {pct(1 - t['coverage'])} |"
            for t in self.tradeoff
        ]
        lines += ["", "## Per capability (held out)", "", "| capability | support | F1 |", "|---|---:|---:|"]
        lines += [f"| `{c['capability']}` | {c['support']} | {c['f1']:.3f} |" for c in self.per_class]
        return "\n".join(lines) + "\n"


def _training_rows(run: RunDir, taxonomy: Taxonomy) -> pl.DataFrame:
    criteria = run.read_parquet(CRITERIA, "run")
    tags = run.read_parquet(TAGS, "tag").filter((pl.col("status") == "ok") & pl.col("primary").is_not_null())
    unknown = sorted(set(tags["primary"].to_list()) - set(taxonomy.names()))
    if unknown:
        raise DistillError(
            f"{run.path / TAGS}: primary tags {', '.join(unknown[:3])} are not in {run.path / TAXONOMY}; "
            "fix: re-run `taxonomy tag` with this taxonomy before distilling"
        )
    keep = [c for c in ("criterion_id", "task_id", "text", "category") if c in criteria.columns]
    rows = criteria.select(keep).join(tags.select("criterion_id", "tags", "primary"), on="criterion_id", how="inner")
    if rows.height < 4:
        raise DistillError(
            f"{run.path}: only {rows.height} criteria have an ok Stage 3 "
            f"tag; fix: finish Stage 3 (`taxonomy tag {run.path}`) first"
        )
    return rows


def _split(rows: pl.DataFrame, holdout: float, seed: int) -> tuple[np.ndarray, np.ndarray, str]:
    groups = rows["task_id"].to_numpy() if "task_id" in rows.columns else np.zeros(rows.height)
    if len(set(groups.tolist())) >= 2:
        # Criteria of one task are near-duplicates of each other; splitting by criterion would let the
        # model see a task's siblings in training and inflate agreement.
        train, test = next(
            GroupShuffleSplit(n_splits=1, test_size=holdout, random_state=seed).split(rows, groups=groups)
        )
        return train, test, "task"
    train, test = next(ShuffleSplit(n_splits=1, test_size=holdout, random_state=seed).split(rows))
    return train, test, "criterion"


def _agreement(ok: np.ndarray) -> float | None:
    return float(ok.mean()) if len(ok) else None


def _choose_threshold(conf: np.ndarray, ok: np.ndarray, target: float) -> tuple[float, bool]:
    """The lowest confidence whose covered held-out criteria agree at least `target` (so the most
    criteria stay with the model), among thresholds that cover enough criteria to be trusted."""
    support = min(MIN_SUPPORT, len(conf))
    for t in np.round(np.arange(0.0, 1.0, 0.01), 2):
        covered = conf >= t
        if covered.sum() >= max(support, 1) and ok[covered].mean() >= target:
            return float(t), True
    return FALLBACK_THRESHOLD, False


def _calibration(conf: np.ndarray, ok: np.ndarray) -> tuple[list[dict], list[dict]]:
    """Held-out agreement by confidence bucket, and coverage against agreement at each threshold."""
    buckets = []
    for lo, hi in zip(BUCKETS[:-1], BUCKETS[1:]):
        inside = (conf >= lo) & ((conf < hi) if hi < 1.0 else (conf <= hi))
        buckets.append(
            {
                "bucket": f"[{lo:.1f}, {hi:.1f}{']' if hi >= 1.0 else ')'}",
                "lo": lo,
                "hi": hi,
                "n": int(inside.sum()),
                "share": float(inside.mean()),
                "agreement": _agreement(ok[inside]),
            }
        )
    tradeoff = [
        {
            "threshold": t,
            "coverage": float((conf >= t).mean()),
            "n": int((conf >= t).sum()),
            "agreement": _agreement(ok[conf >= t]),
        }
        for t in TRADEOFF
    ]
    return buckets, tradeoff


def _save_model(run: RunDir, model, taxonomy: Taxonomy, threshold: float, target: float, agreement: float) -> Path:
    """The bundle `tag --distilled` loads, written atomically."""
    model_path = run.path / DISTILLED
    bundle = {
        "format": FORMAT,
        "model": model,
        "classes": [str(c) for c in model.classes_],
        "taxonomy_hash": taxonomy.content_hash,
        "taxonomy_names": taxonomy.names(),
        "threshold": threshold,
        "threshold_target": target,
        "holdout_agreement": agreement,
        "sklearn": sklearn.__version__,
        "trained_on": str(run.path),
        "created": now(),
    }
    tmp = model_path.with_name(f".{DISTILLED}.tmp")
    joblib.dump(bundle, tmp)
    tmp.replace(model_path)
    return model_path


def train_distilled(
    run: RunDir,
    *,
    holdout: float = 0.2,
    seed: int = 0,
    target_agreement: float = TARGET_AGREEMENT,
) -> DistillReport:
    """Fit the distilled tagger on a finished Stage 3 and write distilled.joblib + distill_report.json."""
    if not 0 < holdout < 1:
        raise DistillError(f"holdout = {holdout}: must be between 0 and 1; fix: pass a share such as 0.2")
    start = time.perf_counter()
    taxonomy = _tagged_taxonomy(run)
    rows = _training_rows(run, taxonomy)
    docs, y = documents(rows), rows["primary"].to_numpy().astype(str)
    train, test, split = _split(rows, holdout, seed)

    pred, conf, truth = _held_out(make_model(seed), docs, y, train, test)
    ok = pred == truth
    primary_in_tags, majority_baseline = _baselines(rows, y, train, test, pred, truth)

    buckets, tradeoff = _calibration(conf, ok)
    threshold, met = _choose_threshold(conf, ok, target_agreement)
    labels = sorted(set(truth.tolist()) | set(pred.tolist()))
    _, _, f1s, support = precision_recall_fscore_support(truth, pred, labels=labels, zero_division=0)

    # The saved model learns from every criterion; the held-out numbers above describe it.
    final = _fit(make_model(seed), docs, y)
    model_path = _save_model(run, final, taxonomy, threshold, target_agreement, float(ok.mean()))

    report = DistillReport(
        run=str(run.path),
        model_path=str(model_path),
        taxonomy_hash=taxonomy.content_hash,
        split=split,
        holdout=holdout,
        seed=seed,
        n_criteria=rows.height,
        n_train=len(train),
        n_holdout=len(test),
        train_tasks=sorted(set(rows["task_id"][train].to_list())) if "task_id" in rows.columns else [],
        holdout_tasks=sorted(set(rows["task_id"][test].to_list())) if "task_id" in rows.columns else [],
        classes=[str(c) for c in final.classes_],
        agreement=float(ok.mean()),
        macro_f1=float(f1_score(truth, pred, labels=labels, average="macro", zero_division=0)),
        primary_in_tags=primary_in_tags,
        majority_baseline=majority_baseline,
        threshold=threshold,
        threshold_target=target_agreement,
        target_met=met,
        coverage_at_threshold=float((conf >= threshold).mean()),
        agreement_at_threshold=_agreement(ok[conf >= threshold]),
        buckets=buckets,
        tradeoff=tradeoff,
        per_class=[{"capability": c, "support": int(s), "f1": float(f)} for c, s, f in zip(labels, support, f1s)],
        seconds=elapsed(start),
    )
    _save_report(run, report)
    return report


def _tagged_taxonomy(run: RunDir) -> Taxonomy:
    """The run's taxonomy, which its Stage 3 tags must have been made with."""
    taxonomy = load_taxonomy(run.need(TAXONOMY, "merge"))
    recorded = (run.manifest.get("stages", {}).get("tag") or {}).get("taxonomy_hash")
    if recorded and recorded != taxonomy.content_hash:
        raise DistillError(
            f"{run.path}: Stage 3 was tagged with taxonomy {recorded}, but taxonomy.json is {taxonomy.content_hash}; "
            f"fix: re-run `taxonomy tag {run.path}` so the tags match taxonomy.json"
        )
    return taxonomy


def _held_out(model, docs: list[str], y: np.ndarray, train, test) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MODEL fit on the TRAIN criteria: its capability and confidence for each TEST criterion, and Stage 3's."""
    model = _fit(model, [docs[i] for i in train], y[train])
    proba = model.predict_proba([docs[i] for i in test])
    classes = model.classes_
    return classes[proba.argmax(1)], proba.max(1), y[test]


def _baselines(
    rows: pl.DataFrame, y: np.ndarray, train, test, pred: np.ndarray, truth: np.ndarray
) -> tuple[float, float]:
    """Two yardsticks for the held-out agreement: the share of predictions among the criterion's Stage 3 tags (not
    only its primary), and the agreement of always answering the training set's commonest capability."""
    stage3_tags = rows["tags"].to_list()
    in_tags = np.array([p in (stage3_tags[i] or []) for p, i in zip(pred, test)])
    values, counts = np.unique(y[train], return_counts=True)
    majority = values[counts.argmax()]
    return float(in_tags.mean()), float((truth == majority).mean())


def _save_report(run: RunDir, report: DistillReport) -> None:
    """distill_report.json and .md, and the "distill" record of the run's manifest."""
    run.write_json(REPORT_FILE, report.to_dict())
    run.write_text("distill_report.md", report.markdown())
    run.record(
        "distill",
        {
            "criteria": report.n_criteria,
            "holdout_agreement": round(report.agreement, 4),
            "macro_f1": round(report.macro_f1, 4),
            "threshold": report.threshold,
            "taxonomy_hash": report.taxonomy_hash,
            "seconds": report.seconds,
            "finished": now(),
        },
    )


# ---- tagging ----------------------------------------------------------------------
def load_distilled(model_path: Path, taxonomy: Taxonomy) -> dict[str, Any]:
    """The saved bundle, checked against the taxonomy it will tag with."""
    model_path = Path(model_path)
    fix = "fix: run `taxonomy distill RUN_DIR` on a finished run to (re)create it"
    if not model_path.is_file():
        raise DistillError(f"{model_path}: no such distilled model; {fix}")
    try:
        bundle = joblib.load(model_path)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means the same thing to the user
        raise DistillError(f"{model_path}: not a readable distilled model ({type(exc).__name__}); {fix}") from None
    if not isinstance(bundle, dict) or bundle.get("format") != FORMAT or "model" not in bundle:
        raise DistillError(f"{model_path}: not a distilled model of this version; {fix}")
    if bundle["taxonomy_hash"] != taxonomy.content_hash:
        raise DistillError(
            f"{model_path}: trained for taxonomy {bundle['taxonomy_hash']}, "
            f"but the taxonomy in use is {taxonomy.content_hash}; "
            "fix: pass --taxonomy with the taxonomy.json the model was "
            "trained with, or retrain on a run tagged with this taxonomy"
        )
    return bundle


def predict_tags(
    model,
    docs: list[str],
    max_tags: int,
    margin: float,
    min_tags: int = 1,
) -> tuple[list[list[str]], np.ndarray]:
    """Per criterion: the capabilities whose probability is within `margin` of the top, most likely
    first (at least `min_tags`, at most `max_tags`), and the top probability."""
    proba = model.predict_proba(docs)
    classes = model.classes_
    order = np.argsort(-proba, axis=1, kind="stable")
    top = proba.max(1)
    tags = []
    for i in range(len(docs)):
        near = int((proba[i] >= top[i] - margin).sum())
        keep = min(max(near, min_tags, 1), max_tags, len(classes))
        tags.append([str(classes[j]) for j in order[i, :keep]])
    return tags, top


def _tag_calls(s) -> int:
    used = s.backend.usage.get("tag")
    return used.calls if used is not None else 0


def _fallback_tags(s, rest: pl.DataFrame, taxonomy: Taxonomy, folder: Path, fallback: str) -> tuple[pl.DataFrame, int]:
    """REST tagged by the session's real Stage 3 (source FALLBACK), and the calls that took."""
    calls_before = _tag_calls(s)
    sent = _tag_rest(s, rest, taxonomy, folder).with_columns(source=pl.lit(fallback))
    return sent, _tag_calls(s) - calls_before


def _tag_rest(s, rest: pl.DataFrame, taxonomy: Taxonomy, folder: Path | None = None) -> pl.DataFrame:
    """The criteria the distilled model is unsure of, through the session's real Stage 3 (offline: the tagger of
    the run in `folder`, which holds the taxonomy)."""
    if not rest.height:
        return pl.DataFrame(schema=SCHEMA)
    stage1 = None
    if s.run.has(LABELS):
        stage1 = s.run.read_parquet(LABELS).filter(pl.col("criterion_id").is_in(rest["criterion_id"].to_list()))
        if stage1.height < rest.height:  # labels of another corpus: let the offline backend derive its own
            stage1 = None
    micro_labels = {member: cap.labels for cap in taxonomy.capabilities for member in cap.members}
    return s.backend.tag(rest, taxonomy, s.cfg, stage1, micro_labels, folder=folder).select(list(SCHEMA)).cast(SCHEMA)


def _distilled_tags(ids: list, tags: list[list[str]], conf: np.ndarray, confident: np.ndarray) -> pl.DataFrame:
    """Stage 3 rows (source "distilled") for the criteria the model tags with confidence."""
    return pl.DataFrame(
        [
            {
                "criterion_id": ids[i],
                "tags": tags[i],
                "primary": tags[i][0],
                "score": float(conf[i]),
                "attempts": 0,
                "status": "ok",
                "problems": [],
            }
            for i in np.flatnonzero(confident)
        ],
        schema=SCHEMA,
    ).with_columns(source=pl.lit("distilled"))


def _in_order(ids: list, tags: pl.DataFrame) -> pl.DataFrame:
    """TAGS in the order of IDS (the corpus order)."""
    order = pl.DataFrame({"criterion_id": ids, "_row": list(range(len(ids)))})
    return tags.join(order, on="criterion_id", how="left").sort("_row").drop("_row")


def tag_with_distilled(
    session: Session,
    model_path: Path,
    taxonomy_path: Path | None = None,
    threshold: float | None = None,
    *,
    margin: float = 0.1,
) -> dict[str, Any]:
    """Stage 3 by the distilled model where it is confident, by the real Stage 3 elsewhere.

    Writes stage3_tags.parquet (the Stage 3 schema plus `source`: distilled | llm | offline) and
    stage3_summary.md into the session's run, and records the "tag" stage in its manifest.
    """
    start = time.perf_counter()
    s = session
    source = Path(taxonomy_path or s.run.need(TAXONOMY, "merge"))
    taxonomy = load_taxonomy(source)
    bundle = load_distilled(model_path, taxonomy)
    threshold = float(bundle.get("threshold", FALLBACK_THRESHOLD) if threshold is None else threshold)
    criteria = ensure_criteria(s)

    tags, conf = predict_tags(bundle["model"], documents(criteria), s.cfg.tag.max_tags, margin, s.cfg.tag.min_tags)
    confident = conf >= threshold
    ids = criteria["criterion_id"].to_list()
    distilled = _distilled_tags(ids, tags, conf, confident)

    rest = criteria.filter(pl.Series(~confident))
    fallback = s.backend.tag_source  # the manifest's word for who tagged the rest
    sent, calls = _fallback_tags(s, rest, taxonomy, source.parent, fallback)

    out = _in_order(ids, pl.concat([distilled, sent]))
    s.run.write_parquet(TAGS, out)
    s.run.write_text(TAGS_SUMMARY, summary_markdown(primary_shares(out)))

    n = criteria.height
    # One dict serves as the return value and as the manifest's "tag" record (the shape `run_stage` records).
    # (A key of the usage given again below keeps its place and takes the later value, as dict.update does.)
    summary: dict[str, Any] = {
        "criteria": n,
        "failed": out.filter(pl.col("status") == "failed").height,
        "taxonomy_hash": taxonomy.content_hash,
        **stage_usage(s, "tag"),
        "n": n,
        "distilled": int(confident.sum()),
        "sent": rest.height,
        "fallback": fallback,
        "share_distilled": float(confident.mean()) if n else 0.0,
        # Sent to the real Stage 3: the LLM, or the offline backend when the session has no LLM (see "fallback").
        "share_sent_to_llm": rest.height / n if n else 0.0,
        "threshold": threshold,
        "calls": calls,
        "model": str(model_path),
        "seconds": elapsed(start),
        "finished": now(),
    }
    s.run.record("tag", summary)
    return summary
