"""duplicate: the same check twice in one task (under one parent, in a tree), so its weight counts twice.

Exact after folding case, space and punctuation; near when the folded words differ by one word
that is neither a number nor a negation (those change what is checked)."""

from __future__ import annotations

import re
from collections import defaultdict

from taxonomy.lint.findings import Finding, clip
from taxonomy.lint.grounding import items
from taxonomy.lint.reading import Corpus, Row, fold, pairs
from taxonomy.text import NEGATIONS, normalized

MIN_WORDS = 5  # a one-word change in a shorter criterion is another criterion


def duplicate(c: Corpus) -> list[Finding]:
    folded = {r.idx: tuple(fold(w) for w in normalized(r.text).split()) for r in c.rows}
    # one set per check repeated: same task, parent, folded text and sign
    same: dict[tuple, list[Row]] = defaultdict(list)
    for r in c.rows:
        if folded[r.idx]:
            same[(r.task_id, r.context, normalized(r.text), r.weight < 0)].append(r)
    out = [_repeats(rows) for rows in same.values() if len(rows) + sum(len(r.copies) for r in rows) >= 2]
    return out + _near(c, [rows[0] for rows in same.values()], folded)


def _near(c: Corpus, rows: list[Row], folded: dict) -> list[Finding]:
    """Pairs one word apart, among criteria that are not repeats of each other."""

    def keys(r: Row):
        t = folded[r.idx]
        # One word changed, added or dropped leaves the first or the last h words as they were, h
        # reckoned from the shorter text: (n-1)//2 when this one is the shorter, (n-2)//2 when the longer.
        for h in {(len(t) - 1) // 2, (len(t) - 2) // 2}:
            if h >= 2:
                yield ("head", h, t[:h])
                yield ("tail", h, t[-h:])

    found = [(i, j) for i, j in sorted(pairs(rows, keys)) if (c.rows[i].weight < 0) == (c.rows[j].weight < 0)]
    near: dict[int, set[int]] = defaultdict(set)
    apart = {}
    for i, j in found:
        a, b = c.rows[i], c.rows[j]
        if min(len(folded[i]), len(folded[j])) >= MIN_WORDS and sorted(items(a.text)) == sorted(items(b.text)):
            swapped = _one_word_apart(folded[i], folded[j], c.function)
            if swapped is not None:
                apart[i, j] = swapped
                near[i].add(j)
                near[j].add(i)
    out = []
    for (i, j), swapped in apart.items():
        if _variant(i, j, near, folded):
            continue
        a, b = c.rows[i], c.rows[j]
        # A name added or swapped ("TGAN" / "TGAN+ADA") may as well be another check.
        swapped = swapped or _names_differ(a.text, b.text)
        out.append(
            _finding(
                a,
                b,
                "info" if swapped else "warning",
                "one word apart, but naming different things (perhaps two checks)" if swapped else "one word apart",
            )
        )
    return out


def _repeats(rows: list[Row]) -> Finding:
    """One finding per set of repeats, however many: a file of 400,000 copies gives one line per check."""
    ids = [cid for r in rows for cid in (r.criterion_id, *r.copies)]
    if len(ids) == 2 and len(rows) == 2:
        return _finding(rows[0], rows[1], "error", "the same criterion twice")
    a = rows[0]
    points = sum(abs(r.weight) * (1 + len(r.copies)) for r in rows)
    return Finding(
        "duplicate",
        "error",
        a.task_id,
        ids,
        f"the same criterion {'twice' if len(ids) == 2 else f'{len(ids)} times'}: "
        f'"{clip(a.text, 80)}" ({a.sign}); the check counts {points:g} points',
        a.text,
        "keep one of them (with the weight the check deserves) and delete the others",
    )


def _finding(a: Row, b: Row, severity: str, how: str) -> Finding:
    return Finding(
        "duplicate",
        severity,
        a.task_id,
        [a.criterion_id, b.criterion_id],
        f'{how}: "{clip(a.text, 80)}" ({a.sign}) and "{clip(b.text, 80)}" '
        f"({b.sign}); the check counts {abs(a.weight) + abs(b.weight):g} points",
        f"{a.text} | {b.text}",
        "delete one of them (or merge them into one criterion with the weight the check deserves)",
    )


def _one_word_apart(a: tuple, b: tuple, function: frozenset[str]) -> bool | None:
    """None unless one word is added or dropped, or a function word swapped (and it is neither a number
    nor a negation); then False (True is left for a caller's doubt, see _names_differ)."""
    if abs(len(a) - len(b)) > 1 or a == b:
        return None
    if len(a) == len(b):
        diff = [(x, y) for x, y in zip(a, b) if x != y]
        if len(diff) != 1 or any(_meaningful(w) for w in diff[0]):
            return None
        # A content word swapped ("mean" / "standard" error, "visual" / "text" encoder) is nearly always
        # another check; only a function word swapped is the same one.
        return None if not all(w in function for w in diff[0]) else False
    long, short = (a, b) if len(a) > len(b) else (b, a)
    k = next((n for n, (x, y) in enumerate(zip(long, short)) if x != y), len(short))
    return False if long[:k] + long[k + 1 :] == short and not _meaningful(long[k]) else None


def _variant(i: int, j: int, near: dict[int, set[int]], folded: dict) -> bool:
    """A third criterion one word from both (mean / min / max of one template) makes a family of variants."""
    return any(len(folded[k]) == len(folded[i]) == len(folded[j]) for k in (near[i] & near[j]) - {i, j})


def _names_differ(a: str, b: str) -> bool:
    """The names (capitalised words; the first word only when it holds a second capital, "TGAN") differ."""

    def names(text: str) -> list[str]:
        ws = re.findall(r"[^\W\d_][\w+-]*", text)
        return [w for i, w in enumerate(ws) if w[0].isupper() and (i > 0 or sum(ch.isupper() for ch in w) > 1)]

    return names(a) != names(b)


def _meaningful(word: str) -> bool:
    return word in NEGATIONS or any(ch.isdigit() for ch in word)
