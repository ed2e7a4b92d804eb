"""Programmatic validators. One function per rule; each message tells the model what to fix.

A validator returns a list of messages (empty when the rule holds). Batch validators
return `Violation`s that name the criterion index, so a stage can keep the good items
of a batch and re-ask only about the rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable

from taxonomy.config import LabelRules
from taxonomy.text import NAME_STOP_WORDS, PHRASE_STOP_WORDS

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
    return [
        f"`{name}` has {n} words; use {rules.min_words}-{rules.max_words} "
        "underscore-separated words counting `capability`"
    ]


def check_head_verb(name: str, rules: LabelRules) -> list[str]:
    head = name.split("_", 1)[0]
    if head not in rules.agent_verbs:
        return []
    return [
        f"`{name}` starts with the agent-side verb `{head}`; name what "
        "the verifier inspects (e.g. inspect, recompute, trace, compare)"
    ]


@lru_cache(maxsize=65536)
def _forbidden_hits(word: str, safe_stems: tuple[str, ...], forbidden: tuple[str, ...]) -> tuple[str, ...]:
    """Tokens found anywhere in one word of the name, after blanking the safe stems it contains.
    Cached: the offline path validates 100,000 criteria whose labels share a few hundred words."""
    masked = word
    for stem in safe_stems:
        masked = masked.replace(stem, "_" * len(stem))
    return tuple(t for t in forbidden if t in masked)


def check_forbidden_tokens(name: str, rules: LabelRules) -> list[str]:
    """Anywhere in the name, as the paper says: `pdfs_...`, `apis_...` and `sqlite_...` are caught too.

    Matching runs inside each word (lower-cased, letters only), never across the underscore between
    two words, so `data_pipeline` does not hide an `api`."""
    hits = {}
    safe_stems, forbidden = tuple(rules.token_safe_stems), tuple(rules.forbidden_tokens)
    for word in re.findall(r"[a-z]+", name.lower()):
        for token in _forbidden_hits(word, safe_stems, forbidden):
            hits.setdefault(token, word)
    if not hits:
        return []
    found = ", ".join(f"`{t}`" + (f" (in `{w}`)" if w != t else "") for t, w in hits.items())
    return [
        f"`{name}` contains the tool/format token(s) {found}; restate it "
        "without naming a particular tool, format, runtime or data source "
        "(the plain words tool, file, format, data and source are fine; say what "
        "the verifier inspects, e.g. `document_page_layout_inspection_capability`)"
    ]


def _name_words(name: str, rules: LabelRules) -> list[str]:
    stem = name[: -len(rules.suffix)] if rules.suffix and name.endswith(rules.suffix) else name
    return [w for w in stem.lower().split("_") if w]


def check_not_only_stop_words(name: str, rules: LabelRules) -> list[str]:
    words = _name_words(name, rules)
    if any(w not in NAME_STOP_WORDS for w in words):
        return []
    return [
        f"`{name}` is made only of stop words; name the check and what it "
        "inspects, e.g. `cross_section_consistency_checking_capability`"
    ]


def check_generic_virtue(name: str, rules: LabelRules) -> list[str]:
    """A name needs specific words, not only generic virtues (`accuracy`, `quality`, `overall`, `good`)."""
    words = _name_words(name, rules)
    content = [w for w in words if w not in NAME_STOP_WORDS]
    if not content:
        return []  # check_not_only_stop_words says it
    generic = set(rules.generic_words)
    specific = [w for w in content if w not in generic]
    if len(specific) >= rules.min_specific_words:
        return []
    vague = [w for w in content if w in generic]
    return [
        f"`{name}` leans on the generic virtue(s) {', '.join(f'`{v}`' for v in vague)} "
        f"and names only {len(specific)} specific word(s) "
        f"(need {rules.min_specific_words}); a capability is a "
        "verifier skill, not a virtue: say which check and on what, "
        "e.g. `numeric_value_recomputation_capability` instead of `overall_accuracy_check_capability`"
    ]


LABEL_RULES: tuple[Callable[[str, LabelRules], list[str]], ...] = (
    check_charset,
    check_suffix,
    check_word_count,
    check_head_verb,
    check_forbidden_tokens,
    check_not_only_stop_words,
    check_generic_virtue,
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
# Kana and Han characters carry no spaces between words: each character counts as one word.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+(?:[.,][0-9]+)*")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*%?")
_QUOTED = re.compile(r"[\"“”`«»「」『』]([^\"“”`«»「」『』]{1,200})[\"“”`«»「」『』]")
# Single quotes ('term', ‘term’) quote a term only where they open after no letter and close before none:
# an apostrophe inside or after a word ("don't", "the agents' reports") is not a quote mark.
_SINGLE_QUOTED = re.compile(r"(?<!\w)['‘]((?:[^'‘’\n]|(?<=\w)['’](?=\w)){1,200}?)['’](?!\w)")
# Identifiers, file names, paths, dotted names: `results.csv`, `train_model`, `src/app.py`, `learningRate`.
_IDENT = re.compile(r"[A-Za-z][\w-]*(?:[._/:][\w-]+)+|[a-z]+[A-Z]\w*")
MIN_PHRASE_WORDS = 3


def check_rationale_prefix(rationale: str, rules: LabelRules) -> list[str]:
    if rationale.strip().lower().startswith(rules.rationale_prefix):
        return []
    return [f'the rationale must start literally with "{rules.rationale_prefix}"']


def _words(text: str) -> list[str]:
    return [w.lower() for w in _TOKEN.findall(text)]


def _phrases(words: list[str], n: int) -> set[tuple[str, ...]]:
    """Every run of n consecutive words holding at least one word that is not a stop word."""
    return {
        tuple(words[i : i + n])
        for i in range(len(words) - n + 1)
        if any(w not in PHRASE_STOP_WORDS for w in words[i : i + n])
    }


def criterion_literals(criterion: str) -> set[str]:
    """Numbers, quoted strings and identifiers in a criterion: quoting one verbatim grounds a rationale."""
    found = set(_NUMBER.findall(criterion)) | set(_IDENT.findall(criterion))
    found |= {q.strip() for q in _QUOTED.findall(criterion) + _SINGLE_QUOTED.findall(criterion) if len(q.strip()) >= 2}
    return found


@lru_cache(maxsize=4096)
def _criterion_index(criterion: str) -> tuple[list[str], frozenset, frozenset]:
    """A criterion's words, phrases and literals, computed once: the offline path tries several rationales per
    criterion."""
    words = _words(criterion)
    return (
        words,
        frozenset(_phrases(words, min(MIN_PHRASE_WORDS, len(words)))),
        frozenset(criterion_literals(criterion)),
    )


def check_rationale_grounding(rationale: str, criterion: str, prefix: str = "the verifier needs to") -> list[str]:
    """The rationale quotes the criterion: a contiguous phrase of 3+ of its words, or one of its
    numbers or literals, verbatim. Shared loose words or a paraphrase do not count.

    Words are compared case-insensitively with punctuation ignored; kana and Han characters are one
    word each, so a criterion in Chinese or Japanese is quoted by 3+ consecutive characters."""
    body = rationale.strip()
    if body.lower().startswith(prefix):
        body = body[len(prefix) :]
    crit_words, crit_phrases, literals = _criterion_index(criterion)
    if not crit_words:
        return []  # nothing to quote (an empty criterion is rejected when the corpus loads)
    n = min(MIN_PHRASE_WORDS, len(crit_words))
    body_words = _words(body)
    if crit_phrases & _phrases(body_words, n) or (
        n < MIN_PHRASE_WORDS and " ".join(crit_words) in " ".join(body_words)
    ):
        return []
    body_numbers = {x.rstrip("%") for x in _NUMBER.findall(body)}
    for literal in literals:
        if _NUMBER.fullmatch(literal):
            if literal.rstrip("%") in body_numbers:
                return []
        # whole, not inside a longer word; case ignored, as for phrases
        elif re.search(rf"(?<!\w){re.escape(literal)}(?!\w)", body, re.IGNORECASE):
            return []
    runs = [tuple(crit_words[i : i + n]) for i in range(len(crit_words) - n + 1)]
    example = next((r for r in runs if sum(w not in PHRASE_STOP_WORDS for w in r) >= 2), runs[0])
    joiner = "" if all(re.fullmatch(f"[{_CJK}]", w) for w in example) else " "
    return [
        f"the rationale must quote the criterion verbatim: at least {MIN_PHRASE_WORDS} consecutive words of it "
        f'(e.g. "{joiner.join(example)}"), or a number, file name or term it puts in '
        "quotes of any kind, whole; shared loose words or a paraphrase do not count"
    ]


# ---- distinct within the rubric category ----------------------------------------------
_ENDINGS = ("ations", "ation", "ings", "ing", "ies", "es", "ed", "al", "s", "e", "y")


def stem_word(word: str) -> str:
    """Inflection off: `recomputation`/`recomputing`, `values`/`value`, `numeric`/`numerical` agree."""
    for end in _ENDINGS:
        if word.endswith(end) and len(word) - len(end) >= 3:
            return word[: -len(end)]
    return word


def label_gist(name: str, rules: LabelRules) -> tuple[str, ...]:
    """The content of a name regardless of word order and inflection."""
    return tuple(sorted(stem_word(w) for w in _name_words(name, rules) if w not in NAME_STOP_WORDS))


def check_distinct_in_batch(
    labels: dict[int, list[str]], rules: LabelRules, category: str | None = None
) -> list[Violation]:
    """The paper: labels are "distinct from sibling capabilities WITHIN this same rubric category".
    Two different names with the same words up to order and inflection are paraphrases: the same
    check must carry one name, different checks must differ in substance. The later item is blamed."""
    where = f"rubric category `{category}`" if category else "this batch"
    first: dict[tuple[str, ...], tuple[int, str]] = {}
    out: list[Violation] = []
    for idx in sorted(labels):
        for name in labels[idx]:
            gist = label_gist(name, rules)
            if not gist:
                continue
            if gist in first and first[gist][1] != name:
                j, other = first[gist]
                whose = "this criterion's own" if j == idx else f"criterion {j}'s"
                out.append(
                    Violation(
                        idx,
                        f"`{name}` paraphrases {whose} `{other}` within {where}; if it is the same check use "
                        f"`{other}` exactly, otherwise name how the check differs",
                    )
                )
            first.setdefault(gist, (idx, name))
    return out


# ---- batch coverage -----------------------------------------------------------------
def check_coverage(indices: Iterable[int], n: int) -> list[Violation]:
    """Every criterion of the batch answered exactly once under its own index."""
    seen: dict[int, int] = {}
    out: list[Violation] = []
    for i in indices:
        if not 0 <= i < n:
            out.append(Violation(None, f"criterion_idx {i} does not exist; use 0..{n - 1}"))
        seen[i] = seen.get(i, 0) + 1
    out += [
        Violation(i, "answered more than once; answer each criterion exactly once")
        for i, c in seen.items()
        if c > 1 and 0 <= i < n
    ]
    out += [Violation(i, "missing from the answer; answer every criterion") for i in range(n) if i not in seen]
    return out


def failed_items(violations: Iterable[Violation], n: int) -> set[int]:
    """Indices a violation pins to an item; a whole-answer violation (item None) fails none by itself."""
    return {v.item for v in violations if v.item is not None and 0 <= v.item < n}
