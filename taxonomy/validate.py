"""Programmatic validators. One function per rule; each message tells the model what to fix.

A validator returns a list of messages (empty when the rule holds). Batch validators
return `Violation`s that name the criterion index, so a stage can keep the good items
of a batch and re-ask only about the rest.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable

from taxonomy.config import LabelRules

_SNAKE = re.compile(r"^[a-z]+(?:_[a-z]+)*$")


@dataclass(frozen=True)
class Violation:
    item: int | None  # criterion index in the batch; None for the answer as a whole
    message: str

    def __str__(self) -> str:
        return self.message if self.item is None else f"criterion {self.item}: {self.message}"


# ---- label form ---------------------------------------------------------------------
def check_charset(name: str, rules: LabelRules) -> list[str]:
    if _SNAKE.match(name):
        return []
    return [f"`{name}` must be lower_snake_case using only [a-z_] (no digits, hyphens, spaces or doubled underscores)"]


def check_suffix(name: str, rules: LabelRules) -> list[str]:
    if name.endswith(rules.suffix):
        return []
    return [f"`{name}` must end with `{rules.suffix}`"]


def check_word_count(name: str, rules: LabelRules) -> list[str]:
    n = len([w for w in name.split("_") if w])
    if rules.min_words <= n <= rules.max_words:
        return []
    return [f"`{name}` has {n} words; use {rules.min_words}-{rules.max_words} underscore-separated words counting `capability`"]


def check_head_verb(name: str, rules: LabelRules) -> list[str]:
    head = name.split("_", 1)[0]
    if head not in rules.agent_verbs:
        return []
    return [f"`{name}` starts with the agent-side verb `{head}`; name what the verifier inspects (e.g. inspect, recompute, trace, compare)"]


def check_forbidden_tokens(name: str, rules: LabelRules) -> list[str]:
    bad = [w for w in name.split("_") if w in rules.forbidden_tokens]
    if not bad:
        return []
    return [f"`{name}` contains the tool/format token(s) {', '.join(f'`{b}`' for b in bad)}; restate it without naming a tool, format, runtime or data source"]


LABEL_RULES: tuple[Callable[[str, LabelRules], list[str]], ...] = (
    check_charset, check_suffix, check_word_count, check_head_verb, check_forbidden_tokens,
)


def label_problems(name: str, rules: LabelRules) -> list[str]:
    return [msg for rule in LABEL_RULES for msg in rule(name, rules)]


def check_label_count(labels: list[str], rules: LabelRules) -> list[str]:
    problems = []
    if not rules.min_labels <= len(labels) <= rules.max_labels:
        problems.append(f"give {rules.min_labels}-{rules.max_labels} capability labels, not {len(labels)}")
    if len(set(labels)) != len(labels):
        problems.append("do not repeat a label for the same criterion")
    return problems


# ---- rationale form -----------------------------------------------------------------
_WORD = re.compile(r"[a-z0-9][a-z0-9.%$-]*")
_STOP = frozenset(
    "the a an of to and or in on for with is are be by that this it as at from its their all any "
    "each has have must should not no".split()
)


def check_rationale_prefix(rationale: str, rules: LabelRules) -> list[str]:
    if rationale.strip().lower().startswith(rules.rationale_prefix):
        return []
    return [f'the rationale must start literally with "{rules.rationale_prefix}"']


def _plain(text: str) -> str:
    return " ".join(re.sub(r"[\"'“”‘’`]", "", text.lower()).split())


def check_rationale_grounding(rationale: str, criterion: str) -> list[str]:
    """The rationale must name something concrete from the criterion: a quoted phrase, a number or a content word."""
    body = rationale.lower()
    quoted = re.findall(r"[\"“”`]([^\"“”`]{3,})[\"“”`]", rationale)
    # Quote marks inside the criterion are often dropped when it is quoted; compare without them.
    crit = _plain(criterion)
    if any(_plain(q) and _plain(q) in crit for q in quoted):
        return []
    crit_words = {w.strip(".-") for w in _WORD.findall(crit)} - _STOP
    numbers = {w for w in crit_words if any(ch.isdigit() for ch in w)}
    body_words = {w.strip(".-") for w in _WORD.findall(body)}
    if numbers & body_words:
        return []
    # Two shared content words of 4+ letters count as naming the criterion's concrete subject.
    shared = {w for w in crit_words & body_words if len(w) >= 4}
    if len(shared) >= 2:
        return []
    return ['the rationale must quote a concrete phrase, number or section name from the criterion text, e.g. "…"']


# ---- batch coverage -----------------------------------------------------------------
def check_coverage(indices: Iterable[int], n: int) -> list[Violation]:
    """Every criterion of the batch answered exactly once under its own index."""
    seen: dict[int, int] = {}
    out: list[Violation] = []
    for i in indices:
        if not 0 <= i < n:
            out.append(Violation(None, f"criterion_idx {i} does not exist; use 0..{n - 1}"))
        seen[i] = seen.get(i, 0) + 1
    out += [Violation(i, "answered more than once; answer each criterion exactly once") for i, c in seen.items() if c > 1 and 0 <= i < n]
    out += [Violation(i, "missing from the answer; answer every criterion") for i in range(n) if i not in seen]
    return out


def failed_items(violations: Iterable[Violation], n: int) -> set[int]:
    """Indices a violation pins to an item; a whole-answer violation (item None) fails none by itself."""
    return {v.item for v in violations if v.item is not None and 0 <= v.item < n}
