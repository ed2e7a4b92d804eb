"""What the merge checker and the solver both measure: each capability's members, share and centroid.

Shares are always computed here from the mapping and `micro[i].n_criteria` (the number
of criteria whose dominant micro-cluster is i); numbers a model states are ignored.
When no micro-capability has criteria (all zero) each counts as one, so shares stay defined.
`centroids` rows are aligned with `micro` (row i belongs to micro[i]).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from taxonomy.schemas import MergedCapability, MicroCapability, TaxonomyCapability

EPS = 1e-9


def micro_weights(micro: list[MicroCapability]) -> np.ndarray:
    w = np.array([max(m.n_criteria, 0) for m in micro], dtype=np.float64)
    return w if w.sum() > 0 else np.ones(len(micro))


def pct(x: float) -> str:
    return f"{x * 100:.1f}".rstrip("0").rstrip(".") + "%"


def first_owner_members(proposal: list[MergedCapability], index: dict[str, int]) -> list[list[int]]:
    """Known members per capability; a micro listed more than once counts where it appears first."""
    taken: set[int] = set()
    out = []
    for cap in proposal:
        mine = []
        for name in cap.member_input_names:
            i = index.get(name)
            if i is not None and i not in taken:
                taken.add(i)
                mine.append(i)
        out.append(mine)
    return out


def weighted_centroid(members: list[int], w: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    if not members:
        return np.zeros(centroids.shape[1])
    ww = w[members] if w[members].sum() > 0 else np.ones(len(members))
    c = (ww[:, None] * centroids[members]).sum(axis=0)
    norm = np.linalg.norm(c)
    return c / norm if norm > 0 else c


def micro_index(micro: list[MicroCapability]) -> dict[str, int]:
    index = {m.name: i for i, m in enumerate(micro)}
    if len(index) != len(micro):
        dupes = sorted(n for n, c in Counter(m.name for m in micro).items() if c > 1)
        raise ValueError(
            f"micro-capability names must be unique (Stage 2b guarantees it); repeated: {', '.join(dupes)}"
        )
    return index


def checked_centroids(micro: list[MicroCapability], centroids: np.ndarray) -> np.ndarray:
    centroids = np.asarray(centroids, dtype=np.float64)
    if centroids.ndim != 2 or len(centroids) != len(micro):
        raise ValueError(
            f"centroids must have one row per micro-capability ({len(micro)}), got shape {centroids.shape}; "
            "pass cluster_centroids(...)[[m.cluster_id for m in micro]]"
        )
    return centroids


def capability_similarity(
    proposal: list[MergedCapability], micro: list[MicroCapability], centroids: np.ndarray
) -> np.ndarray:
    """Cosine similarity between capabilities; each capability's centroid is the share-weighted,
    normalised mean of its members' micro centroids. A capability without known members is 0 to all."""
    centroids = checked_centroids(micro, centroids)
    index = micro_index(micro)
    w = micro_weights(micro)
    vecs = []
    for cap in proposal:
        members = list(dict.fromkeys(index[n] for n in cap.member_input_names if n in index))
        vecs.append(weighted_centroid(members, w, centroids))
    c = np.array(vecs).reshape(len(proposal), centroids.shape[1])
    return c @ c.T


def to_taxonomy_capabilities(
    proposal: list[MergedCapability], micro: list[MicroCapability]
) -> list[TaxonomyCapability]:
    """Artifact form: members are the known input names (first mapping wins), share computed from n_criteria."""
    index = micro_index(micro)
    w = micro_weights(micro)
    out = []
    for cap, members in zip(proposal, first_owner_members(proposal, index)):
        out.append(
            TaxonomyCapability(
                name=cap.name,
                description=cap.description,
                diagnostic_signal=cap.diagnostic_signal,
                example_pattern=cap.example_pattern,
                non_examples=list(cap.non_examples),
                members=[micro[i].name for i in members],
                share=round(float(w[members].sum() / w.sum()), 6),
            )
        )
    return out
