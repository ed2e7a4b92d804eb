"""Whether a criterion reads like the corpus a taxonomy was built from: the coverage audit's "fits no capability".

A tagger always answers with its best capability, and its fit score cannot tell a foreign criterion from a
corpus's own (both land between 0.3 and 0.6), so the audit asks another question: how much of the criterion's
wording the run's corpus holds. Coverage is the share of a criterion's features that occur in the run's corpus,
a feature seen in two or more tasks counting fully and one seen in a single task half (what only one task uses
says little about the next task). Two kinds of feature are scored: adjacent word pairs, which carry how a domain
phrases a check ("has been implemented", "the response advises") where single words shared across domains
("model", "data") do not; and word pairs with content words, which tell more in a small corpus. Each coverage
is ranked among the run's held-out criteria (a conformal p-value) and the criterion keeps its lower rank.

The threshold is set as split-conformal prediction sets one: the run's tasks are cut into folds; each fold's
criteria are scored against the other folds (held out from the fit); the threshold is the alpha-quantile of
those held-out ranks with the (n+1) correction. A criterion of a new task of the same corpus then falls below it
with probability about alpha (the audit scores against the whole corpus, so somewhat less); a criterion of
another domain mostly does.
"""

from __future__ import annotations

import json
import math
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable
from pathlib import Path

import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from taxonomy.provenance import code_hash
from taxonomy.run import CRITERIA, RunDir
from taxonomy.text import tokens

__all__ = ["Novelty", "NOVELTY", "novelty_for", "word_pairs"]

NOVELTY = "novelty.json"  # beside tagger.npz in a run folder
FORMAT = 2
FOLDS = 5
FULL_TASKS = 2  # a word pair seen in this many tasks counts fully


def word_pairs(text: str) -> set[str]:
    """Adjacent token pairs of a criterion; its one token when it has only one."""
    toks = tokens(text or "")
    return {f"{a} {b}" for a, b in zip(toks, toks[1:])} or set(toks)


def pairs_and_words(text: str) -> set[str]:
    """Word pairs and single content words: in a small or a near domain, words tell more than pairs alone."""
    return word_pairs(text) | {t for t in tokens(text or "") if len(t) > 1 and t not in ENGLISH_STOP_WORDS}


# Each criterion is scored twice; its rank among the run's held-out criteria is the lower of the two ranks.
FEATURES: dict[str, Callable[[str], set[str]]] = {"pairs": word_pairs, "pairs_and_words": pairs_and_words}


def _task_counts(texts: list[str], tasks: list[str], feats: Callable[[str], set[str]]) -> dict[str, int]:
    """Per feature, the number of tasks using it, capped at FULL_TASKS (more changes no score)."""
    per_task: dict[str, set[str]] = {}
    for text, task in zip(texts, tasks):
        per_task.setdefault(task, set()).update(feats(text))
    counts: Counter = Counter()
    for found in per_task.values():
        counts.update(found)
    return {p: min(n, FULL_TASKS) for p, n in counts.items()}


def _coverage(counts: dict[str, int], texts: list[str], feats: Callable[[str], set[str]]) -> np.ndarray:
    out = np.ones(len(texts))
    for i, text in enumerate(texts):
        found = feats(text)
        if found:
            out[i] = sum(min(counts.get(p, 0), FULL_TASKS) for p in found) / (FULL_TASKS * len(found))
    return out


def _rank(held: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """A score's conformal p-value among the held-out ones: (held-out scores at or below it + 1) / (n + 1)."""
    return (np.searchsorted(held, scores, side="right") + 1) / (len(held) + 1)


def conformal_threshold(scores: np.ndarray, alpha: float) -> float:
    """The k-th smallest held-out score, k = floor(alpha (n+1)): a new exchangeable score falls strictly below it
    with probability at most alpha. -inf (nothing flagged) when the calibration set is too small for alpha."""
    k = math.floor(alpha * (len(scores) + 1))
    return float(np.sort(scores)[k - 1]) if k >= 1 else float("-inf")


def _folds(tasks: list[str]) -> list[int]:
    """Each criterion's fold: by task (a stable hash, so a rerun calibrates the same); by criterion where the
    corpus has fewer tasks than folds."""
    distinct = set(tasks)
    keys = tasks if len(distinct) >= FOLDS else [str(i) for i in range(len(tasks))]
    return [zlib.crc32(k.encode("utf-8")) % FOLDS for k in keys]


def _stamp(alpha: float, fitted_for: dict | None) -> dict:
    return {"format": FORMAT, "alpha": alpha, "folds": FOLDS, **(fitted_for or {})}


@dataclass
class Novelty:
    counts: dict[str, dict[str, int]]  # per FEATURES kind: feature -> tasks of the run's corpus using it (capped)
    held: dict[str, list[float]]  # per kind: the held-out criteria's coverage, sorted
    threshold: float  # a criterion whose rank is strictly below it fits no capability
    alpha: float
    calibrated_on: int  # held-out criteria behind the threshold
    held_out_flagged: float  # share of them below the threshold
    fitted_for: dict = field(default_factory=dict)

    @classmethod
    def fit(cls, texts: list[str], tasks: list[str], alpha: float, fitted_for: dict | None = None) -> "Novelty":
        texts, tasks = [t or "" for t in texts], [str(t) for t in tasks]
        fold = np.array(_folds(tasks))
        held = {kind: np.zeros(len(texts)) for kind in FEATURES}
        for f in range(FOLDS):
            inside, rest = np.flatnonzero(fold == f), np.flatnonzero(fold != f)
            for kind, feats in FEATURES.items():
                counts = _task_counts([texts[i] for i in rest], [tasks[i] for i in rest], feats)
                held[kind][inside] = _coverage(counts, [texts[i] for i in inside], feats)
        ranks = np.min([_rank(np.sort(h), h) for h in held.values()], axis=0) if len(texts) else np.zeros(0)
        threshold = conformal_threshold(ranks, alpha)
        return cls(
            {kind: _task_counts(texts, tasks, feats) for kind, feats in FEATURES.items()},
            {kind: np.sort(h).tolist() for kind, h in held.items()},
            threshold,
            alpha,
            len(texts),
            float(np.mean(ranks < threshold)) if len(ranks) else 0.0,
            _stamp(alpha, fitted_for),
        )

    def scores(self, texts: list[str]) -> np.ndarray:
        """Each criterion's rank in [0, 1] among the run's held-out criteria: the lower of its two coverage ranks."""
        texts = [t or "" for t in texts]
        ranks = [
            _rank(np.asarray(self.held[kind]), _coverage(self.counts[kind], texts, feats))
            for kind, feats in FEATURES.items()
        ]
        return np.min(ranks, axis=0) if texts else np.zeros(0)

    def flags(self, texts: list[str]) -> np.ndarray:
        return self.scores(texts) < self.threshold

    def describe(self) -> str:
        """What "fits no capability" means, in one sentence a reader of the audit can check."""
        pct = f"{100 * self.alpha:g}%"
        return (
            "A criterion fits no capability when little of its wording is the run's: the share of its word pairs "
            "found in the run's corpus (and of its word pairs and words), each ranked among criteria of the run's "
            f"own corpus held out from the fit ({self.calibrated_on} criteria, {FOLDS} folds by task); its lower "
            f"rank is below {self.threshold:.3f}, the {pct} quantile of the same rank on those held-out criteria, "
            f"{100 * self.held_out_flagged:.1f}% of which fall below it."
        )

    # ---- save / load ------------------------------------------------------------------
    def save(self, folder: Path) -> Path:
        path = Path(folder) / NOVELTY
        tmp = path.with_suffix(".tmp")
        keys = ("counts", "held", "threshold", "alpha", "calibrated_on", "held_out_flagged", "fitted_for")
        tmp.write_text(json.dumps({k: getattr(self, k) for k in keys}), encoding="utf-8")
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, folder: Path, alpha: float, fitted_for: dict) -> "Novelty | None":
        """The saved calibration when it was fitted for exactly these inputs; None otherwise (refit it)."""
        try:
            data = json.loads((Path(folder) / NOVELTY).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("fitted_for") != _stamp(alpha, fitted_for):
            return None
        return cls(
            data["counts"],
            data["held"],
            float(data["threshold"]),
            data["alpha"],
            data["calibrated_on"],
            data["held_out_flagged"],
            data["fitted_for"],
        )


def novelty_for(folder: Path | None, alpha: float) -> Novelty | None:
    """The calibration saved in a run folder, refitted on the run's own corpus (never the audited one) and saved
    when missing or fitted for another corpus, code or alpha; None where no run's corpus is beside the taxonomy."""
    if folder is None or not (Path(folder) / CRITERIA).is_file():
        return None
    run = RunDir(folder)
    stamp = {"corpus": (run.manifest.get("corpus") or {}).get("content_hash", ""), "code": code_hash()}
    found = Novelty.load(folder, alpha, stamp)
    if found is not None:
        return found
    criteria = run.read_parquet(CRITERIA)
    novelty = Novelty.fit(criteria["text"].to_list(), criteria["task_id"].to_list(), alpha, stamp)
    try:
        novelty.save(folder)
    except OSError:  # a run shipped read-only: the fit is the same each time, so using it unsaved is right
        pass
    return novelty
