"""The words and short phrases of a corpus, and which of them set a group of criteria apart.

A capability is represented by the corpus's own phrases: words and 2-3-word phrases of letter
scripts, and 2-3-character runs of scripts written without spaces (CJK), each counted once per
criterion. Inflected forms share a key (the first five letters of a long word), so "trained",
"training" and "train" count as one term, shown in its most frequent form.

`distinctive_terms` is class-based TF-IDF in the sense of BERTopic's c-TF-IDF, with two changes
that a taxonomy of checks needs: a term is scored by how much more often the group's criteria use
it than the corpus does (a KL term, so a word every criterion has scores nothing), weighted by how
evenly it spreads over tasks (a word piled up in one task is that task's topic, not a kind of
check); and the ranked list is diversified as in KeyBERT's maximal marginal relevance, with
redundancy measured by shared words and by co-occurrence in the same criteria, so a name's words
are not near-synonyms or parts of one another.
"""
from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from taxonomy.offline.features import WORD, is_spaceless, stem
from taxonomy.offline.languages import function_words

__all__ = ["PhraseSpace", "Term", "distinctive_terms"]

MAX_WORDS = 3          # longest phrase
MIN_CRITERIA = 3       # a term used by fewer criteria names nothing
MMR_DIVERSITY = 0.5    # weight of redundancy against relevance when ranking a group's terms
REDUNDANT_JACCARD = 0.6  # two terms found in mostly the same criteria say the same thing
MIN_COVERAGE_SHARE = 0.2  # a listed phrase holds at least this share of the best-covering one's criteria


_CACHE: dict[str, "PhraseSpace"] = {}


def _terms(text: str, function: frozenset[str]) -> dict[str, str]:
    """key -> surface form of every term in one criterion; `function`: the corpus's function words.
    A phrase's surface is the criterion's own spelling (case, and "/", "_", "-", "." between its words),
    so "src/model.py" reads as written rather than as "src model py"; the key ignores both."""
    out: dict[str, str] = {}
    latin: list[re.Match] = []

    def flush() -> None:
        low = [m.group().lower() for m in latin]
        stems = [stem(w) for w in low]
        # whether the criterion's words i and i + 1 stand as one written phrase (nothing but a space or a joiner)
        joined = [bool(_JOIN.fullmatch(text, a.end(), b.start())) for a, b in zip(latin, latin[1:])]
        for n in range(1, MAX_WORDS + 1):
            for i in range(len(low) - n + 1):
                if low[i] in function or low[i + n - 1] in function or len(low[i]) < 2 or len(low[i + n - 1]) < 2:
                    continue
                key = " ".join(stems[i:i + n])
                if key not in out:
                    out[key] = _written(text, latin[i], latin[i + n - 1]) if all(joined[i:i + n - 1]) \
                        else " ".join(low[i:i + n])
        latin.clear()

    for m in WORD.finditer(text):
        w = m.group()
        if is_spaceless(w):
            flush()
            w = w.lower()
            for n in (2, 3):
                for i in range(len(w) - n + 1):
                    out.setdefault(w[i:i + n], w[i:i + n])
        else:
            latin.append(m)
    flush()
    return out


_JOIN = re.compile(r"\s+|[/_.\-'’]")  # what may stand between a phrase's words when it is shown as written


def _written(text: str, first: re.Match, last: re.Match) -> str:
    """The phrase from `first` to `last` as the criterion spells it. A capitalised first word that only opens the
    criterion is lowered: the capital belongs to the sentence, not the phrase."""
    span = text[first.start():last.end()]
    word = first.group()
    if word[:1].isupper() and word[1:].islower() and not text[:first.start()].strip():
        span = span[:1].lower() + span[1:]
    return " ".join(span.split())


def _most_written(forms: Counter) -> str:
    """The most frequent spelling of a term, case aside, then its most frequent casing: "Legende" and
    "legende" vote together for the word, so the casing cannot change which word is shown."""
    folded: Counter = Counter()
    for form, n in forms.items():
        folded[form.lower()] += n
    word = folded.most_common(1)[0][0]
    return max((f for f in forms if f.lower() == word), key=lambda f: forms[f])


@dataclass
class Term:
    text: str          # the most frequent surface form
    coverage: float    # share of the group's criteria that use it
    lift: float        # coverage / share of all criteria that use it
    score: float


@dataclass
class PhraseSpace:
    """Criteria x terms (binary), with each term's surface form and spread over tasks."""

    keys: list[str]
    surface: list[str]
    x: sp.csr_matrix
    df: np.ndarray        # share of criteria using the term
    spread: np.ndarray    # observed / expected number of tasks using it, in [0, 1]
    n_words: np.ndarray
    index: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.index = {k: j for j, k in enumerate(self.keys)}

    @classmethod
    def fit(cls, texts: list[str], tasks: list[str]) -> "PhraseSpace":
        """The terms of these criteria; the merge's re-reading and Stage 3 of one run share one fit
        (cached by content, one corpus at a time), as they share one CriterionSpace."""
        h = hashlib.sha1(repr((list(texts), [str(t) for t in tasks])).encode("utf-8")).hexdigest()
        if h not in _CACHE:
            _CACHE.clear()
            _CACHE[h] = cls._fit(texts, tasks)
        return _CACHE[h]

    @classmethod
    def _fit(cls, texts: list[str], tasks: list[str]) -> "PhraseSpace":
        rows, cols, forms = [], [], defaultdict(Counter)
        index: dict[str, int] = {}
        function = function_words(texts)
        for r, text in enumerate(texts):
            for key, form in _terms(text or "", function).items():
                j = index.setdefault(key, len(index))
                rows.append(r)
                cols.append(j)
                forms[key][form] += 1
        n = max(len(texts), 1)
        x = sp.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(len(texts), len(index)))
        occ = np.asarray(x.sum(axis=0)).ravel()
        keep = np.flatnonzero(occ >= min(MIN_CRITERIA, max(1, n // 50)))
        keys = [k for k, _ in sorted(index.items(), key=lambda kv: kv[1])]
        keys = [keys[j] for j in keep]
        x = x[:, keep].tocsr()
        occ = occ[keep]
        task_ids, task_index = np.unique(np.asarray([str(t) for t in tasks], dtype=object), return_inverse=True)
        n_tasks = len(task_ids)
        per_task = sp.csr_matrix((np.ones(len(task_index)), (task_index, np.arange(len(task_index)))),
                                 shape=(n_tasks, len(texts))) @ x
        per_task.data[:] = 1.0
        in_tasks = np.asarray(per_task.sum(axis=0)).ravel()
        if n_tasks > 1:
            expected = n_tasks * (1.0 - (1.0 - 1.0 / n_tasks) ** occ)
            spread = np.clip(in_tasks / np.maximum(expected, 1e-9), 0.0, 1.0)
        else:
            spread = np.ones(len(keys))
        surface = [_most_written(forms[k]) for k in keys]
        n_words = np.array([1 if is_spaceless(k) else len(k.split()) for k in keys])
        return cls(keys, surface, x, occ / n, spread, n_words)

    def column(self, surface: str) -> int | None:
        """The column of a term given in any of its surface forms (a stored key phrase), or None."""
        key = surface if is_spaceless(surface) else " ".join(stem(w) for w in WORD.findall(surface.lower()))
        return self.index.get(key)

    def coverage(self, rows: np.ndarray) -> np.ndarray:
        """Per term: share of these criteria that use it."""
        if len(rows) == 0:
            return np.zeros(len(self.keys))
        return np.asarray(self.x[rows].sum(axis=0)).ravel() / len(rows)


def _relevance(space: PhraseSpace, cov: np.ndarray) -> np.ndarray:
    base = np.maximum(space.df, 1e-12)
    gain = np.where(cov > base, cov * np.log(np.maximum(cov, 1e-12) / base), 0.0)
    # A phrase that holds almost as many criteria as its words says more than they do.
    return gain * space.spread * (1.0 + 0.25 * (space.n_words - 1))


def _word_sets(space: PhraseSpace, j: int) -> set[str]:
    key = space.keys[j]
    return set(key) if is_spaceless(key) else set(key.split())


def _redundancy(space: PhraseSpace, cand: list[int], rows: np.ndarray) -> np.ndarray:
    """(c, c): 1 for terms sharing a word (or character), else co-occurrence Jaccard scaled to 1 at REDUNDANT_JACCARD."""
    cols = space.x[rows][:, cand].toarray() > 0 if len(rows) else np.zeros((0, len(cand)), dtype=bool)
    inter = cols.T.astype(np.float64) @ cols.astype(np.float64)
    size = np.diag(inter)
    union = size[:, None] + size[None, :] - inter
    red = np.minimum(1.0, np.where(union > 0, inter / np.maximum(union, 1), 0.0) / REDUNDANT_JACCARD)
    words = [_word_sets(space, j) for j in cand]
    for a in range(len(cand)):
        for b in range(a + 1, len(cand)):
            if words[a] & words[b]:
                red[a, b] = red[b, a] = 1.0
    return red


def distinctive_terms(space: PhraseSpace, rows: np.ndarray, top: int = 8, pool: int = 40) -> list[Term]:
    """The terms that set these criteria apart from the corpus, most telling first, diversified."""
    cov = space.coverage(rows)
    rel = _relevance(space, cov)
    ranked = [int(j) for j in np.argsort(-rel, kind="stable")[:pool] if rel[j] > 0]
    # A phrase a handful of the group's criteria use is one task's detail, however rare elsewhere.
    floor = MIN_COVERAGE_SHARE * max((cov[j] for j in ranked), default=0.0)
    cand = [j for j in ranked if cov[j] >= floor]
    if not cand:
        return []
    best = max(rel[j] for j in cand)
    red = _redundancy(space, cand, rows)
    left, picked = list(range(len(cand))), []
    while left and len(picked) < top:
        def mmr(a: int) -> float:
            r = max((red[a, b] for b in picked), default=0.0)
            return (1 - MMR_DIVERSITY) * rel[cand[a]] / best - MMR_DIVERSITY * r
        a = max(left, key=lambda a: (mmr(a), -a))
        left.remove(a)
        picked.append(a)
    chosen = [cand[a] for a in picked]
    return [Term(space.surface[j], float(cov[j]), float(cov[j] / max(space.df[j], 1e-12)), float(rel[j])) for j in chosen]
