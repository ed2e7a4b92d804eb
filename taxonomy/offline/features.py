"""What a criterion asks the verifier to check, as a vector, from corpus statistics alone.

No word list of any domain. The signals:

- Tokens: words of letter scripts, and character unigrams + bigrams of scripts written
  without spaces (CJK), so a Chinese rubric gets the same treatment as an English one.
- Spread: a token used across many tasks is check language ("states", "fails", "concise");
  one piled up in few tasks is that task's topic. Each token is weighted by the ratio of
  the tasks it appears in to the tasks it would reach if its occurrences fell at random,
  so topic words fade however frequent they are.
- The predicate: the first tokens of a criterion say what is asserted ("Fails to ask ...",
  "The code has been implemented ..."); they are counted again as positional features.
- No fixed word list at all. A list of domain-free facets (negation, modality, comparison,
  quantity, format, citation, length, quoted literals) was measured as extra dimensions and
  lowered NMI on HealthBench (0.144 -> 0.069) with no gain elsewhere, so it did not stay.
- Task-mean subtraction: what all of a task's criteria share is the task's topic, not a
  kind of check; a share of each task's mean vector is removed.
- Stems: the vectors count a long word by its first letters, so "mentions" and "mentioned",
  or "menciona" and "mencionar", are one check word. Mean NMI of the primary tags against
  the gold kinds over seeds 0-3, on the corpora of benchmarks/heldout/: German 0.163 -> 0.250,
  Spanish 0.219 -> 0.271, report rubric 0.202 -> 0.265, Chinese/English 0.177 -> 0.197;
  HealthBench fell 0.140 -> 0.134. The language's Snowball stemmer, which strips endings
  only, measured worse on every held-out corpus but the English report rubric (0.313 there;
  German 0.222, Spanish 0.254, Chinese/English 0.165) and put HealthBench (0.120) under its
  k-means baseline. The naming statistics (`vocabulary`, `counts`, ...) keep whole words,
  since a name is read.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from sklearn.decomposition import TruncatedSVD
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.preprocessing import normalize
from threadpoolctl import threadpool_limits

from taxonomy.text import STEM_LETTERS, WORD, is_spaceless, stem, tokens

__all__ = ["CriterionSpace", "WORD", "STEM_LETTERS", "tokens", "is_spaceless", "stem"]


PREDICATE_TOKENS = 4      # leading tokens that name what is asserted
PREDICATE_WEIGHT = 1.0    # weight of a positional predicate feature against a plain token
SPREAD_POWER = 1.0        # how hard concentrated (topic) tokens are discounted (2.0 measured worse with Ward kinds)
TASK_MEAN_SHARE = 0.5     # share of each task's mean vector removed
BIGRAMS = False           # measured: helps PaperBench, hurts HealthBench; off.
# word pairs ("fails to", "been implemented") carry the predicate
CLAUSE_PREDICATES = False # measured: no gain; off.
# predicate positions at the start of every clause, not only the first
MAX_CLAUSES = 3
DIM = 96                  # SVD dimensions of the criterion vectors
_CACHE: dict[str, "CriterionSpace"] = {}
_SVD_FIT_MAX = 20_000     # above this many criteria a deterministic sample fits the basis


_CLAUSE = re.compile(r"[,;:\n。，；：]+")


def _features(text: str) -> list[str]:
    """Tokens, word bigrams, and the leading tokens of every clause marked as predicate positions
    (a setup clause "When training X, ..." is followed by the clause that holds the check)."""
    toks = tokens(text)
    out = list(toks)
    if BIGRAMS:
        out += [f"{a} {b}" for a, b in zip(toks, toks[1:])]
    clauses = [tokens(c) for c in _CLAUSE.split(text)] if CLAUSE_PREDICATES else [toks]
    for clause in clauses[:MAX_CLAUSES]:
        out += [f"^{t}" for t in clause[:PREDICATE_TOKENS]]
    return out


@dataclass
class CriterionSpace:
    """Criterion vectors (rows of `vectors`, unit norm) and the token statistics behind them."""

    vocabulary: list[str]
    spread: np.ndarray      # per token: observed / expected number of tasks, in [0, 1]
    coverage: np.ndarray    # per token: share of tasks using it
    doc_freq: np.ndarray    # per token: share of criteria using it
    vectors: np.ndarray     # (n_criteria, dim) float32, unit rows
    counts: sp.csr_matrix   # (n_criteria, n_tokens) binary token presence
    n_tasks: int = 1
    memo: dict = field(default_factory=dict, repr=False, compare=False)  # results derived from this space (discover.py's Ward tree)

    @classmethod
    def fit(cls, texts: list[str], tasks: list[str], seed: int = 0) -> "CriterionSpace":
        """The space of these criteria; Stage 1 and Stage 2a of one run share one fit (cached by content)."""
        h = hashlib.sha1(repr((seed, list(texts), [str(t) for t in tasks])).encode("utf-8")).hexdigest()
        if h not in _CACHE:
            _CACHE.clear()  # one corpus at a time: a 100k-criterion space is not kept twice
            _CACHE[h] = cls._fit_quiet(texts, tasks, seed)
        return _CACHE[h]

    @classmethod
    def _fit_quiet(cls, texts: list[str], tasks: list[str], seed: int) -> "CriterionSpace":
        with threadpool_limits(1):  # small factorisations: BLAS/OpenMP threads only contend on a busy CPU
            return cls._fit(texts, tasks, seed)

    @classmethod
    def _fit(cls, texts: list[str], tasks: list[str], seed: int) -> "CriterionSpace":
        texts = [t or "" for t in texts]
        cv = CountVectorizer(analyzer=_features, lowercase=False, dtype=np.float32)
        try:
            x = cv.fit_transform(texts).tocsr()
            vocab = cv.get_feature_names_out().tolist()
        except ValueError:  # no token anywhere (e.g. only digits)
            x, vocab = sp.csr_matrix((len(texts), 0), dtype=np.float32), []
        x.data[:] = 1.0
        n = max(len(texts), 1)
        task_ids, task_index = np.unique(np.asarray(tasks, dtype=object), return_inverse=True)
        n_tasks = len(task_ids)
        spread, in_tasks, occurrences = _spread(x, task_index, n_tasks)
        xs, stems = _stemmed(x, vocab)
        s_spread, s_in_tasks, s_occurrences = _spread(xs, task_index, n_tasks)
        idf = np.log((n + 1) / (s_occurrences + 1)) + 1.0
        positional = np.array([PREDICATE_WEIGHT if v.startswith("^") else 1.0 for v in stems])
        weight = idf * s_spread ** SPREAD_POWER * positional
        if n_tasks > 2:
            weight *= s_in_tasks >= 2  # a token of one task only says nothing about kinds of check
        used = np.flatnonzero(weight > 0)  # dropping zero-weight tokens keeps the SVD small
        # No token shared by two tasks (or none at all): nothing tells kinds apart, so every vector is zero.
        words = normalize(xs[:, used] @ sp.diags(weight[used].astype(np.float32))) if used.size else sp.csr_matrix((len(texts), 1))
        dense = _reduce(words, seed)
        vectors = _subtract_task_means(dense, task_index, TASK_MEAN_SHARE)
        return cls(vocab, spread, in_tasks / max(n_tasks, 1), occurrences / n,
                   normalize(vectors).astype(np.float32), x, n_tasks)


def _spread(x: sp.csr_matrix, task_index: np.ndarray, n_tasks: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per token: observed / expected number of tasks, tasks using it, criteria using it."""
    per_task = sp.csr_matrix((np.ones(len(task_index)), (task_index, np.arange(len(task_index)))),
                             shape=(n_tasks, x.shape[0])) @ x
    per_task.data[:] = 1.0
    in_tasks = np.asarray(per_task.sum(axis=0)).ravel()
    occurrences = np.asarray(x.sum(axis=0)).ravel()
    if n_tasks > 1:
        expected = n_tasks * (1.0 - (1.0 - 1.0 / n_tasks) ** occurrences)
        spread = np.clip(in_tasks / np.maximum(expected, 1e-9), 0.0, 1.0)
    else:  # one task: no way to tell topic from check by spread
        spread = np.ones(x.shape[1])
    return spread, in_tasks, occurrences


def _stemmed(x: sp.csr_matrix, vocab: list[str]) -> tuple[sp.csr_matrix, list[str]]:
    """Token presence with the tokens of one stem (and one position) folded into one column."""
    keys = [("^" + stem(v[1:])) if v.startswith("^") else stem(v) for v in vocab]
    uniq, col = np.unique(np.asarray(keys, dtype=object), return_inverse=True)
    fold = sp.csr_matrix((np.ones(len(keys), dtype=np.float32), (np.arange(len(keys)), col)), shape=(len(keys), len(uniq)))
    xs = (x @ fold).tocsr()
    xs.data[:] = 1.0
    return xs, uniq.tolist()


def _reduce(x: sp.csr_matrix, seed: int) -> np.ndarray:
    n, d = x.shape
    dims = min(DIM, d - 1, n - 1)
    if dims < 2:
        return x.toarray() if d <= DIM else np.zeros((n, 1))
    svd = TruncatedSVD(n_components=dims, random_state=seed, algorithm="randomized", n_iter=4)
    if n > _SVD_FIT_MAX:
        sample = np.random.default_rng(seed).choice(n, _SVD_FIT_MAX, replace=False)
        svd.fit(x[np.sort(sample)])
        z = svd.transform(x)
    else:
        z = svd.fit_transform(x)
    return normalize(z)


def _subtract_task_means(v: np.ndarray, task_index: np.ndarray, share: float) -> np.ndarray:
    if share <= 0:
        return v
    sums = np.zeros((task_index.max() + 1, v.shape[1])) if len(task_index) else np.zeros((0, v.shape[1]))
    np.add.at(sums, task_index, v)
    sizes = np.bincount(task_index, minlength=len(sums)).astype(float)
    means = sums / np.maximum(sizes, 1)[:, None]
    # A task of one criterion has nothing to subtract: its mean is the criterion itself.
    keep = (sizes > 1)[task_index]
    return v - share * means[task_index] * keep[:, None]
