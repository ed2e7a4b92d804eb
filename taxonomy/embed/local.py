"""Offline CPU embedder: TF-IDF over words and character n-grams, reduced by truncated SVD.

No model download and no GPU: a fair baseline for short snake_case capability labels.
Character n-grams let `recompute_totals` and
`recomputing_total` land close together; words keep whole-token matches sharp.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.decomposition import TruncatedSVD
from sklearn.feature_extraction.text import CountVectorizer, TfidfTransformer

from taxonomy.embed import l2_normalize

_TOKEN = r"[a-z0-9]+"
# Fitting the SVD costs several sparse passes plus dense factorisations; above this many
# texts a deterministic sample fits the basis and one cheap projection embeds them all.
_SVD_FIT_MAX = 10_000


def _prepare(texts: list[str]) -> list[str]:
    # `_` glues snake_case words into one token; spaces give the tokenizer real words.
    return [t.replace("_", " ").lower() for t in texts]


def _word_counts(docs: list[str]) -> tuple[sp.csr_matrix, list[str]]:
    """Word counts per doc over the words these docs use (not the fitted vocabulary)."""
    cv = CountVectorizer(token_pattern=_TOKEN, lowercase=False, dtype=np.float32)
    try:
        counts = cv.fit_transform(docs)
    except ValueError:  # no token at all
        return sp.csr_matrix((len(docs), 0), dtype=np.float32), []
    return counts.tocsr(), cv.get_feature_names_out().tolist()


class LocalEmbedder:
    """`LocalEmbedder(dim=256, seed=0)`: `fit(texts)` then `embed(texts)`.

    `embed` on an unfitted instance fits on its own input. Output has `dim` columns, or
    fewer when the fitted texts span fewer dimensions (few texts or a tiny vocabulary).
    Rows are unit-norm, except all-zero rows for texts sharing nothing with the fitted
    vocabulary. Deterministic for a given `seed` and fit input.
    """

    def __init__(self, dim: int = 256, seed: int = 0):
        self.dim = dim
        self.seed = seed
        self.name = f"local-tfidf-svd-{dim}"
        self._basis: np.ndarray | None = None  # (n_components, n_features), orthonormal rows

    @property
    def fitted(self) -> bool:
        return self._basis is not None

    def fit(self, texts: list[str]) -> "LocalEmbedder":
        self._fit(_prepare(texts))
        return self

    def embed(self, texts: list[str]) -> np.ndarray:
        docs = _prepare(texts)
        if not self.fitted:
            x = self._fit(docs)
        elif docs:
            x = self._features(docs)
        else:
            return np.zeros((0, self._basis.shape[0]), dtype=np.float32)
        return l2_normalize(np.asarray(x @ self._basis.T))

    # ---- internals ---------------------------------------------------------------
    def _fit(self, docs: list[str]) -> sp.csr_matrix:
        if not docs:
            raise ValueError("LocalEmbedder.fit needs at least one text")
        counts, words = _word_counts(docs)
        if not words:
            raise ValueError("LocalEmbedder: the texts contain no letters or digits to embed")
        self._word_index = {w: i for i, w in enumerate(words)}
        self._chars = CountVectorizer(analyzer="char_wb", ngram_range=(3, 5), lowercase=False, dtype=np.float32).fit(
            words
        )
        self._word_tfidf = TfidfTransformer(sublinear_tf=True).fit(counts)
        self._char_tfidf = TfidfTransformer(sublinear_tf=True).fit(counts @ self._chars.transform(words))
        x = self._features(docs, (counts, words))  # counted once: recounting 1,000,000 labels took ~9 s
        self._basis = self._fit_basis(x)
        return x

    def _features(self, docs: list[str], counted: tuple[sp.csr_matrix, list[str]] | None = None) -> sp.csr_matrix:
        counts, words = counted or _word_counts(docs)
        # Map this call's words onto the fitted word vocabulary; unseen words drop out here.
        known = [(j, self._word_index[w]) for j, w in enumerate(words) if w in self._word_index]
        rows, cols = zip(*known) if known else ((), ())
        select = sp.csr_matrix(
            (np.ones(len(rows), np.float32), (rows, cols)), shape=(len(words), len(self._word_index))
        )
        # char_wb n-grams never cross a word boundary, so a doc's n-gram counts are the sum of
        # its words' counts: n-gram each distinct word once, not every doc (~50x less work).
        # Unseen words still contribute their known n-grams.
        word_chars = (
            self._chars.transform(words)
            if words
            else sp.csr_matrix((0, len(self._chars.vocabulary_)), dtype=np.float32)
        )
        word_block = self._word_tfidf.transform(counts @ select)
        char_block = self._char_tfidf.transform(counts @ word_chars)
        # Both blocks are unit-norm per row, so words and characters weigh the same.
        return sp.hstack([word_block, char_block], format="csr", dtype=np.float32)

    def _fit_basis(self, x: sp.csr_matrix) -> np.ndarray:
        n, f = x.shape
        if min(n, f) <= self.dim:
            # Small input: an exact SVD keeps every direction the texts span.
            _, s, vt = np.linalg.svd(x.toarray().astype(np.float64), full_matrices=False)
            vt = vt[s > 1e-8 * max(s[0], 1e-30)]
            return _fix_signs(vt).astype(np.float32)
        if n > _SVD_FIT_MAX:
            rows = np.sort(np.random.default_rng(self.seed).choice(n, _SVD_FIT_MAX, replace=False))
            x = x[rows]
        svd = TruncatedSVD(
            n_components=min(self.dim, x.shape[0] - 1), algorithm="randomized", n_iter=4, random_state=self.seed
        )
        svd.fit(x)
        return _fix_signs(svd.components_.astype(np.float64)).astype(np.float32)


def _fix_signs(vt: np.ndarray) -> np.ndarray:
    # SVD signs are arbitrary; pin each component so its largest entry is positive.
    idx = np.argmax(np.abs(vt), axis=1)
    signs = np.sign(vt[np.arange(len(vt)), idx])
    return vt * np.where(signs == 0, 1, signs)[:, None]
