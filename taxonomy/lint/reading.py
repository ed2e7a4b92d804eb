"""How the linter reads one criterion: folded words, negation, opening cue, sentences and clauses.

Every cue list here is English grammar, not a domain: negation words (taxonomy.text.NEGATIONS),
the auxiliaries that carry a negation ("does not"), and verbs that negate what follows them
("fails to"). Which openings go with rewards or penalties is learned from each corpus.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import combinations
from typing import Callable, Iterable

import polars as pl

from taxonomy.text import FUNCTION_WORDS, NEGATIONS, STEM_LETTERS, function_words, stem, words

# "does not recommend" negates "recommends": the auxiliary carries no content of its own.
AUXILIARIES = frozenset("do does did doing".split())
# "fails to mention" negates "mentions"; grammar of implicative verbs, the same in every field.
NEGATING_VERBS = frozenset("fail fails failed failing".split())
LANGUAGE_SAMPLE = 500
# Words that open a subordinate clause (a condition, a reason, a time): English grammar.
SUBORDINATORS = frozenset(
    "if when whenever unless whether because although though while since until before after where".split()
)
_SUBORDINATE = re.compile(r"\b(?:" + "|".join(sorted(SUBORDINATORS)) + r")\b[^,;.:]*", re.I)
_QUOTED = re.compile(r"`[^`]*`|\"[^\"]*\"|“[^”]*”|\$[^$]*\$")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")


@lru_cache(maxsize=None)  # a corpus has some thousands of words and folds each of them hundreds of times
def fold(word: str) -> str:
    """One form per word: long words by their stem, short ones without a plural/3rd-person "s"."""
    if len(word) > STEM_LETTERS:
        return stem(word)
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def main_clause(text: str) -> list[str]:
    """The words of the main clause: quoted terms and subordinate clauses (from "if", "when", "after"
    ... to the next comma) left out, so a "not" inside "if ... not ..." or a name such as "No
    Expansion" negates nothing the criterion asserts."""
    return words(_SUBORDINATE.sub(" ", _QUOTED.sub(" ", text or "")))


def negations(ws: list[str]) -> int:
    """How many times the words negate: negation words and "fail(s) to"."""
    n = sum(w in NEGATIONS for w in ws)
    return n + sum(w in NEGATING_VERBS and nxt == "to" for w, nxt in zip(ws, ws[1:] + [""]))


def core(ws: list[str]) -> tuple[str, ...]:
    """The statement with its negation taken out, folded: a statement and its negation share it."""
    out, skip = [], False
    for w, nxt in zip(ws, ws[1:] + [""]):
        if skip:
            skip = False
            continue
        if w in NEGATING_VERBS and nxt == "to":
            skip = True
            continue
        if w in NEGATIONS or w in AUXILIARIES:
            continue
        out.append(fold(w))
    return tuple(out)


def opening(ws: list[str], function: frozenset[str]) -> str | None:
    """The criterion's first word when it says something ("Fails", "Correctly"); None for "The", "A", "Does"."""
    if not ws or ws[0] in function or ws[0] in NEGATIONS:
        return None
    return ws[0]


def negated_opening(ws: list[str]) -> bool:
    """ "Does not ...", "No ...": rewarding an absence is a legitimate wording ("fails to" is not one)."""
    return any(w in NEGATIONS for w in ws[:3])


def sentences(text: str) -> list[str]:
    """Sentences of a text: split after ".", "!" or "?" when a capital or quote follows."""
    return [s.strip() for s in _SENTENCE.split(text or "") if s.strip()]


@dataclass
class Row:
    """One criterion as the rules read it."""

    idx: int
    criterion_id: str
    task_id: str
    text: str
    weight: float
    brief: str
    context: str  # the ancestor requirements in a tree corpus: the same leaf text under two parents is two checks
    ws: list[str]
    content: set[str] = field(default_factory=set)  # folded content words, set by Corpus.of
    # ids of the rows repeating this one word for word (same task, parent, weight)
    copies: list[str] = field(default_factory=list)
    english: bool = True  # written in English, which the grammar rules read

    @property
    def sign(self) -> str:
        return f"{self.weight:+g}"


@dataclass
class Corpus:
    """The criteria to lint, grouped by task, with what the rules learn from the whole corpus."""

    rows: list[Row]
    function: frozenset[str]
    tasks: dict[str, list[Row]] = field(default_factory=dict)
    capability: dict[str, str] = field(default_factory=dict)  # criterion_id -> primary capability (a run's tags)

    @classmethod
    def of(cls, frame: pl.DataFrame, capability: dict[str, str] | None = None) -> "Corpus":
        """Rows repeated word for word (same task, parent, text and weight) are read once, with their
        copies' ids: a file of repeats costs what its distinct rows cost."""
        unique = _distinct(frame)
        texts = [t or "" for t in unique["text"].to_list()]
        rows = [
            Row(i, ids[0], tid, text, float(w), brief or "", ctx or "", words(text), copies=ids[1:])
            for i, (ids, tid, text, w, brief, ctx) in enumerate(
                zip(
                    unique["criterion_id"].to_list(),
                    unique["task_id"].to_list(),
                    texts,
                    unique["weight"].to_list(),
                    unique["brief"].to_list(),
                    unique["context"].to_list(),
                )
            )
        ]
        # Which languages the corpus uses is clear from a few hundred criteria; reading 3,000 costs seconds.
        function = function_words(texts[:: max(1, len(texts) // LANGUAGE_SAMPLE)])
        other = function - FUNCTION_WORDS
        tasks: dict[str, list[Row]] = {}
        for r in rows:
            r.content = content(r.ws, function)
            r.english = is_english(r.text, r.ws, other)
            tasks.setdefault(r.task_id, []).append(r)
        return cls(rows, function, tasks, capability or {})

    def english_only(self) -> "Corpus":
        """The criteria written in English, renumbered: what the rules that read English grammar see."""
        if all(r.english for r in self.rows):
            return self
        kept = [replace(r, idx=k) for k, r in enumerate(r for r in self.rows if r.english)]
        tasks: dict[str, list[Row]] = {}
        for r in kept:
            tasks.setdefault(r.task_id, []).append(r)
        return Corpus(kept, self.function, tasks, self.capability)


def _distinct(frame: pl.DataFrame) -> pl.DataFrame:
    """One row per (task, parent, text, weight) in first-seen order, its criterion ids listed."""
    if "context" not in frame.columns:
        frame = frame.with_columns(pl.lit("").alias("context"))
    keys = ["task_id", "context", "text", "weight"]
    return (
        frame.select("criterion_id", *keys, pl.col("brief").cast(pl.Utf8))
        .with_columns(pl.col("context").fill_null(""), pl.col("text").fill_null(""))
        .group_by(keys, maintain_order=True)
        .agg(pl.col("criterion_id"), pl.col("brief").first())
    )


def is_english(text: str, ws: list[str], other_function: frozenset[str]) -> bool:
    """Written in English: mostly Latin letters, and not more stop words of another language the
    corpus uses than English function words ("la", "der" are not English; "the", "of" are)."""
    if not text.isascii():  # ASCII text, most of it, is all Latin letters: no need to count them
        letters = [ch for ch in text if ch.isalpha()]
        if not letters:
            return True
        if sum(ch < "\u0250" for ch in letters) < 0.5 * len(letters):
            return False
    english = sum(w in FUNCTION_WORDS and w not in other_function for w in ws)
    return sum(w in other_function and w not in FUNCTION_WORDS for w in ws) <= english


def pairs(rows: list[Row], keys: Callable[[Row], Iterable]) -> set[tuple[int, int]]:
    """Pairs of rows (by idx, smaller first) under one task and parent that share a key: the only
    pairs a rule needs to compare, so a task of 400 criteria costs no 80,000 comparisons."""
    block: dict = defaultdict(list)
    for r in rows:
        for k in set(keys(r)):
            block[(r.task_id, r.context, k)].append(r.idx)
    return {(a, b) for members in block.values() for a, b in combinations(members, 2)}


def content(ws: list[str], function: frozenset[str]) -> set[str]:
    return {fold(w) for w in ws if w not in function and w not in NEGATIONS and w not in NEGATING_VERBS and len(w) > 1}
