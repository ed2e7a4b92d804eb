"""The merge bounds a corpus can meet.

The paper's taxonomy has 8-10 capabilities holding 2-40% of the criteria each. A capability is made of whole
criteria, and criteria worded alike are one check that no merge can part (the tagger reads a criterion by its
text), so what a corpus can hold follows its distinct criteria, not its rows: four checks repeated over ten
tasks make at most four capabilities, of 25% each. Where the configured bounds can be met they stand; where
they cannot, the run takes the nearest bounds its distinct criteria can meet (at most one capability per
distinct criterion, and the shares a balanced grouping of them gives) and says why in one line.

Both backends merge under the bounds `corpus_bounds` returns, and the run records them as its merge settings,
so the checks, the tagger, `edit` and the report all read the same ones.
"""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter
from functools import lru_cache
from typing import Sequence

from taxonomy.config import MergeConfig
from taxonomy.merge.measures import pct
from taxonomy.text import normalized

__all__ = ["BOUND_KEYS", "corpus_bounds", "distinct_counts", "recorded_bounds"]

BOUND_KEYS = ("min_caps", "max_caps", "min_share", "max_share")
_DIGITS = re.compile(r"\d+")
_ROUND = 10_000  # shares are written with four decimals, rounded outwards so the grouping found still fits


def distinct_counts(texts: Sequence[str | None]) -> list[int]:
    """Rows per distinct criterion (case, space, punctuation and numbers folded), largest first."""
    return list(_counts(tuple(t or "" for t in texts)))


@lru_cache(maxsize=2)
def _counts(texts: tuple[str, ...]) -> tuple[int, ...]:
    # A run reads them twice (when the session opens, and at the merge): the corpus is folded once. Criteria that
    # differ only in their numbers ("fact number 1", "fact number 2") are one kind of check: no reading of their
    # words can part them into capabilities.
    return tuple(sorted(Counter(normalized(_DIGITS.sub("#", t)) for t in texts).values(), reverse=True))


def _balanced(counts: list[int], k: int) -> list[int]:
    """The totals of k groups when each distinct criterion, largest first, joins the lightest group (LPT),
    largest total first; every group gets one when there are at least k."""
    heap = [(0, g) for g in range(k)]
    for c in counts:
        total, g = heapq.heappop(heap)
        heapq.heappush(heap, (total + c, g))
    return sorted((total for total, _ in heap), reverse=True)


def _span(lo: int, hi: int) -> str:
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def corpus_bounds(
    merge: MergeConfig, texts: Sequence[str | None], kinds: Sequence[int] | None = None
) -> tuple[MergeConfig, str | None]:
    """(bounds, why): `merge` itself and None when the corpus's distinct criteria can meet it; else the nearest
    bounds they can meet and the one line that says why (None when only max_caps came down to the number of
    distinct criteria, still within the configured range). Applied to its own result it changes nothing.

    `kinds`: the criteria of each micro-capability, once Stage 2 has grouped them; where it found fewer kinds
    of check than there are distinct criteria (a model may judge two wordings one check), the merge can make
    no more capabilities than that, and the bounds follow the kinds."""
    counts = distinct_counts(texts)
    units = sorted((k for k in kinds or () if k > 0), reverse=True)
    grouped = 0 < len(units) < len(counts)
    weights = units if grouped else counts
    n, d = sum(weights), len(weights)
    if not d:
        return merge, None
    lo, hi = min(merge.min_caps, d), min(merge.max_caps, d)
    best: tuple[float, float, float] | None = None
    for k in range(hi, lo - 1, -1):  # on a tie, more capabilities
        groups = _balanced(weights, k)
        top = max(merge.max_share, math.ceil(groups[0] / n * _ROUND - 1e-6) / _ROUND)
        bottom = min(merge.min_share, math.floor(groups[-1] / n * _ROUND + 1e-6) / _ROUND)
        cost = (top - merge.max_share) + (merge.min_share - bottom)
        if best is None or cost < best[0] - 1e-12:
            best = (cost, bottom, top)
    assert best is not None
    bounds = merge.model_copy(update={"min_caps": lo, "max_caps": hi, "min_share": best[1], "max_share": best[2]})
    if all(getattr(bounds, key) == getattr(merge, key) for key in BOUND_KEYS):
        return merge, None
    if all(getattr(bounds, key) == getattr(merge, key) for key in BOUND_KEYS if key != "max_caps"):
        return bounds, None  # fewer distinct criteria than max_caps, but enough for the bounds: nothing to say
    rows, distinct = len(texts), len(counts)
    what = f"{distinct} distinct criteria ({rows} rows)" if distinct < rows else f"{rows} {_criteria(rows)}"
    if grouped:
        what += f", which Stage 2 grouped into {d} {'kind' if d == 1 else 'kinds'} of check,"
    why = (
        f"{what} cannot make {_span(merge.min_caps, merge.max_caps)} capabilities of "
        f"{pct(merge.min_share)}-{pct(merge.max_share)} each (a capability holds whole criteria, and criteria "
        f"worded alike are one), so this run allows {_span(lo, hi)} "
        f"{'capability' if hi == 1 else 'capabilities'} of {pct(bounds.min_share)}-{pct(bounds.max_share)}"
    )
    return bounds, why


def _criteria(n: int) -> str:
    return "criterion" if n == 1 else "criteria"


def recorded_bounds(manifest: dict, merge: MergeConfig) -> MergeConfig:
    """The bounds a run's merge was held to (its stage record keeps them where Stage 2's kinds narrowed the
    run's settings), else `merge`: what `edit` and the report check a taxonomy against."""
    kept = ((manifest.get("stages") or {}).get("merge") or {}).get("bounds")
    return merge.model_copy(update={k: kept[k] for k in BOUND_KEYS if k in kept}) if kept else merge
