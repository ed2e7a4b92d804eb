"""The key-less tagger, fitted once on a run's corpus and applied to any criteria (scikit-learn's fit / transform).

`fit` reads what the run already made: the criterion space of its corpus (features.py: vocabulary, stems,
weights, SVD basis), each Stage 1 label's criteria and the taxonomy that holds the labels. It keeps

- the transform: token -> weighted column -> SVD basis -> unit vector, a function of one criterion's text
  alone (no task means, no statistics of the corpus being tagged);
- one prototype per label: the mean vector of the label's criteria, owned by the capability that holds the label;
- one offset per prototype, so that the run's own tags meet the merge's share bounds.

A criterion's scores are, per capability, the best cosine to one of its prototypes plus that prototype's
offset; its tags rank them. Nothing depends on the other criteria tagged with it: a criterion gets the same
tags in the run, alone, or in any subset. `save` / `load` keep the model beside taxonomy.json (`tagger.npz`,
small, versioned, with the taxonomy and corpus it was fitted for, so a stale one is never applied).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.preprocessing import normalize

from taxonomy.config import MergeConfig
from taxonomy.offline.features import CriterionSpace, features
from taxonomy.run import TAGGER
from taxonomy.schemas import Taxonomy

__all__ = ["Tagger", "FORMAT", "label_owners"]

FORMAT = 1
# The cosine to a capability's centroid counts as much as the best to one of its prototypes: prototypes follow
# the fine kinds a capability is made of, the centroid what they share (held-out NMI +0.002 to +0.005 against 0).
CENTROID_WEIGHT = 1.0
CALIBRATION_ROUNDS = 60  # offset steps that bring the run's own shares within the bounds


@dataclass
class Tagger:
    vocabulary: list[str]  # tokens, "^token" in a predicate position
    column: np.ndarray  # per vocabulary entry: its weighted column, -1 when unused
    weight: np.ndarray  # per weighted column
    basis: np.ndarray  # (dims, weighted columns)
    predicate_words: int
    labels: list[str]  # one per prototype
    prototypes: np.ndarray  # (labels, dims), unit rows
    mass: np.ndarray  # per prototype: the norm of its criteria's summed vectors (a centroid weighs them by it)
    offsets: np.ndarray  # per prototype
    names: list[str]  # the taxonomy's capabilities, in order
    owner: np.ndarray  # per prototype: index into names, -1 when no capability holds its label
    fitted_for: dict  # the inputs: taxonomy hash, corpus hash, format
    _memo: tuple | None = field(default=None, repr=False, compare=False)  # (texts' hash, vectors) of the fitted corpus

    # ---- fit ------------------------------------------------------------------------
    @classmethod
    def fit(
        cls,
        space: CriterionSpace,
        texts: list[str],
        own: list[list[str]],
        taxonomy: Taxonomy,
        micro_labels: dict[str, list[str]] | None,
        bounds: MergeConfig | None,
        predicate_words: int,
        corpus_hash: str = "",
    ) -> "Tagger":
        """`space` is the criterion space of the run's corpus `texts`; `own[i]` the Stage 1 labels of criterion i."""
        labels = sorted({label for ls in own for label in ls[:1]})
        tagger = cls(
            space.vocabulary,
            space.column,
            space.weight,
            space.basis,
            predicate_words,
            labels,
            np.zeros((len(labels), space.basis.shape[0]), np.float32),
            np.zeros(len(labels)),
            np.zeros(len(labels)),
            [],
            np.zeros(0, np.int64),
            {},
        )
        vectors = tagger.vectors(space.counts)
        tagger._memo = (hash(tuple(texts)), vectors)
        index = {label: i for i, label in enumerate(labels)}
        sums = np.zeros_like(tagger.prototypes, dtype=np.float64)
        first = np.array([index.get(ls[0], -1) if ls else -1 for ls in own], dtype=np.int64)
        np.add.at(sums, first[first >= 0], vectors[first >= 0])
        tagger.prototypes = normalize(sums).astype(np.float32)
        tagger.mass = np.linalg.norm(sums, axis=1)
        tagger.bind(taxonomy, micro_labels)
        tagger.fitted_for["corpus"] = corpus_hash
        if bounds is not None and len(texts):
            tagger.calibrate(vectors, bounds)
        return tagger

    def bind(self, taxonomy: Taxonomy, micro_labels: dict[str, list[str]] | None = None) -> "Tagger":
        """Owners and names from a taxonomy holding the labels (after a merge, a rename, a split)."""
        self.owner = label_owners(self.labels, taxonomy, micro_labels)
        self.names = taxonomy.names()
        self.fitted_for = {**self.fitted_for, "format": FORMAT, "taxonomy": taxonomy.content_hash, "names": self.names}
        return self

    def calibrate(self, vectors: np.ndarray, bounds: MergeConfig) -> None:
        """Offsets that bring each capability's share of the fitted corpus within the bounds, where a step can:
        a capability over its largest share lowers its prototypes' offsets until enough of its criteria go to
        their next capability; one under its smallest share raises them."""
        n, k = len(vectors), len(self.names)
        if not n or not k:
            return
        best = self._scores(vectors, offsets=False)
        for _ in range(CALIBRATION_ROUNDS):
            scores = best + self._capability_offsets()[None, :]
            share = np.bincount(scores.argmax(axis=1), minlength=k) / n
            over = np.flatnonzero(share > bounds.max_share + 1e-9)
            under = np.flatnonzero((share < bounds.min_share - 1e-9) & np.isfinite(best).any(axis=0))
            if not len(over) and not len(under):
                return
            for c in [*over, *under]:
                self._shift(
                    c,
                    scores,
                    int(np.floor(bounds.max_share * n + 1e-9) if c in over else np.ceil(bounds.min_share * n - 1e-9)),
                )
                scores = best + self._capability_offsets()[None, :]

    def _shift(self, c: int, scores: np.ndarray, target: int) -> None:
        """Move capability c's offsets so that `target` criteria take it as their primary: the offset that puts
        the boundary halfway between the target-th and the next criterion by margin over their best other."""
        others = np.delete(scores, c, axis=1).max(axis=1) if scores.shape[1] > 1 else np.full(len(scores), -np.inf)
        margin = np.sort(scores[:, c] - others)[::-1]
        if not 0 < target <= len(margin) or not np.isfinite(margin[target - 1]):
            return
        nxt = margin[target] if target < len(margin) and np.isfinite(margin[target]) else margin[target - 1] - 1e-3
        self.offsets[self.owner == c] -= (margin[target - 1] + nxt) / 2 - 1e-9

    def _capability_offsets(self) -> np.ndarray:
        out = np.zeros(len(self.names))
        for c in range(len(self.names)):
            held = self.offsets[self.owner == c]
            out[c] = held.max() if len(held) else 0.0
        return out

    # ---- transform --------------------------------------------------------------------
    def transform(self, texts: list[str]) -> np.ndarray:
        """(n, dims) unit vectors, each a function of its own text only."""
        key = hash(tuple(texts))
        if self._memo is not None and self._memo[0] == key:  # the corpus it was fitted on: vectors already made
            return self._memo[1]
        index = {v: i for i, v in enumerate(self.vocabulary)}
        rows, cols = [], []
        for r, text in enumerate(texts):
            found = {j for t in features(text or "", self.predicate_words) if (j := index.get(t)) is not None}
            rows += [r] * len(found)
            cols += sorted(found)
        present = sp.csr_matrix(
            (np.ones(len(rows), np.float32), (rows, cols)), shape=(len(texts), len(self.vocabulary))
        )
        return self.vectors(present)

    def vectors(self, present: sp.csr_matrix) -> np.ndarray:
        """(n, dims) unit vectors from each criterion's token presence over `vocabulary`."""
        n = present.shape[0]
        if not len(self.weight):  # no token of the fitted corpus weighs anything: every vector is zero
            return np.zeros((n, self.basis.shape[0]), np.float32)
        used = np.flatnonzero(self.column >= 0)
        fold = sp.csr_matrix(
            (np.ones(len(used), np.float32), (used, self.column[used])), shape=(len(self.column), len(self.weight))
        )
        x = (present @ fold).tocsr()
        x.data[:] = 1.0
        x = normalize(x @ sp.diags(self.weight))
        return normalize(np.asarray(x @ self.basis.T, dtype=np.float64)).astype(np.float32)

    def _scores(self, vectors: np.ndarray, offsets: bool = True) -> np.ndarray:
        """(n, k): per capability, the best cosine to one of its prototypes (plus that prototype's offset) and
        CENTROID_WEIGHT times the cosine to its centroid; -inf where it has no prototype."""
        sims = vectors @ self.prototypes.T if len(self.prototypes) else np.zeros((len(vectors), 0))
        if offsets:
            sims = sims + self.offsets[None, :]
        out = np.full((len(vectors), len(self.names)), -np.inf)
        for c in range(len(self.names)):  # per capability, not per prototype: a handful of column reductions
            held = self.owner == c
            if held.any():
                out[:, c] = sims[:, held].max(axis=1)
        return out + CENTROID_WEIGHT * (vectors @ self.centroids().T)

    def scores(self, texts: list[str]) -> np.ndarray:
        return self._scores(self.transform(texts))

    def centroids(self) -> np.ndarray:
        """(k, dims): each capability's mean criterion vector, from its prototypes weighted by their criteria."""
        sums = np.zeros((len(self.names), self.prototypes.shape[1]))
        for p, c in enumerate(self.owner.tolist()):
            if c >= 0:
                sums[c] += self.prototypes[p] * self.mass[p]
        return normalize(sums)

    # ---- save / load ------------------------------------------------------------------
    def save(self, folder: Path) -> Path:
        path = Path(folder) / TAGGER
        tmp = path.with_suffix(".tmp.npz")
        meta = {
            "vocabulary": self.vocabulary,
            "labels": self.labels,
            "names": self.names,
            "predicate_words": self.predicate_words,
            "fitted_for": self.fitted_for,
        }
        np.savez(
            tmp,
            meta=np.array(json.dumps(meta, ensure_ascii=False)),
            column=self.column.astype(np.int32),
            weight=self.weight,
            basis=self.basis.astype(np.float32),
            prototypes=self.prototypes,
            mass=self.mass,
            offsets=self.offsets,
            owner=self.owner.astype(np.int32),
        )
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, folder: Path) -> "Tagger | None":
        """The saved model, or None when there is none or it is of another format."""
        path = Path(folder) / TAGGER
        if not path.is_file():
            return None
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            if (meta.get("fitted_for") or {}).get("format") != FORMAT:
                return None
            return cls(
                meta["vocabulary"],
                z["column"].astype(np.int64),
                z["weight"],
                z["basis"],
                int(meta["predicate_words"]),
                meta["labels"],
                z["prototypes"],
                z["mass"],
                z["offsets"].astype(np.float64),
                meta["names"],
                z["owner"].astype(np.int64),
                meta["fitted_for"],
            )

    def fits(self, taxonomy: Taxonomy, corpus_hash: str | None = None) -> bool:
        """Whether this model was fitted for this taxonomy (and, when given, this corpus)."""
        ok = self.fitted_for.get("taxonomy") == taxonomy.content_hash and self.names == taxonomy.names()
        return ok and (corpus_hash is None or self.fitted_for.get("corpus") == corpus_hash)


def label_owners(labels: list[str], taxonomy: Taxonomy, micro_labels: dict[str, list[str]] | None) -> np.ndarray:
    """Per label, the index of the first capability holding it (as a label, a member's label or a member name),
    -1 where none does."""
    owner: dict[str, int] = {}
    for c, cap in enumerate(taxonomy.capabilities):
        for label in [
            *cap.labels,
            *(lab for m in cap.members for lab in (micro_labels or {}).get(m, [])),
            *cap.members,
        ]:
            owner.setdefault(label, c)
    return np.array([owner.get(label, -1) for label in labels], dtype=np.int64)
