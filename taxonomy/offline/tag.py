"""Stage 3 without an LLM: tag each criterion with 1..max_tags capabilities of a taxonomy.

Two paths. In the run that built the taxonomy, a criterion's Stage-1 labels map straight to
capabilities through membership (label -> micro-capability -> capability), first label
first. Against a frozen taxonomy (a new corpus, or labels the taxonomy never saw), the
criterion's labels and text are scored against each capability's card by TF-IDF cosine,
so any corpus can be tagged.
"""
from __future__ import annotations

import re

import numpy as np
import polars as pl
from sklearn.feature_extraction.text import TfidfVectorizer

from taxonomy.schemas import Taxonomy

__all__ = ["tag_offline"]

RANK_WEIGHTS = (1.0, 0.6, 0.4)  # vote of a criterion's 1st, 2nd, 3rd label
LABEL_REPEAT = 3                 # label words count this many times the text's words
KEEP_RATIO = 0.5                 # secondary tags need this share of the top similarity


def _words(name: str) -> str:
    return re.sub(r"_capability$", "", name).replace("_", " ")


def _rank_weight(i: int) -> float:
    return RANK_WEIGHTS[i] if i < len(RANK_WEIGHTS) else RANK_WEIGHTS[-1] / (i - len(RANK_WEIGHTS) + 2)


def _membership(taxonomy: Taxonomy, micro_labels: dict[str, list[str]] | None) -> dict[str, str]:
    """Stage-1 label -> capability name; a label in several capabilities goes to the first listed."""
    out: dict[str, str] = {}
    for cap in taxonomy.capabilities:
        for micro in cap.members:
            for label in (micro_labels or {}).get(micro, []):
                out.setdefault(label, cap.name)
            out.setdefault(micro, cap.name)  # a micro-capability name used as a label maps too
    return out


def _cap_documents(taxonomy: Taxonomy, micro_labels: dict[str, list[str]] | None) -> list[str]:
    docs = []
    for cap in taxonomy.capabilities:
        members = " ".join(_words(m) for m in cap.members)
        member_labels = " ".join(_words(label) for m in cap.members for label in (micro_labels or {}).get(m, []))
        names = " ".join([_words(cap.name)] * LABEL_REPEAT)
        docs.append(" ".join([names, members, member_labels, cap.description, cap.diagnostic_signal, cap.example_pattern]))
    return docs


def _card_similarity(queries: list[str], taxonomy: Taxonomy, micro_labels) -> np.ndarray:
    """(len(queries), k): TF-IDF cosine of each query to each capability's card (0 where they share no word).
    Words are runs of letters of any script: an ASCII pattern dropped every word with an accent ("información")."""
    docs = _cap_documents(taxonomy, micro_labels)
    vec = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2), token_pattern=r"(?u)\b[^\W\d_]{2,}\b", stop_words="english")
    try:
        vec.fit(docs + queries)
    except ValueError:  # no word anywhere
        return np.zeros((len(queries), len(docs)))
    return (vec.transform(queries) @ vec.transform(docs).T).toarray()


def _queries(rows: list[int], ids: list[str], texts: list, by_id: dict) -> list[str]:
    """A criterion's labels (repeated, so they outweigh the text) and its text, as one query."""
    return [" ".join([" ".join(_words(label) for label in (by_id.get(ids[i]) or []))] * LABEL_REPEAT + [texts[i] or ""])
            for i in rows]


def _similarity_tags(queries: list[str], taxonomy: Taxonomy, micro_labels, max_tags: int) -> list[tuple[list[str], float]]:
    names = taxonomy.names()
    out = []
    for row in _card_similarity(queries, taxonomy, micro_labels):
        order = sorted(range(len(names)), key=lambda j: (-row[j], j))
        top = row[order[0]]
        keep = [j for j in order[:max_tags] if row[j] > 0 and row[j] >= KEEP_RATIO * top] or order[:1]
        mass = float(sum(row[j] for j in order[:max_tags]))
        out.append(([names[j] for j in keep], float(top / mass) if mass > 0 else 0.0))
    return out


def _tag_by_phrases(frame: pl.DataFrame, by_id: dict, taxonomy: Taxonomy, micro_labels, max_tags: int) -> list[tuple[list[str], float]]:
    """The offline taxonomy's own scoring model (offline/describe.py): the criterion's Stage 1 labels
    vote, its capability phrases add their weight, the stored offsets apply; probabilities rank the tags."""
    from taxonomy.offline.assign import tag_scores
    from taxonomy.offline.describe import criterion_votes, offline_tag_scores

    ids = frame["criterion_id"].cast(pl.Utf8).to_list()
    votes = criterion_votes(taxonomy, [list(by_id.get(cid) or []) for cid in ids])
    missing = np.flatnonzero(votes.max(axis=1) <= 0)
    if len(missing):  # labels the taxonomy never saw (a new corpus): the card's similarity votes, the best at 1
        sims = _card_similarity(_queries(missing.tolist(), ids, frame["text"].to_list(), by_id), taxonomy, micro_labels)
        votes[missing] = sims / np.maximum(sims.max(axis=1, keepdims=True), 1e-12)
    found = tag_scores(offline_tag_scores(taxonomy, frame, votes), max_tags)
    names = taxonomy.names()
    tags, scores = found.tags, found.scores
    if taxonomy.placement:  # the list taxonomy.md gives readers decides the primary tag wherever a line fits
        from taxonomy.offline.placement import first_lines, lines

        rules = lines(taxonomy)
        first = first_lines(rules, [t or "" for t in frame["text"].to_list()])
        placed = np.array([names.index(r.capability) for r in rules] + [-1], dtype=int)[first]  # -1: no line fits
        tags = [[int(p)] + [c for c in t if c != p][:max_tags - 1] if p >= 0 else t for p, t in zip(placed, tags)]
        # the scores' own confidence in that tag: low where the list overrules them, a borderline case to read
        scores = found.probs[np.arange(len(tags)), [t[0] for t in tags]]
    return [([names[c] for c in t], float(score)) for t, score in zip(tags, scores)]


def tag_offline(
    frame: pl.DataFrame,
    labels: pl.DataFrame,
    taxonomy: Taxonomy,
    micro_labels: dict[str, list[str]] | None,
    max_tags: int,
) -> pl.DataFrame:
    """criterion_id, tags (ranked taxonomy names, 1..max_tags), primary (= tags[0]), score (confidence in [0, 1])."""
    if not taxonomy.capabilities:
        raise ValueError("tag_offline: the taxonomy has no capabilities; fix: build or load a taxonomy first")
    max_tags = max(1, max_tags)
    by_id = dict(zip(labels["criterion_id"].to_list(), labels["labels"].to_list())) if labels.height else {}
    ids = frame["criterion_id"].cast(pl.Utf8).to_list()
    if any(c.key_phrases for c in taxonomy.capabilities):
        results = _tag_by_phrases(frame, by_id, taxonomy, micro_labels, max_tags)
    else:
        results = _tag_by_labels(frame, by_id, taxonomy, micro_labels, max_tags)
    tags = [r[0] for r in results]
    return pl.DataFrame(
        {
            "criterion_id": ids,
            "tags": tags,
            "primary": [t[0] for t in tags],
            "score": [float(np.clip(r[1], 0.0, 1.0)) for r in results],
        },
        schema={"criterion_id": pl.Utf8, "tags": pl.List(pl.Utf8), "primary": pl.Utf8, "score": pl.Float64},
    )


def _tag_by_labels(frame: pl.DataFrame, by_id: dict, taxonomy: Taxonomy, micro_labels, max_tags: int) -> list[tuple[list[str], float]]:
    """A taxonomy without a phrase model (an LLM's): labels map through membership, else card similarity."""
    membership = _membership(taxonomy, micro_labels)
    ids = frame["criterion_id"].cast(pl.Utf8).to_list()
    texts = frame["text"].to_list()

    results: list[tuple[list[str], float] | None] = []
    pending: list[int] = []
    for i, cid in enumerate(ids):
        own = list(by_id.get(cid) or [])
        votes: dict[str, float] = {}
        total = sum(_rank_weight(r) for r in range(len(own)))
        for rank, label in enumerate(own):
            cap = membership.get(label)
            if cap is not None:
                votes[cap] = votes.get(cap, 0.0) + _rank_weight(rank)
        if votes and own and own[0] in membership:
            ranked = sorted(votes, key=lambda c: -votes[c])  # stable: first label's capability wins ties
            results.append((ranked[:max_tags], votes[ranked[0]] / total))
        else:
            results.append(None)
            pending.append(i)

    if pending:
        for i, res in zip(pending, _similarity_tags(_queries(pending, ids, texts, by_id), taxonomy, micro_labels, max_tags)):
            results[i] = res
    return results
