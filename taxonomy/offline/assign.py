"""Which capabilities a criterion needs, scored so that a reader of the taxonomy could say why.

The merge groups criteria by their place in the Ward tree (their Stage 1 label). A reader sees
names and phrases, not that tree, so each group is re-read through its own distinctive phrases
(phrases.py): a criterion's score for a capability is its label's vote plus the weight of the
strongest of that capability's phrases it contains. A few rounds of "phrases from the members,
members from the phrases" settle groups whose names hold for most of their criteria (on DevAI
the least-covered capability's top phrase goes from 24% to 74% of its criteria).

A per-capability offset, fitted once when the taxonomy is built and stored with it, keeps every
share within the merge's bounds; a frozen taxonomy applies the same offsets to a new corpus, so an
audit sees that corpus's real mix.

Scores are probabilities over the capabilities (a softmax), so a primary score of 0.95 means the
evidence points one way and 0.4 that the criterion is borderline; a second or third tag is kept
only when its probability is at least SECOND_TAG of the first's.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from taxonomy.offline.phrases import PhraseSpace, Term, distinctive_terms

__all__ = ["Assignment", "phrase_scores", "refine", "signature", "tag_scores"]

ROUNDS = 3            # members -> phrases -> members
SIGNATURE_TERMS = 12  # phrases kept per capability for scoring
PHRASE_WEIGHT = 1.0   # the strongest phrase against the label's vote (1)
TEMPERATURE = 0.25    # softmax temperature of the scores
SECOND_TAG = 0.35     # a further tag needs this share of the primary's probability
OFFSET_ROUNDS = 60


@dataclass
class Assignment:
    primary: np.ndarray          # (n,) capability index
    tags: list[list[int]]        # ranked, 1..max_tags
    scores: np.ndarray           # (n,) probability of the primary
    probs: np.ndarray            # (n, k)


def phrase_scores(space: PhraseSpace, phrases: list[list[str]], weights: list[list[float]]) -> np.ndarray:
    """(n, k): weight of the strongest of each capability's phrases a criterion contains."""
    n = space.x.shape[0]
    out = np.zeros((n, len(phrases)), dtype=np.float64)
    for c, (terms, w) in enumerate(zip(phrases, weights)):
        cols = [(space.column(t), wt) for t, wt in zip(terms, w)]
        cols = [(j, wt) for j, wt in cols if j is not None]
        if not cols:
            continue
        present = space.x[:, [j for j, _ in cols]].toarray() > 0
        out[:, c] = (present * np.array([wt for _, wt in cols])[None, :]).max(axis=1)
    return out


def tag_scores(scores: np.ndarray, max_tags: int) -> Assignment:
    z = (scores - scores.max(axis=1, keepdims=True)) / TEMPERATURE
    probs = np.exp(z)
    probs /= probs.sum(axis=1, keepdims=True)
    order = np.argsort(-probs, axis=1, kind="stable")
    primary = order[:, 0]
    tags = [[int(c) for c in order[i, :max_tags] if probs[i, c] >= SECOND_TAG * probs[i, primary[i]]] for i in range(len(primary))]
    return Assignment(primary, tags, probs[np.arange(len(primary)), primary], probs)


def _offsets(base: np.ndarray, min_share: float, max_share: float) -> np.ndarray:
    """Per-capability offsets that bring every primary share within [min_share, max_share] where they can."""
    n, k = base.shape
    off = np.zeros(k)
    for _ in range(OFFSET_ROUNDS):
        share = np.bincount((base + off).argmax(axis=1), minlength=k) / max(n, 1)
        step = np.where(share > max_share, max_share - share, 0.0) + np.where(share < min_share, min_share - share, 0.0)
        if not step.any():
            break
        off += 2.0 * step + 0.01 * np.sign(step)
    return off


def signature(terms: list[Term]) -> tuple[list[str], list[float]]:
    """A capability's stored phrase model: its terms and their weights, the strongest at 1."""
    top = max((t.score for t in terms), default=0.0) or 1.0
    return [t.text for t in terms], [round(t.score / top, 4) for t in terms]


def refine(space: PhraseSpace, votes: np.ndarray, max_tags: int, min_share: float, max_share: float
           ) -> tuple[Assignment, list[list[Term]], np.ndarray]:
    """Rounds of phrases-from-members and members-from-phrases, starting from the label votes.
    Returns the assignment, each capability's distinctive terms and the fitted offsets."""
    primary = votes.argmax(axis=1)
    k = votes.shape[1]
    for _ in range(ROUNDS):
        terms = [distinctive_terms(space, np.flatnonzero(primary == c), top=SIGNATURE_TERMS) for c in range(k)]
        sig = [signature(t) for t in terms]
        base = votes + PHRASE_WEIGHT * phrase_scores(space, [s[0] for s in sig], [s[1] for s in sig])
        off = _offsets(base, min_share, max_share)
        result = tag_scores(base + off[None, :], max_tags)
        primary = result.primary
    return result, terms, off
