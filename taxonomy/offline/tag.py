"""Stage 3 without a model: tag each criterion with 1..max_tags capabilities of a taxonomy.

A start: a criterion's Stage 1 labels map to capabilities through membership (label -> micro-capability
-> capability), its first label first; a criterion none of whose labels the taxonomy holds (a new
corpus against a frozen taxonomy, or an LLM's taxonomy) is scored against each capability's card by
TF-IDF cosine, so any corpus can be tagged. Then one k-means step: the tags rank the capabilities by
the cosine of the criterion's vector (features.py) to the mean vector of each capability's start, plus
`label_weight` for the capability its label is in, so a criterion whose label went to one capability but
reads much more like another's criteria moves there. Where that step would break a share bound the start
held, the start stands.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
from sklearn.feature_extraction.text import TfidfVectorizer

from taxonomy.config import MergeConfig, OfflineConfig
from taxonomy.offline.features import CriterionSpace
from taxonomy.offline.model import Tagger, label_owners
from taxonomy.provenance import code_hash
from taxonomy.run import CRITERIA, LABELS, RunDir
from taxonomy.schemas import Taxonomy
from taxonomy.text import words

__all__ = ["tag_offline", "membership_votes", "capability_scores", "fit_tagger", "tagger_for", "tag_with", "Fit"]

LABEL_REPEAT = 3  # label words count this many times the text's words in a similarity query
KEEP_RATIO = 0.5  # a further tag by card similarity needs this share of the top similarity
NEAR_RATIO = 0.8  # a further tag by vector cosine needs this share of the top cosine


def _words(name: str) -> str:
    return name.removesuffix("_capability").replace("_", " ")


def membership_votes(
    taxonomy: Taxonomy, labels: list[list[str]], micro_labels: dict[str, list[str]] | None = None
) -> np.ndarray:
    """(n, k): each criterion's labels voting for the capabilities that hold them, the first label
    fully, the r-th 1/r; a label in two capabilities goes to the first listed."""
    owner: dict[str, int] = {}
    for c, cap in enumerate(taxonomy.capabilities):
        for label in [*cap.labels, *(label for m in cap.members for label in (micro_labels or {}).get(m, []))]:
            owner.setdefault(label, c)
        for member in cap.members:  # a micro-capability name used as a label maps too
            owner.setdefault(member, c)
    votes = np.zeros((len(labels), len(taxonomy.capabilities)))
    for i, own in enumerate(labels):
        for rank, label in enumerate(own or []):
            c = owner.get(label)
            if c is not None:
                votes[i, c] = max(votes[i, c], 1.0 / (1 + rank))
    return votes


def _card_similarity(queries: list[str], taxonomy: Taxonomy, micro_labels) -> np.ndarray:
    """(len(queries), k): TF-IDF cosine of each query to each capability's card (0 where they share no word)."""
    docs = []
    for cap in taxonomy.capabilities:
        labels = [_words(label) for m in cap.members for label in (micro_labels or {}).get(m, [])]
        docs.append(
            " ".join(
                [_words(cap.name)] * LABEL_REPEAT
                + [_words(m) for m in cap.members]
                + labels
                + [cap.title, " ".join(cap.key_phrases), cap.described(), cap.diagnostic_signal, cap.example_pattern]
            )
        )
    vec = TfidfVectorizer(
        sublinear_tf=True, ngram_range=(1, 2), tokenizer=words, token_pattern=None, stop_words="english"
    )
    try:
        vec.fit(docs + queries)
    except ValueError:  # no word anywhere
        return np.zeros((len(queries), len(docs)))
    return (vec.transform(queries) @ vec.transform(docs).T).toarray()


def _ranked(row: np.ndarray, max_tags: int, keep: float) -> tuple[list[int], float]:
    order = sorted(range(len(row)), key=lambda j: (-row[j], j))
    top = row[order[0]]
    tags = [j for j in order[:max_tags] if row[j] > 0 and row[j] >= keep * top] or order[:1]
    mass = float(sum(row[j] for j in order[:max_tags]))
    return tags, float(top / mass) if mass > 0 else 0.0


def _start(frame: pl.DataFrame, own: list[list[str]], taxonomy: Taxonomy, micro_labels) -> np.ndarray:
    """(n, k) membership votes, with card similarity (best at 1) where no label is the taxonomy's."""
    votes = membership_votes(taxonomy, own, micro_labels)
    missing = np.flatnonzero(votes.max(axis=1) <= 0) if len(own) else np.zeros(0, int)
    if len(missing):
        texts = frame["text"].to_list()
        queries = [
            " ".join([" ".join(_words(label) for label in own[i])] * LABEL_REPEAT + [texts[i] or ""]) for i in missing
        ]
        sims = _card_similarity(queries, taxonomy, micro_labels)
        votes[missing] = sims / np.maximum(sims.max(axis=1, keepdims=True), 1e-12)
    return votes


def _in_bounds(primary: np.ndarray, k: int, bounds: MergeConfig) -> np.ndarray:
    share = np.bincount(primary, minlength=k) / max(len(primary), 1)
    return (share >= bounds.min_share - 1e-9) & (share <= bounds.max_share + 1e-9)


def capability_scores(
    frame: pl.DataFrame,
    own: list[list[str]],
    taxonomy: Taxonomy,
    micro_labels,
    opts: OfflineConfig,
    bounds: MergeConfig,
) -> tuple[np.ndarray, float]:
    """(n, k) scores whose ranking gives the tags, and the share of a top score a further tag needs."""
    votes = _start(frame, own, taxonomy, micro_labels)
    k, start = votes.shape[1], votes.argmax(axis=1)
    space = CriterionSpace.fit(frame["text"].to_list(), frame["task_id"].cast(pl.Utf8).to_list(), opts)
    sums = np.zeros((k, space.vectors.shape[1]))
    np.add.at(sums, start, space.vectors)
    centroids = sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)
    scores = np.maximum(space.vectors @ centroids.T + opts.label_weight * votes, 0.0)
    if len(start) and (_in_bounds(start, k, bounds) & ~_in_bounds(scores.argmax(axis=1), k, bounds)).any():
        return votes, KEEP_RATIO
    return scores, NEAR_RATIO


def tag_offline(
    frame: pl.DataFrame,
    labels: pl.DataFrame,
    taxonomy: Taxonomy,
    micro_labels: dict[str, list[str]] | None,
    max_tags: int,
    opts: OfflineConfig | None = None,
    bounds: MergeConfig | None = None,
) -> pl.DataFrame:
    """criterion_id, tags (ranked taxonomy names, 1..max_tags), primary (= tags[0]), score (confidence in [0, 1])."""
    if not taxonomy.capabilities:
        raise ValueError("tag_offline: the taxonomy has no capabilities; fix: build or load a taxonomy first")
    ids = frame["criterion_id"].cast(pl.Utf8).to_list()
    by_id = dict(zip(labels["criterion_id"].to_list(), labels["labels"].to_list())) if labels.height else {}
    scores, keep = capability_scores(
        frame,
        [list(by_id.get(cid) or []) for cid in ids],
        taxonomy,
        micro_labels,
        opts or OfflineConfig(),
        bounds or MergeConfig(),
    )
    names = taxonomy.names()
    found = [_ranked(row, max(1, max_tags), keep) for row in scores]
    tags = [[names[j] for j in t] for t, _ in found]
    return pl.DataFrame(
        {
            "criterion_id": ids,
            "tags": tags,
            "primary": [t[0] for t in tags],
            "score": [float(np.clip(s, 0, 1)) for _, s in found],
        },
        schema={"criterion_id": pl.Utf8, "tags": pl.List(pl.Utf8), "primary": pl.Utf8, "score": pl.Float64},
    )


# ---- the fitted tagger (model.py): fit on a run's corpus once, apply to any criteria --------------------
def fit_tagger(
    criteria: pl.DataFrame,
    stage1: pl.DataFrame,
    taxonomy: Taxonomy,
    micro_labels,
    opts: OfflineConfig,
    bounds: MergeConfig | None,
    corpus_hash: str = "",
) -> Tagger:
    """The tagger of a run: its corpus's space, its labels' prototypes (of the Stage 1 rows that passed), the
    taxonomy's owners, offsets for the bounds."""
    if "status" in stage1.columns:
        stage1 = stage1.filter(pl.col("status") == "ok")
    texts = [t or "" for t in criteria["text"].to_list()]
    space = CriterionSpace.fit(texts, criteria["task_id"].cast(pl.Utf8).to_list(), opts)
    by_id = dict(zip(stage1["criterion_id"].to_list(), stage1["labels"].to_list()))
    own = [list(by_id.get(cid) or []) for cid in criteria["criterion_id"].cast(pl.Utf8).to_list()]
    tagger = Tagger.fit(space, texts, own, taxonomy, micro_labels, bounds, opts.predicate_words, corpus_hash)
    tagger.fitted_for.update(code=code_hash(), offline=opts.model_dump())
    return tagger


@dataclass
class Fit:
    """A tagger fitted in this process and the inputs it was fitted on, so a later stage of the same run that
    would fit the same one again rebinds it instead (the merge fits it before the capabilities are named)."""

    tagger: Tagger
    criteria: pl.DataFrame
    stage1: pl.DataFrame
    bounds: MergeConfig | None

    def reused(self, criteria, stage1, taxonomy: Taxonomy, micro_labels, opts, bounds, corpus: str) -> Tagger | None:
        """The tagger bound to `taxonomy`, where fitting it on these inputs would give the same one; else None."""
        tagger = self.tagger
        same = (
            tagger.fitted_for.get("code") == code_hash()
            and tagger.fitted_for.get("offline") == opts.model_dump()
            and _share_bounds(self.bounds) == _share_bounds(bounds)
            and _fit_inputs(self.criteria, self.stage1).equals(_fit_inputs(criteria, stage1))
        )
        if not same or len(tagger.names) != len(taxonomy.capabilities):
            return None
        if not np.array_equal(label_owners(tagger.labels, taxonomy, micro_labels), tagger.owner):
            return None  # the calibration ran for other owners: refit
        tagger.bind(taxonomy, micro_labels)
        tagger.fitted_for["corpus"] = corpus
        return tagger


def _share_bounds(bounds: MergeConfig | None) -> tuple | None:
    return None if bounds is None else (bounds.min_share, bounds.max_share)  # all the calibration reads


def _fit_inputs(criteria: pl.DataFrame, stage1: pl.DataFrame) -> pl.DataFrame:
    """What fit_tagger reads of a corpus: each criterion's id, text, task and first-pass labels."""
    if "status" in stage1.columns:
        stage1 = stage1.filter(pl.col("status") == "ok")
    frame = criteria.select(pl.col("criterion_id", "text", "task_id").cast(pl.Utf8))
    return frame.join(
        stage1.select(pl.col("criterion_id").cast(pl.Utf8), "labels"),
        on="criterion_id",
        how="left",
        maintain_order="left",
    )


def tagger_for(
    folder: Path | None,
    taxonomy: Taxonomy,
    micro_labels,
    opts: OfflineConfig,
    bounds: MergeConfig,
    fitted: Fit | None = None,
) -> Tagger | None:
    """The tagger saved beside a taxonomy, refitted from that run's own corpus (never the one being tagged) and
    saved when it is missing or was fitted for another taxonomy, corpus, code or settings; None for a taxonomy
    with no run's corpus beside it (or no `folder`). `fitted`, a fit of this process, stands for the refit where
    it was made from the same corpus, labels and settings."""
    if folder is None:
        return None
    run = RunDir(folder)
    corpus = (run.manifest.get("corpus") or {}).get("content_hash", "")
    tagger = Tagger.load(folder)
    current = (
        tagger is not None
        and tagger.fits(taxonomy, corpus)
        and tagger.fitted_for.get("code") == code_hash()
        and tagger.fitted_for.get("offline") == opts.model_dump()
    )
    if current:
        return tagger
    if not (run.has(CRITERIA) and run.has(LABELS)):
        return tagger if tagger is not None and tagger.fits(taxonomy) else None
    criteria, stage1 = run.read_parquet(CRITERIA), run.read_parquet(LABELS)
    tagger = None if fitted is None else fitted.reused(criteria, stage1, taxonomy, micro_labels, opts, bounds, corpus)
    if tagger is None:
        tagger = fit_tagger(criteria, stage1, taxonomy, micro_labels, opts, bounds, corpus)
    try:
        tagger.save(folder)
    except OSError:  # a frozen run shipped read-only: the fit is the same each time, so applying it unsaved is right
        pass
    return tagger


def tag_with(tagger: Tagger, frame: pl.DataFrame, max_tags: int) -> pl.DataFrame:
    """criterion_id, tags, primary, score: each criterion by its own text through the fitted tagger. The primary
    is the best score; a further tag needs NEAR_RATIO of the best positive score; the score is the best one's part
    of the positive scores of the first `max_tags`."""
    scores = tagger.scores([t or "" for t in frame["text"].to_list()])
    k, m = scores.shape[1], max(1, max_tags)
    top = scores.argmax(axis=1) if k else np.zeros(len(scores), dtype=np.int64)
    rest = np.where(np.isfinite(scores), np.maximum(scores, 0.0), 0.0)
    order = np.argsort(-rest, axis=1, kind="stable")[:, :m]
    ranked = np.take_along_axis(rest, order, axis=1)
    best = ranked[:, :1] if k else np.zeros((len(scores), 1))
    near = (ranked > 0) & (ranked >= NEAR_RATIO * best)
    mass = ranked.sum(axis=1)
    conf = np.where(mass > 0, best[:, 0] / np.maximum(mass, 1e-12), 0.0)
    # each row: the primary, then the near ones in rank order but the primary, at most m - 1 of them
    further = near & (order != top[:, None])
    picked = np.take_along_axis(order, np.argsort(~further, axis=1, kind="stable"), axis=1)[:, : m - 1]
    chosen = np.concatenate([top[:, None], picked], axis=1)
    named = np.array(tagger.names, dtype=object)[chosen]
    lengths = 1 + np.minimum(further.sum(axis=1), m - 1)
    tags = [row[:n] for row, n in zip(named.tolist(), lengths.tolist())]
    return pl.DataFrame(
        {
            "criterion_id": frame["criterion_id"].cast(pl.Utf8).to_list(),
            "tags": tags,
            "primary": [t[0] for t in tags],
            "score": np.clip(conf, 0, 1).astype(float),
        },
        schema={"criterion_id": pl.Utf8, "tags": pl.List(pl.Utf8), "primary": pl.Utf8, "score": pl.Float64},
    )
