"""What a reader is shown of a group of criteria: its characteristic phrases and representative criteria.

Modelled on BERTopic's representation package: each step is a small object configured by its own
arguments, with one call `step(space, groups, terms) -> terms` (terms: one ranked list per group), and
the caller chains them:

    space = PhraseSpace.fit(texts, tasks)
    terms = [[] for _ in groups]
    for step in (ClassTfidf(pool=40), MaximalMarginalRelevance(diversity=0.5, top=6), OncePerTitle(top=3)):
        terms = step(space, groups, terms)

Terms are words and 2-3-word phrases of letter scripts and 2-3-character runs of scripts written
without spaces, counted once per criterion and keyed by their words' stems (taxonomy.text), so
"trained" and "training" are one term, shown as the criteria most often write it.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer

from taxonomy.text import WORD, function_words, is_spaceless, stem, words

__all__ = [
    "PhraseSpace",
    "Term",
    "ClassTfidf",
    "WholeWords",
    "MaximalMarginalRelevance",
    "OncePerTitle",
    "representative",
]

MAX_WORDS = 3  # longest phrase
MIN_CRITERIA = 3  # a term fewer criteria use names nothing
_JOIN = re.compile(r"\s+|[/_.\-'’]")  # what may stand between a phrase's words when shown as written
_CACHE: dict[str, "PhraseSpace"] = {}


@dataclass
class Term:
    text: str  # its key until `PhraseSpace.written` spells it as the criteria do
    coverage: float  # share of the group's criteria that use it
    score: float
    col: int  # its column in the PhraseSpace


def _keys(text: str, function: frozenset[str]) -> set[str]:
    """Every term of one criterion, by its key (its words' stems): a phrase neither starts nor ends with a
    function word; a run of a spaceless script gives its 2- and 3-character pieces."""
    out: set[str] = set()
    run: list[str] = []

    def flush() -> None:
        stems = [stem(w) for w in run]
        ends = [w not in function and len(w) >= 2 for w in run]  # may a phrase start or end here
        for i in range(len(run)):
            for j in range(i, min(i + MAX_WORDS, len(run))):
                if ends[i] and ends[j]:
                    out.add(" ".join(stems[i : j + 1]))
        run.clear()

    for w in words(text):
        if is_spaceless(w):
            flush()
            out.update(w[i : i + n] for n in (2, 3) for i in range(len(w) - n + 1))
        else:
            run.append(w)
    flush()
    return out


def _written(text: str, key: str) -> list[str]:
    """How one criterion writes a term: its own spelling (case, and "/", "_", "-", "." between the words, so
    "src/model.py" reads as written), or its words lowered when other text stands between them."""
    parts = key.split()
    found = [m for m in WORD.finditer(text) if not is_spaceless(m.group())]
    stems = [stem(m.group().lower()) for m in found]
    out = []
    for i in range(len(found) - len(parts) + 1):
        if stems[i : i + len(parts)] == parts:
            run = found[i : i + len(parts)]
            joined = all(_JOIN.fullmatch(text, a.end(), b.start()) for a, b in zip(run, run[1:]))
            out.append(
                " ".join(text[run[0].start() : run[-1].end()].split())
                if joined
                else " ".join(m.group().lower() for m in run)
            )
    return out


def _most_written(forms: Counter) -> str:
    """The commonest spelling case aside, then its commonest casing."""
    folded: Counter = Counter()
    for form, n in forms.items():
        folded[form.lower()] += n
    word = folded.most_common(1)[0][0]
    return max((f for f in forms if f.lower() == word), key=lambda f: forms[f])


@dataclass
class PhraseSpace:
    """Criteria x terms (binary), each term's surface form, and its spread over tasks."""

    keys: list[str]
    texts: list[str]
    x: sp.csr_matrix
    df: np.ndarray  # share of criteria using the term
    spread: np.ndarray  # observed / expected number of tasks using it, in [0, 1]
    n_words: np.ndarray
    spelt: dict = field(default_factory=dict, repr=False, compare=False)  # `written`, once per term

    @classmethod
    def fit(cls, texts: list[str], tasks: list[str]) -> "PhraseSpace":
        h = hashlib.sha1(repr((list(texts), [str(t) for t in tasks])).encode("utf-8")).hexdigest()
        if h not in _CACHE:
            _CACHE.clear()
            _CACHE[h] = cls._fit(texts, tasks)
        return _CACHE[h]

    @classmethod
    def _fit(cls, texts: list[str], tasks: list[str]) -> "PhraseSpace":
        function = function_words(texts)
        texts = [t or "" for t in texts]
        cv = CountVectorizer(analyzer=lambda t: _keys(t, function), lowercase=False, binary=True, dtype=np.float32)
        try:
            x = cv.fit_transform(texts).tocsr()
            keys = cv.get_feature_names_out().tolist()
        except ValueError:  # no word anywhere
            x, keys = sp.csr_matrix((len(texts), 0), dtype=np.float32), []
        occ = np.asarray(x.sum(axis=0)).ravel()
        keep = np.flatnonzero(occ >= min(MIN_CRITERIA, max(1, len(texts) // 50)))
        keys, x, occ = [keys[j] for j in keep], x[:, keep].tocsr(), occ[keep]
        task_ids, task_index = np.unique(np.asarray([str(t) for t in tasks], dtype=object), return_inverse=True)
        n_tasks = len(task_ids)
        per_task = (
            sp.csr_matrix((np.ones(len(texts)), (task_index, np.arange(len(texts)))), shape=(n_tasks, len(texts))) @ x
        )
        in_tasks = np.asarray((per_task > 0).sum(axis=0)).ravel()
        expected = n_tasks * (1.0 - (1.0 - 1.0 / max(n_tasks, 1)) ** occ)
        spread = np.clip(in_tasks / np.maximum(expected, 1e-9), 0.0, 1.0) if n_tasks > 1 else np.ones(len(keys))
        n_words = np.array([1 if is_spaceless(k) else len(k.split()) for k in keys])
        return cls(keys, texts, x, occ / max(len(texts), 1), spread, n_words)

    def written(self, j: int, read: int = 50) -> str:
        """Term j as the criteria most often write it (read from the first `read` criteria that use it)."""
        key = self.keys[j]
        if is_spaceless(key):
            return key
        if j not in self.spelt:
            rows = self.x[:, j].nonzero()[0][:read]
            forms = Counter(f for r in rows for f in _written(self.texts[r], key))
            self.spelt[j] = _most_written(forms) if forms else key
        return self.spelt[j]

    def coverage(self, rows: np.ndarray) -> np.ndarray:
        """Per term: share of these criteria that use it."""
        return np.asarray(self.x[rows].sum(axis=0)).ravel() / len(rows) if len(rows) else np.zeros(len(self.keys))


@dataclass
class ClassTfidf:
    """Candidates per group by class-based TF-IDF (BERTopic's c-TF-IDF), scored by how much more often the
    group uses a term than the corpus does (a word every criterion has scores nothing), weighted by its
    spread over tasks (a word piled up in one task is its topic, not a kind of check)."""

    pool: int = 40
    min_share: float = 0.2  # of the best candidate's coverage: a phrase a handful of the group uses is a detail

    def __call__(self, space: PhraseSpace, groups: list[np.ndarray], terms: list[list[Term]]) -> list[list[Term]]:
        out = []
        base = np.maximum(space.df, 1e-12)
        for rows in groups:
            cov = space.coverage(rows)
            rel = np.where(cov > base, cov * np.log(np.maximum(cov, 1e-12) / base), 0.0)
            rel *= space.spread * (1.0 + 0.25 * (space.n_words - 1))  # a phrase as common as its words says more
            ranked = [int(j) for j in np.argsort(-rel, kind="stable")[: self.pool] if rel[j] > 0]
            floor = self.min_share * max((cov[j] for j in ranked), default=0.0)
            out.append([Term(space.keys[j], float(cov[j]), float(rel[j]), j) for j in ranked if cov[j] >= floor])
        return out


@dataclass
class WholeWords:
    """Only terms made of whole words: a 2-3-character piece of a script written without spaces may cut a
    word in half ("款金"), and so does a word the criteria always write glued to letters of another script
    ("callback" of "callback을"); neither stands for a group in a title."""

    glued: bool = True  # also read the criteria for a word never written alone (slower: run it on short lists)
    read: int = 20  # criteria read to find the term standing alone

    def __call__(self, space: PhraseSpace, groups: list[np.ndarray], terms: list[list[Term]]) -> list[list[Term]]:
        return [
            [t for t in ts if not is_spaceless(space.keys[t.col]) and (not self.glued or self._alone(space, t.col))]
            for ts in terms
        ]

    def _alone(self, space: PhraseSpace, j: int) -> bool:
        form = space.written(j).lower()
        for r in space.x[:, j].nonzero()[0][: self.read]:
            text = space.texts[r].lower()
            at = text.find(form)
            while at >= 0:
                end = at + len(form)
                if not (at and _letter(text[at - 1])) and not (end < len(text) and _letter(text[end])):
                    return True
                at = text.find(form, at + 1)
        return False


def _letter(ch: str) -> bool:
    return ch.isalpha() or unicodedata.category(ch).startswith("M")


@dataclass
class MaximalMarginalRelevance:
    """The ranked list diversified as in KeyBERT: a term found in mostly the same criteria as one already chosen
    counts as redundant, and one sharing a word with it is left out."""

    diversity: float = 0.5
    top: int = 6
    same_criteria: float = 0.6  # co-occurrence Jaccard at which two terms say the same thing

    def __call__(self, space: PhraseSpace, groups: list[np.ndarray], terms: list[list[Term]]) -> list[list[Term]]:
        return [self._one(space, rows, ts) for rows, ts in zip(groups, terms)]

    def _one(self, space: PhraseSpace, rows: np.ndarray, ts: list[Term]) -> list[Term]:
        if not ts:
            return []
        cols = [t.col for t in ts]
        present = space.x[rows][:, cols].toarray() > 0
        inter = present.T.astype(float) @ present.astype(float)
        size = np.diag(inter)
        red = np.minimum(1.0, inter / np.maximum(size[:, None] + size[None, :] - inter, 1) / self.same_criteria)
        words = [set(space.keys[j]) if is_spaceless(space.keys[j]) else set(space.keys[j].split()) for j in cols]
        best, picked, left = max(t.score for t in ts), [], list(range(len(ts)))
        while len(picked) < self.top:
            # a term sharing a word with a chosen one is a part or a variant of it: never both
            left = [a for a in left if not any(words[a] & words[b] for b in picked)]
            if not left:
                break

            def gain(a: int) -> float:
                return (1 - self.diversity) * ts[a].score / best - self.diversity * max(
                    (red[a, b] for b in picked), default=0.0
                )

            a = max(left, key=lambda a: (gain(a), -a))
            left.remove(a)
            picked.append(a)
        return [ts[a] for a in picked]


@dataclass
class OncePerTitle:
    """The first `top` terms of each group, the largest group first; a term already shown for a larger group
    is left out of a smaller one's (a phrase in two titles reads as a check of both) while others remain."""

    top: int = 3

    def __call__(self, space: PhraseSpace, groups: list[np.ndarray], terms: list[list[Term]]) -> list[list[Term]]:
        out: list[list[Term]] = [[] for _ in groups]
        shown: set[int] = set()
        for g in sorted(range(len(groups)), key=lambda g: -len(groups[g])):
            fresh = [t for t in terms[g] if t.col not in shown]
            out[g] = (fresh or terms[g])[: self.top]
            shown |= {t.col for t in out[g]}
        return out


def representative(
    space: PhraseSpace, rows: np.ndarray, terms: list[Term], texts: list[str], tasks: list[str], k: int
) -> list[int]:
    """k criteria of the group that hold the most of its phrases (by their scores), shorter first, from
    different tasks while there are any."""
    if not len(rows):
        return []
    cols = [t.col for t in terms]
    weight = np.array([t.score for t in terms]) if terms else np.zeros(0)
    held = (space.x[rows][:, cols].toarray() > 0) @ weight if cols else np.zeros(len(rows))
    order = sorted(range(len(rows)), key=lambda i: (-round(float(held[i]), 6), len(texts[rows[i]]), int(rows[i])))
    picked, seen, said = [], set(), set()
    n_tasks = len({tasks[int(j)] for j in rows})
    for i in order + order:  # first pass: one per task; second: fill up
        r = int(rows[i])
        if len(picked) == k:
            break
        text = " ".join(texts[r].lower().split())
        if text not in said and (tasks[r] not in seen or len(seen) >= n_tasks):
            picked.append(r)
            seen.add(tasks[r])
            said.add(text)  # a criterion repeated word for word is shown once
    return picked
