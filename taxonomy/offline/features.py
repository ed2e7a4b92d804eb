"""What a criterion asks the verifier to check, as a vector, from corpus statistics alone.

No word list of any domain. Tokens come from taxonomy.text (words of letter scripts; character
unigrams and bigrams of scripts written without spaces). The signals:

- Spread: a token used across many tasks is check language ("states", "fails", "concise"); one
  piled up in a few tasks is their topic. Each token is weighted by the tasks it appears in over
  the tasks it would reach if its occurrences fell at random, so topic words fade however frequent.
- The predicate: a criterion's first words say what is asserted ("Fails to ask ...") and are
  counted again as positional features.
- Stems: a long word counts by its first letters (text.stem), so "mentions" and "mentioned", or
  "menciona" and "mencionar", are one check word.
- Task-mean subtraction: what all of a task's criteria share is the task's topic, not a kind of
  check, so a share of each task's mean vector is removed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from sklearn.decomposition import TruncatedSVD
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.preprocessing import normalize
from threadpoolctl import threadpool_limits

from taxonomy.config import OfflineConfig
from taxonomy.text import stem, tokens

__all__ = ["CriterionSpace", "features"]

SVD_FIT_MAX = 20_000  # above this many criteria a deterministic sample fits the SVD basis
# Two or three criteria give one or two SVD dimensions, where task-mean subtraction leaves nothing to tell them
# apart: their tokens are kept as they are.
IDENTITY_MAX = 4_096
_CACHE: dict[str, "CriterionSpace"] = {}


@dataclass
class CriterionSpace:
    """Criterion vectors (rows of `vectors`, unit norm) and the token statistics behind them."""

    vocabulary: list[str]  # tokens, and "^token" for a token in a predicate position
    spread: np.ndarray  # per token: observed / expected number of tasks, in [0, 1]
    coverage: np.ndarray  # per token: share of tasks using it
    doc_freq: np.ndarray  # per token: share of criteria using it
    vectors: np.ndarray  # (n_criteria, dims) float32, unit rows
    counts: sp.csr_matrix  # (n_criteria, n_tokens) binary token presence
    n_tasks: int = 1
    # How a criterion of any corpus becomes a vector here, before task means are removed (the tagger's fit, model.py):
    # each vocabulary entry's column among the weighted ones (-1: unused), their weights, and the SVD basis.
    column: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)
    weight: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32), repr=False)
    basis: np.ndarray = field(default_factory=lambda: np.zeros((1, 0), np.float32), repr=False)
    memo: dict = field(default_factory=dict, repr=False, compare=False)  # the Ward tree cut from it (discover.py)

    @classmethod
    def fit(cls, texts: list[str], tasks: list[str], opts: OfflineConfig | None = None) -> "CriterionSpace":
        """The space of these criteria; Stage 1 and Stage 2a of one run share one fit (cached by content)."""
        opts = opts or OfflineConfig()
        h = hashlib.sha1(repr((opts.model_dump(), list(texts), [str(t) for t in tasks])).encode("utf-8")).hexdigest()
        if h not in _CACHE:
            _CACHE.clear()  # one corpus at a time: a 100k-criterion space is not kept twice
            with threadpool_limits(1):  # small factorisations: BLAS threads only contend on a busy CPU
                _CACHE[h] = cls._fit([t or "" for t in texts], tasks, opts)
        return _CACHE[h]

    @classmethod
    def _fit(cls, texts: list[str], tasks: list[str], opts: OfflineConfig) -> "CriterionSpace":
        try:
            cv = CountVectorizer(
                analyzer=lambda text: features(text, opts.predicate_words),
                lowercase=False,
                dtype=np.float32,
                binary=True,
            )
            x = cv.fit_transform(texts).tocsr()
            vocab = cv.get_feature_names_out().tolist()
        except ValueError:  # no token anywhere (e.g. only digits)
            x, vocab = sp.csr_matrix((len(texts), 0), dtype=np.float32), []
        n = max(len(texts), 1)
        task_ids, task_index = np.unique(np.asarray(tasks, dtype=object), return_inverse=True)
        n_tasks = len(task_ids)
        spread, in_tasks, occurrences = _spread(x, task_index, n_tasks)
        xs, stem_col = _stemmed(x, vocab)
        s_spread, s_in_tasks, s_occurrences = _spread(xs, task_index, n_tasks)
        weight = (np.log((n + 1) / (s_occurrences + 1)) + 1.0) * s_spread
        if n_tasks > 2:
            # A token of one task only says nothing about kinds of check, unless it is all that tells a criterion
            # apart from the others: without it, a small mixed rubric's criteria would read as one.
            shared = (s_in_tasks >= 2) & (weight > 0)
            weight *= shared | (np.asarray(xs[_blurred(xs, shared)].sum(axis=0)).ravel() > 0)
        used = np.flatnonzero(weight > 0)
        # No token shared by two tasks (or none at all): nothing tells kinds apart, so every vector is zero.
        words = (
            normalize(xs[:, used] @ sp.diags(weight[used].astype(np.float32)))
            if used.size
            else sp.csr_matrix((len(texts), 1))
        )
        reduced, basis = _reduce(words, opts.dims)
        vectors = _subtract_task_means(reduced, task_index, opts.task_mean_share)
        where = np.full(len(weight), -1, dtype=np.int64)
        where[used] = np.arange(used.size)
        column = where[stem_col] if len(vocab) else np.zeros(0, np.int64)
        return cls(
            vocab,
            spread,
            in_tasks / max(n_tasks, 1),
            occurrences / n,
            normalize(vectors).astype(np.float32),
            x,
            n_tasks,
            column,
            weight[used].astype(np.float32),
            basis.astype(np.float32),
        )


def _blurred(xs: sp.csr_matrix, kept: np.ndarray) -> np.ndarray:
    """The criteria (rows) whose `kept` columns are the same as those of a criterion with other columns: with
    only those, nothing tells them apart (none kept at all is the commonest case)."""
    seen: dict[bytes, bytes] = {}
    rows = []
    cut = xs[:, kept].tocsr()
    for i in range(xs.shape[0]):
        own = np.sort(xs.indices[xs.indptr[i] : xs.indptr[i + 1]]).tobytes()
        key = np.sort(cut.indices[cut.indptr[i] : cut.indptr[i + 1]]).tobytes()
        rows.append((key, own))
        seen[key] = own if seen.get(key, own) == own else b"*"
    return np.array([i for i, (key, own) in enumerate(rows) if seen[key] == b"*" or not key], dtype=np.int64)


def features(text: str, predicate_words: int) -> list[str]:
    """A criterion's vocabulary entries: its tokens, and "^token" for each of its first `predicate_words`."""
    toks = tokens(text)
    return toks + [f"^{t}" for t in toks[:predicate_words]]


def _spread(x: sp.csr_matrix, task_index: np.ndarray, n_tasks: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per token: observed / expected number of tasks, tasks using it, criteria using it."""
    per_task = (
        sp.csr_matrix((np.ones(len(task_index)), (task_index, np.arange(len(task_index)))), shape=(n_tasks, x.shape[0]))
        @ x
    )
    per_task.data[:] = 1.0
    in_tasks = np.asarray(per_task.sum(axis=0)).ravel()
    occurrences = np.asarray(x.sum(axis=0)).ravel()
    if n_tasks > 1:
        expected = n_tasks * (1.0 - (1.0 - 1.0 / n_tasks) ** occurrences)
        spread = np.clip(in_tasks / np.maximum(expected, 1e-9), 0.0, 1.0)
    else:  # one task: no way to tell topic from check by spread
        spread = np.ones(x.shape[1])
    return spread, in_tasks, occurrences


def _stemmed(x: sp.csr_matrix, vocab: list[str]) -> tuple[sp.csr_matrix, np.ndarray]:
    """Token presence with the tokens of one stem (in one position) folded into one column, and each token's column."""
    keys = [("^" + stem(v[1:])) if v.startswith("^") else stem(v) for v in vocab]
    _, col = np.unique(np.asarray(keys, dtype=object), return_inverse=True)
    fold = sp.csr_matrix(
        (np.ones(len(keys), dtype=np.float32), (np.arange(len(keys)), col)),
        shape=(len(keys), int(col.max()) + 1 if len(keys) else 0),
    )
    xs = (x @ fold).tocsr()
    xs.data[:] = 1.0
    return xs, col.astype(np.int64)


def _reduce(x: sp.csr_matrix, dims: int) -> tuple[np.ndarray, np.ndarray]:
    """(unit vectors, basis): the vectors are normalize(x @ basis.T)."""
    n, d = x.shape
    wanted, dims = dims, min(dims, d - 1, n - 1)
    if dims < 3:  # up to three criteria, or tokens: the token presence itself, where it fits in memory
        basis = np.eye(d, dtype=np.float32) if d <= max(wanted, IDENTITY_MAX) else np.zeros((1, d), np.float32)
        return normalize(np.asarray(x @ basis.T)), basis
    svd = TruncatedSVD(n_components=dims, random_state=0, algorithm="randomized", n_iter=4)
    # Criteria that all read alike have no variance: the explained-variance ratio it divides by is never read here.
    with np.errstate(divide="ignore", invalid="ignore"):
        if n > SVD_FIT_MAX:
            sample = np.random.default_rng(0).choice(n, SVD_FIT_MAX, replace=False)
            return normalize(svd.fit(x[np.sort(sample)]).transform(x)), svd.components_
        return normalize(svd.fit_transform(x)), svd.components_


def _subtract_task_means(v: np.ndarray, task_index: np.ndarray, share: float) -> np.ndarray:
    if share <= 0 or not len(task_index):
        return v
    sums = np.zeros((task_index.max() + 1, v.shape[1]))
    np.add.at(sums, task_index, v)
    sizes = np.bincount(task_index, minlength=len(sums)).astype(float)
    means = sums / np.maximum(sizes, 1)[:, None]
    # A task of one criterion has nothing to subtract: its mean is the criterion itself.
    keep = (sizes > 1)[task_index]
    return v - share * means[task_index] * keep[:, None]
