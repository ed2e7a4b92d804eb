"""An ordered list of rules a reader can apply to place a criterion as the offline tagger does.

The tagger scores a criterion by its Stage 1 labels and phrases, which no reader can redo by
hand. What a reader can do is check a criterion's first words and its words, in order, and stop
at the first rule that fits. The rules are learned from the tags (a greedy decision list, as
CN2 or RIPPER build one): each step takes the opening or phrase whose not yet placed criteria
go mostly to one capability, preferring the rule that places the most of them for the fewest
misplaced, and each rule states how many of the criteria it catches it places as the tagger does.
A phrase rule uses only a phrase of the capability's own title: a stray word that happens to
sort criteria ("time", "following") would read as what the capability checks, and readers
took it so. Criteria no rule fits are left to the descriptions, and the list says how many.
"""
from __future__ import annotations

import numpy as np

from taxonomy.offline.openings import Openings
from taxonomy.offline.phrases import PhraseSpace
from taxonomy.schemas import PlacementRule

__all__ = ["placement_rules", "MAX_RULES", "MIN_PRECISION"]

MAX_RULES = 20        # a list a reader scans per criterion, not a classifier
MIN_PRECISION = 0.8   # of the criteria a rule catches, this share goes where it says
MISPLACED_COST = 3    # a rule is worth the criteria it places right less this many per one it places wrong
MIN_CAUGHT = 0.01     # a rule catches at least this share of the corpus (and at least 3 criteria)


def _features(openings: Openings, space: PhraseSpace, least: int) -> list[tuple[str, str, np.ndarray]]:
    """(kind, text as written, the criteria that have it) for every opening and phrase common enough."""
    starts: dict[str, list[int]] = {key: [] for key, count in openings.total.items() if count >= least}
    for i, keys in enumerate(openings.keys):
        for key, _ in keys:
            if key in starts:
                starts[key].append(i)
    out = [("opens", openings.form[key], np.asarray(rows)) for key, rows in sorted(starts.items())]
    x = space.x.tocsc()
    for j, surface in enumerate(space.surface):
        rows = x.indices[x.indptr[j]:x.indptr[j + 1]]
        if len(rows) >= least:
            out.append(("uses", surface, np.asarray(rows)))
    return out


def placement_rules(primary: np.ndarray, names: list[str], openings: Openings, space: PhraseSpace,
                    titles: list[set[str]]) -> list[PlacementRule]:
    """Up to MAX_RULES rules, in the order a reader applies them, for the criteria tagged `primary`;
    `titles[c]` are the phrases (as `space` writes them) capability c's title shows."""
    n, k = len(primary), len(names)
    least = max(3, int(np.ceil(MIN_CAUGHT * n)))
    features = _features(openings, space, least)
    open_ = np.ones(n, bool)
    rules: list[PlacementRule] = []
    while len(rules) < MAX_RULES:
        best = None
        for f, (kind, text, rows) in enumerate(features):
            rows = rows[open_[rows]]
            if len(rows) < least:
                continue
            counts = np.bincount(primary[rows], minlength=k)
            c = int(counts.argmax())
            right = int(counts[c])
            if right < MIN_PRECISION * len(rows) or (kind == "uses" and text not in titles[c]):
                continue
            # Of two that place alike, the longer opening says more ("Cross-validation is used …", not "Cross …")
            # and the shorter phrase carries over to criteria not seen ("preprocessing", not "preprocessing including").
            worth = (right - MISPLACED_COST * (len(rows) - right), len(text) if kind == "opens" else -len(text))
            if best is None or worth > best[0]:
                best = (worth, f, c, right, len(rows))
        if best is None:
            break
        _, f, c, right, caught = best
        kind, text, rows = features[f]
        open_[rows] = False
        rules.append(PlacementRule(kind=kind, text=text, capability=names[c], caught=caught, right=right))
    return rules
