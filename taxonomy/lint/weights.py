"""weight-outlier: a weight far from its own task's and from those of similar criteria.

Similar criteria are those of the same capability when a run's tags are given, else the nearest
neighbours by TF-IDF cosine over the whole corpus; both are read with the same sign only.
"""

from __future__ import annotations

from collections import defaultdict
from statistics import median

import numpy as np

from taxonomy.lint.findings import Finding, clip
from taxonomy.lint.reading import Corpus, Row

FAR = 10.0  # more than this many times larger or smaller than both references
NEIGHBOURS = 15
MIN_GROUP = 5  # references made of fewer criteria say nothing
RANGE_FAR = 2.0  # a weight this many times beyond the corpus's usual range of its sign...
RANGE_TASK = 3.0  # ...and this many times its task's median is an outlier as well
RANGE_MIN = 100  # criteria of one sign a corpus needs before its range says anything


def _far(ratio: float) -> bool:
    return ratio > FAR or ratio < 1 / FAR


def weight_outlier(c: Corpus) -> list[Finding]:
    # The task's own weights first: only a weight far from them needs its similar criteria found.
    suspects, beyond = {}, _beyond_the_corpus(c)
    siblings = defaultdict(list)  # the weights beside each criterion: same task, same parent
    for r in c.rows:
        if r.weight:
            siblings[r.task_id, r.context].append(abs(r.weight))
    for r in c.rows:
        if not r.weight:
            continue
        own = list(siblings[r.task_id, r.context])
        own.remove(abs(r.weight))
        if len(own) < 2:
            continue
        ratio = abs(r.weight) / median(own)
        if _far(ratio) or (r.idx in beyond and (ratio > RANGE_TASK or ratio < 1 / RANGE_TASK)):
            suspects[r.idx] = median(own)
    if not suspects:
        return []
    peers = _capability_peers(c, suspects) if c.capability else _neighbour_peers(c, suspects)
    out = []
    for i, own in suspects.items():
        r = c.rows[i]
        similar = [
            abs(c.rows[j].weight)
            for j in peers.get(i, ())
            if (c.rows[j].weight < 0) == (r.weight < 0) and c.rows[j].weight
        ]
        ratio = abs(r.weight) / median(similar) if len(similar) >= MIN_GROUP else 1.0
        if i in beyond or (_far(ratio) and (ratio > 1) == (abs(r.weight) > own)):
            how = "no other criterion of the corpus comes near" if i in beyond else "nearest criteria"
            out.append(
                _finding(
                    r,
                    median(similar) if similar else own,
                    own,
                    "same capability" if c.capability and i not in beyond else how,
                )
            )
    return out


def _beyond_the_corpus(c: Corpus) -> set[int]:
    """Weights more than RANGE_FAR times beyond the corpus's usual range of their sign (its 1st to 99th
    percentile): a 160 in a corpus of 1 to 10 points. Needs a corpus large enough to have a range."""
    out: set[int] = set()
    for penalty in (False, True):
        rows = [(abs(r.weight), r.idx) for r in c.rows if r.weight and (r.weight < 0) == penalty]
        if len(rows) < RANGE_MIN:
            continue
        low, high = np.percentile([w for w, _ in rows], [1, 99])
        out |= {i for w, i in rows if w > RANGE_FAR * high or w * RANGE_FAR < low}
    return out


def _finding(r: Row, similar: float, own: float, how: str) -> Finding:
    return Finding(
        "weight-outlier",
        "warning",
        r.task_id,
        [r.criterion_id],
        f'"{clip(r.text, 90)}" weighs {r.weight:g}; similar criteria '
        f"({how}) weigh {similar:g} (median), the task's others {own:g}",
        r.text,
        f"check the weight: a value near {own:g} fits the task; a typo (an extra digit, a wrong scale) is common",
    )


def _capability_peers(c: Corpus, suspects: dict) -> dict[int, list[int]]:
    groups: dict[str, list[int]] = defaultdict(list)
    for r in c.rows:
        if r.criterion_id in c.capability:
            groups[c.capability[r.criterion_id]].append(r.idx)
    return {i: [j for j in groups.get(c.capability.get(c.rows[i].criterion_id), []) if j != i] for i in suspects}


def _neighbour_peers(c: Corpus, suspects: dict) -> dict[int, list[int]]:
    try:  # content words only: a shared "the" or "of" makes no neighbour
        from sklearn.feature_extraction.text import TfidfVectorizer  # lazy: scikit-learn, about 1 s, for this rule only

        vectors = TfidfVectorizer(analyzer=list, min_df=2).fit_transform([sorted(r.content) for r in c.rows])
    except ValueError:  # no word in two criteria: nothing is similar to anything
        return {}
    asked = sorted(suspects)
    sims = (vectors[asked] @ vectors.T).toarray()
    sims[np.arange(len(asked)), asked] = -1.0  # not its own neighbour
    k = min(NEIGHBOURS, sims.shape[1] - 1)
    top = np.argsort(-sims, axis=1)[:, :k]
    return {i: [int(j) for j in near if sims[row, j] > 0] for row, (i, near) in enumerate(zip(asked, top))}
