"""Words a corpus opens its criteria with interchangeably: one check in several wordings.

Rubric writers vary the verb of one kind of check ("Advises …", "Recommends …", "Suggests …";
"States that …", "Mentions that …", "Notes that …"). Grouped by the verb, such criteria fall into
capabilities a reader cannot tell apart ("recommends" against "advises"), and readers said so in
every round. Two opening words are taken as one family when the words that follow them are
distributed alike (Harris's distributional hypothesis, as Brown clusters or word vectors use it):
each frequent opening word is represented by the words at the next CONTEXT positions after it
(square-root probabilities, so a few frequent contexts do not decide alone), and the words are
grouped by average-linkage cosine agglomeration, cut at SIMILAR.

Only the corpus decides: no list of verbs or synonyms. An opening word counts when it is frequent,
used across tasks (not one task's subject) and not a function word; a family that opens more than
MAX_SHARE of the corpus is its common lead ("Code has been …"), not one kind of check. Scripts
written without spaces have no opening word here, so they get no families.
"""
from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np
from scipy.cluster.hierarchy import fcluster, linkage
from sklearn.preprocessing import normalize

from taxonomy.offline.features import WORD, is_spaceless
from taxonomy.offline.languages import function_words

__all__ = ["Families", "opening_families", "first_word"]

CONTEXT = 2          # words after the opening word that describe how it is used
SIMILAR = 0.45       # cosine similarity of context distributions at which two words are one family (average linkage)
MIN_COUNT = 5        # an opening word starts at least this many criteria ...
MIN_SHARE = 0.002    # ... and this share of the corpus
MIN_TASKS = 3        # ... across at least this many tasks (all of them in a corpus of fewer)
MAX_SHARE = 0.4      # a family opening more than this share of the corpus is its common lead, not a check

_CACHE: dict[str, "Families"] = {}


@dataclass(frozen=True)
class Families:
    """`head[word]`: the family a frequent opening word belongs to, named by its commonest member;
    `members[head]`: its words, commonest first; `forms[word]`: each word as most criteria write it."""

    head: dict[str, str] = field(default_factory=dict)
    members: dict[str, list[str]] = field(default_factory=dict)
    forms: dict[str, str] = field(default_factory=dict)

    def of(self, word: str) -> str | None:
        return self.head.get(word.lower())

    def written(self, head: str) -> str:
        """The family as a reader sees it, every word commonest first: "Advises / Recommends / Suggests"
        (a reader places a criterion by any of them, so none is left out)."""
        return " / ".join(self.forms.get(w, w) for w in self.members[head])


def first_word(text: str) -> tuple[str, str] | None:
    """(lower case, as written) of a criterion's first word of a letter script, or None."""
    m = WORD.search(text or "")
    if m is None or is_spaceless(m.group()):
        return None
    return m.group().lower(), m.group()


def opening_families(texts: list[str], tasks: list[str]) -> Families:
    """The corpus's opening families (cached by content: Stage 1 and the descriptions of one run share them)."""
    h = hashlib.sha1(repr((list(texts), [str(t) for t in tasks])).encode("utf-8")).hexdigest()
    if h not in _CACHE:
        _CACHE.clear()  # one corpus at a time
        _CACHE[h] = _families(texts, [str(t) for t in tasks])
    return _CACHE[h]


def _families(texts: list[str], tasks: list[str]) -> Families:
    count: Counter = Counter()
    written: dict[str, Counter] = defaultdict(Counter)
    in_tasks: dict[str, set[str]] = defaultdict(set)
    context: dict[str, Counter] = defaultdict(Counter)
    function = function_words(texts)
    for text, task in zip(texts, tasks):
        first = first_word(text)
        if first is None or first[0] in function:
            continue
        word = first[0]
        count[word] += 1
        written[word][first[1]] += 1
        in_tasks[word].add(task)
        after = [w.lower() for w in WORD.findall(text)[1:CONTEXT + 1]]
        for offset, w in enumerate(after, 1):
            context[word][(offset, w)] += 1
    n = max(len(texts), 1)
    floor = min(MIN_TASKS, len(set(tasks)))
    words = sorted(w for w, c in count.items() if c >= max(MIN_COUNT, MIN_SHARE * n) and len(in_tasks[w]) >= floor)
    if len(words) < 2:
        return Families()
    keys = sorted({k for w in words for k in context[w]})
    index = {k: i for i, k in enumerate(keys)}
    m = np.zeros((len(words), len(keys)))
    for a, w in enumerate(words):
        for k, c in context[w].items():
            m[a, index[k]] = c
    x = normalize(np.sqrt(m / np.maximum(m.sum(axis=1, keepdims=True), 1)))
    if not np.all(np.linalg.norm(x, axis=1) > 0):
        return Families()
    cut = fcluster(linkage(x, method="average", metric="cosine"), 1.0 - SIMILAR, criterion="distance")
    head: dict[str, str] = {}
    members: dict[str, list[str]] = {}
    for c in np.unique(cut):
        group = sorted((words[i] for i in np.flatnonzero(cut == c)), key=lambda w: (-count[w], w))
        if len(group) < 2 or sum(count[w] for w in group) > MAX_SHARE * n:
            continue
        members[group[0]] = group
        head.update({w: group[0] for w in group})
    forms = {w: written[w].most_common(1)[0][0] for w in head}
    return Families(head, members, forms)
