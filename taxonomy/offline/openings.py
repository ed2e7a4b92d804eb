"""How a group's criteria typically begin, when that sets the group apart.

Rubric criteria put the check first more often than not ("Fails to …", "Recommends …", "Code has
been …", "是否…"), so a group whose criteria share an opening that the rest of the corpus uses
less is described by it: a reader places a criterion by its first words before anything else.
An opening is the first one to six words of a letter script (not only function words), or
the first two to ten characters of a script written without spaces; only openings that are
common in the group, over-represented in it against the corpus and used across its tasks (not
one task's subject) are shown.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from taxonomy.offline.families import Families
from taxonomy.offline.features import WORD, is_spaceless
from taxonomy.offline.languages import function_words

__all__ = ["Opening", "Openings", "opened", "overlaps", "NEGATIONS"]

MIN_SHARE = 0.12   # an opening shown starts at least this share of the group's criteria
MIN_LIFT = 1.5     # ... and is this many times commoner in the group than in the corpus
LONGER = 0.8       # the two-word opening replaces the one-word one when it keeps this share of it
SHOWN = 2
WORDS = 6          # longest opening, in words ("Code has been executed …"; a corpus-wide lead such as
                   # "The response should …" still leaves room for the words that say the check)
CHARS = 10         # longest opening, in characters, of a script written without spaces
MIN_TASKS = 3      # an opening begins criteria of at least this many of the corpus's tasks
COMMON = 0.15      # an opening of this share of the whole corpus is one a reader expects everywhere ...
SELDOM = 1 / 3     # ... and a group using it at most this fraction as often is told apart by its absence
LEAD_LIFT = 2.0    # ... and a group using it less than this many times as often shows a longer opening of its own instead
# English negations: a name or text that drops one from "Does not mention …" says the opposite.
NEGATIONS = frozenset("not no never without nor cannot doesn don isn aren wasn weren didn won shouldn".split())


@dataclass(frozen=True)
class Opening:
    text: str      # as the criteria write it, e.g. "Fails to"
    share: float   # share of the group's criteria that begin with it
    key: str       # its words, lower case: what two openings are compared by
    lift: float = 1.0  # share / its share of the whole corpus


def _keys(text: str, families: Families, function: frozenset[str]) -> tuple[tuple[str, str], ...]:
    """(key, surface) of the openings of a criterion, shortest first; an opening word of a family
    (families.py) is keyed and written as its family ("advises", “Advises / Recommends / Suggests”)."""
    text = (text or "").strip()
    found = list(WORD.finditer(text))
    if not found:
        return ()
    first = found[0].group()
    if is_spaceless(first):
        # No spaces mark where a word ends, so every length is a candidate; distinctive() keeps the
        # longest that most of a shorter one's criteria continue with ("回答中准确说明了 …", not "回答中准 …").
        return tuple((first[:n], first[:n]) for n in range(2, min(CHARS, len(first)) + 1))
    family = families.of(first)
    if family:  # its family is the opening: "Notes that …" beside "States / Mentions / Notes …" would say it twice
        return ((family, families.written(family)),)
    out = []
    for n in range(1, min(WORDS, len(found)) + 1):
        lead = [m.group() for m in found[:n]]
        if any(is_spaceless(w) for w in lead):
            break
        # "The …" or "For …" says nothing of the check; "Does not …" does
        if any(w.lower() not in function or w.lower() in NEGATIONS for w in lead):
            # shown as written, numbers and punctuation between the words included ("Step 1: Does the")
            out.append((" ".join(lead).lower(), text[:found[n - 1].end()]))
    return tuple(out)


def opened(keys, openings: list[Opening]) -> bool:
    """Whether a criterion with these `Openings.keys` begins with one of the openings."""
    wanted = {o.key for o in openings}
    return any(k in wanted for k, _ in keys)


def overlaps(key: str, others) -> bool:
    """Whether an opening is, begins or is begun by one of `others` ("Code has been …" and "Code has been
    executed …" overlap): two groups with overlapping openings are not told apart by them."""
    return any(_extends(key, o) or _extends(o, key) for o in others)


def _longest(key: str, candidates, counts) -> str:
    """The longest candidate that begins with `key` and keeps LONGER of its count: the opening runs on
    while most of its criteria do ("Code has been executed such that …")."""
    longer = [k for k in candidates if k != key and _extends(k, key) and counts[k] >= LONGER * counts[key]]
    return max(longer, key=len) if longer else key


def _extends(longer: str, shorter: str) -> bool:
    if longer == shorter:
        return True
    sep = "" if is_spaceless(shorter) else " "
    return longer.startswith(shorter + sep)


class Openings:
    """The openings of a corpus, counted once, and the ones that set a group apart."""

    def __init__(self, texts: list[str], tasks: list[str], families: Families = Families()):
        self.function = function_words(texts)  # the corpus's function words, which open no check
        self.keys = [_keys(t, families, self.function) for t in texts]
        self.total = Counter(k for ks in self.keys for k, _ in ks)
        self.n = max(len(texts), 1)
        spread: dict[str, set[str]] = {}
        for ks, task in zip(self.keys, tasks):
            for k, _ in ks:
                spread.setdefault(k, set()).add(task)
        # an opening of fewer tasks than this is a task's own subject ("LBCS has …")
        floor = min(MIN_TASKS, len(set(tasks)))
        self.general = {k for k, ts in spread.items() if len(ts) >= floor}
        # each opening as most of its criteria write it, not as the first one happens to ('"Cross …')
        forms: dict[str, Counter] = {}
        for ks in self.keys:
            for k, form in ks:
                forms.setdefault(k, Counter())[form] += 1
        self.form = {k: c.most_common(1)[0][0] for k, c in forms.items()}

    def seldom(self, rows) -> list[tuple[Opening, float]]:
        """(opening with its share in the group, its share in the corpus) for openings common across
        the corpus that the group seldom uses: what sets a group with no opening of its own apart."""
        m = len(rows)
        if m == 0:
            return []
        counts = Counter(k for r in rows for k, _ in self.keys[r])
        common = sorted((k for k, c in self.total.items() if c / self.n >= COMMON and k in self.general),
                        key=lambda k: (-self.total[k], k))
        out: list[tuple[Opening, float]] = []
        for key in common:
            key = _longest(key, common, self.total)
            if overlaps(key, [o.key for o, _ in out]):
                continue
            if counts[key] / m <= SELDOM * self.total[key] / self.n:
                out.append((self._opening(key, self.form[key], counts[key], m), self.total[key] / self.n))
        return out[:SHOWN]

    def share(self, opening: Opening, rows) -> Opening:
        """The opening with its share counted on these criteria."""
        held = sum(opened(self.keys[r], [opening]) for r in rows)
        return replace(opening, share=held / len(rows) if len(rows) else 0.0)

    def distinctive(self, rows) -> list[Opening]:
        if len(rows) == 0:
            return []
        counts, forms = Counter(), {}
        for r in rows:
            for key, form in self.keys[r]:
                counts[key] += 1
                forms.setdefault(key, Counter())[form] += 1
        m = len(rows)

        def telling(key: str) -> bool:
            share = counts[key] / m
            return share >= MIN_SHARE and share >= MIN_LIFT * self.total[key] / self.n

        def ok(key: str) -> bool:
            # An opening a reader expects everywhere, not much commoner in the group ("Code has been …": 45% of
            # PaperBench, 83% of a group) gives way to a longer one the group has ("Code has been written to …"):
            # shown, it would overlap the other groups' openings and tell none apart.
            corpus = self.total[key] / self.n
            common = corpus >= COMMON and counts[key] / m < LEAD_LIFT * corpus and \
                any(k != key and _extends(k, key) and telling(k) for k in counts)
            return telling(key) and key in self.general and not common

        ranked = sorted((k for k in counts if ok(k)), key=lambda k: (-counts[k], k))
        chosen: list[str] = []
        for key in ranked:
            key = _longest(key, ranked, counts)
            if overlaps(key, chosen):
                continue
            chosen.append(key)
            if len(chosen) == SHOWN:
                break
        return [self._opening(k, forms[k].most_common(1)[0][0], counts[k], m) for k in chosen]

    def _opening(self, key: str, form: str, count: int, m: int) -> Opening:
        """The opening as `count` of a group's `m` criteria begin with it, against the corpus."""
        return Opening(form, count / m, key, count / m * self.n / self.total[key])
