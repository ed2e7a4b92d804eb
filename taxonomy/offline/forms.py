"""The form a group's criteria are written in: the words most of them use, in their order, the rest elided.

Readers of offline taxonomies asked, every round, what a capability's criteria have in common beyond
a list of phrases. A rubric is written from templates ("The … dataset is loaded in
`src/data_loader.py`", "… is saved as `results/figures/….png`"), so the words a group's criteria share,
kept in the order they are written and with what varies elided, show the check and leave out the
objects it is applied to. A word is the group's own when a share of its criteria use it; a form is a
criterion of the group cut down to those words, and the one shown is the one the most criteria follow,
weighed by how much it says: its words that are neither function words nor in most of the corpus's
criteria (the corpus's grammar in any language, or its usual subject). A form most of whose followers
come from one task is that task's template, not a kind of check, and is not shown. Scripts written
without spaces have no words to keep or elide, so they get no form.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from taxonomy.offline.features import WORD, is_spaceless
from taxonomy.offline.languages import function_words

__all__ = ["Form", "Forms", "word_lists"]

OWN = 0.3          # a word is the group's when at least this share of its criteria use it
CORE = 0.5         # ... and a form is also tried with only the words this share uses
MIN_SHARE = 0.25   # a form shown is followed by at least this share of the group's criteria
MIN_CONTENT = 2    # ... and has at least this many words that are neither function words nor common ones
COMMON = 0.4       # a word in this share of all criteria is the corpus's grammar or its usual subject ("code",
                   # "src"; or the articles of a language no function-word list covers), not a check
MAX_WORDS = 12     # a longer form is one template quoted, not a form
ONE_TASK = 0.5     # a form at least this share of whose followers come from one task is that task's template
CANDIDATES = 40    # the commonest cut-down criteria tried as forms
SAMPLE = 1500      # a bigger group is read through a fixed sample of its criteria
_QUOTES = re.compile(r"[\"'“”‘’`]")
_ALONE = re.compile(r"\s?\w[\s,.;:)]?", re.UNICODE)


@dataclass(frozen=True)
class Form:
    text: str                  # as one criterion writes it, what varies elided: "… is implemented in src/model.py"
    share: float               # share of the group's criteria whose words follow it, in order
    words: tuple[str, ...]     # its words, lower case


def _found(text: str) -> list[re.Match]:
    """The words of `text`; a single letter only when it stands alone ("A model …"), since one joined
    to digits or an apostrophe is a piece of a number, formula or contraction ("1e-3", "user's")."""
    return [m for m in WORD.finditer(text) if len(m.group()) > 1 or _ALONE.fullmatch(text[max(m.start() - 1, 0):m.end() + 1])]


def word_lists(texts: list[str]) -> list[list[str]]:
    """Each criterion's words, lower case."""
    return [[m.group().lower() for m in _found(t or "")] for t in texts]


def _follows(form: tuple[str, ...], words: list[str]) -> bool:
    it = iter(words)
    return all(any(w == x for x in it) for w in form)


def _trimmed(form, function: frozenset[str]) -> tuple[str, ...]:
    form = list(dict.fromkeys(form))  # a word repeated in one criterion is kept where it first appears
    while form and form[-1] in function:
        form.pop()
    return tuple(form)


class Forms:
    """The forms of groups of one corpus's criteria."""

    def __init__(self, texts: list[str], tasks: list[str]):
        self.texts, self.tasks = texts, tasks
        self.many_tasks = len(set(tasks)) > 2
        self.words = word_lists(texts)
        use = Counter(w for ws in self.words for w in set(ws))
        self.function = function_words(texts)
        self.common = self.function | {w for w, k in use.items() if k >= COMMON * len(texts)}

    def _content(self, form: tuple[str, ...]) -> int:
        return sum(w not in self.common for w in form)

    def of(self, rows: np.ndarray) -> Form | None:
        """The form most of `rows` follow, or None when no form reaches MIN_SHARE or the group is written
        without spaces."""
        words = self.words
        if len(rows) == 0:
            return None
        rows = np.sort(rows)
        if len(rows) > SAMPLE:  # fixed, so a rerun shows the same form
            rows = np.sort(np.random.default_rng(0).choice(rows, SAMPLE, replace=False))
        if sum(any(is_spaceless(w) for w in words[i]) for i in rows) * 2 > len(rows):
            return None
        n = len(rows)
        use = Counter(w for i in rows for w in set(words[i]))
        cut = Counter(_trimmed((w for w in words[i] if use[w] >= OWN * n), self.function) for i in rows)
        tried: set[tuple[str, ...]] = set()
        best: tuple[float, float, tuple[str, ...], list[int]] | None = None
        for form, _ in cut.most_common(CANDIDATES):
            for f in (form, _trimmed((w for w in form if use[w] >= CORE * n), self.function), form[:MAX_WORDS]):
                f = _trimmed(f, self.function)
                if f in tried or len(f) > MAX_WORDS or self._content(f) < MIN_CONTENT:
                    continue
                tried.add(f)
                followers = [i for i in rows if _follows(f, words[i])]
                share = len(followers) / n
                if self.many_tasks and followers and Counter(self.tasks[i] for i in followers).most_common(1)[0][1] >= ONE_TASK * len(followers):
                    continue
                score = share * min(self._content(f), 6) ** 0.5  # a form that says more may be followed by fewer
                if share >= MIN_SHARE and (best is None or (score, share) > best[:2]):
                    best = (score, share, f, followers)
        if best is None:
            return None
        _, share, form, followers = best
        shortest = min(followers, key=lambda i: (len(self.texts[i]), i))
        return Form(_written(self.texts[shortest], form), round(share, 3), form)


def _written(text: str, form: tuple[str, ...]) -> str:
    """`text` cut down to the words of `form`, each gap an ellipsis that keeps the punctuation at its
    edges ("results/figures/….png"); quotes are dropped, since a gap may fall between a pair."""
    found = _found(text)
    out: list[str] = []
    j, last, gap = 0, None, False
    for m in found:
        if j < len(form) and m.group().lower() == form[j]:
            if last is None:
                out.append("… " if gap else "")
            else:
                between = text[last.end():m.start()]
                if gap or re.search(r"\d", between):
                    lead, tail = re.match(r"[^\w\s]*", between).group(), re.search(r"[^\w\s]*$", between).group()
                    out.append(" … " if re.search(r"\s", between) else f"{lead}…{tail}")
                else:
                    out.append(between)
            out.append(m.group())
            last, gap, j = m, False, j + 1
        else:
            gap = True
    if gap:
        out.append(" …")
    return " ".join(_QUOTES.sub("", "".join(out)).split())
