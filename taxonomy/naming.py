"""Stage 2b without an LLM: name a micro-cluster of Stage-1 labels and fill its card. Shared by both paths,
so it sits below them: the key-less backend names every cluster with it, the LLM path a cluster whose model
answer failed validation.

The name keeps the words most of the cluster's label mass shares (frequency-weighted), so
the predicate words its criteria have in common name it, not one member; a label carrying
most of the mass names the cluster itself. Taken names get the cluster's next words, then
a letter tag, so naming is unique and reproducible. The card quotes the cluster's own
criteria; nothing comes from a fixed vocabulary.
"""

from __future__ import annotations

import itertools
from collections import defaultdict

from taxonomy.config import LabelRules
from taxonomy.schemas import CapabilityCard
from taxonomy.validate import label_problems

__all__ = ["name_cluster_offline"]

SHARED = 0.4  # a word is the cluster's when it carries this share of the label mass
MAX_OBJECT_WORDS = 3  # short names read as a kind of check, long ones as one member
DOMINANT = 0.6  # a label with this share of the cluster's frequency names it
_FILLER = ("statement", "evidence", "criteria", "requirement")
_TAGS = "abcdefghijklmnopqrstuvwxyz"


def _stem_words(label: str, rules: LabelRules) -> list[str]:
    stem = label[: -len(rules.suffix)] if rules.suffix and label.endswith(rules.suffix) else label
    return [w for w in stem.split("_") if w]


def _suffix_words(rules: LabelRules) -> list[str]:
    return [w for w in rules.suffix.split("_") if w]


def _name_words(members: list[tuple[str, int]], rules: LabelRules) -> tuple[str, list[str], list[str]]:
    """(head word, shared object words in label order, remaining object words by weight)."""
    banned = set(rules.forbidden_tokens) | set(rules.agent_verbs) | set(_suffix_words(rules))
    heads: dict[str, float] = defaultdict(float)
    weight: dict[str, float] = defaultdict(float)
    position: dict[str, float] = defaultdict(float)
    spread: dict[str, int] = defaultdict(int)  # how many members use the word
    total = 0.0
    for label, freq in members:
        words = _stem_words(label, rules)
        if not words:
            continue
        f = float(max(freq, 1))
        total += f
        if words[0] not in banned:
            heads[words[0]] += f
        seen = set()
        for i, w in enumerate(words[1:], 1):
            if w in banned or w in seen or not w.isalpha():
                continue
            seen.add(w)
            spread[w] += 1
            weight[w] += f
            position[w] += f * i / len(words)
    head = max(sorted(heads), key=lambda h: heads[h]) if heads else "check"
    weight.pop(head, None)
    order = lambda w: position[w] / weight[w]  # noqa: E731 - mean relative position in the labels
    # Words several members use outrank one member's words of similar weight.
    ranked = sorted(weight, key=lambda w: (-weight[w] * spread[w] ** 0.5, w))
    shared = sorted([w for w in ranked if weight[w] >= SHARED * total][:MAX_OBJECT_WORDS], key=order)
    rest = [w for w in ranked if w not in shared]
    return head, shared, rest


def _compose(head: str, words: list[str], rules: LabelRules) -> str:
    return "_".join([head, *words]) + rules.suffix


def _candidates(head: str, shared: list[str], rest: list[str], rules: LabelRules):
    n_suffix = len(_suffix_words(rules))
    lo, hi = max(rules.min_words - n_suffix - 1, 1), rules.max_words - n_suffix - 1
    hi_base = min(hi, max(lo, MAX_OBJECT_WORDS))
    fallback = list(_FILLER)
    base = shared[:hi_base]
    for w in rest + fallback:  # still too short: the heaviest other words, then fillers
        if len(base) >= max(lo, 2) or len(base) >= hi_base:
            break
        if w not in base and w != head:
            base.append(w)
    yield _compose(head, base, rules)
    # Taken: make it distinct with the cluster's next words, then with a letter tag.
    extra = [w for w in rest + fallback if w not in base and w != head]
    for w in extra:
        words = base + [w] if len(base) < hi else base[:-1] + [w]
        yield _compose(head, words, rules)
    for a in _TAGS:
        for b in _TAGS:
            tag = ["variant", a + b]
            yield _compose(head, (base + tag)[:hi] if len(base) + 2 <= hi else base[: hi - 2] + tag, rules)


def _card_text(name: str, examples: list[str], rules: LabelRules) -> tuple[str, str, str]:
    readable = " ".join(_stem_words(name, rules)[1:]) or "the stated point"
    shown = [
        e.strip() if len(e.strip()) <= 160 else e.strip()[:157].rstrip() + "..." for e in examples if e and e.strip()
    ]
    description = (
        f"The verifier establishes the kind of point these criteria assert ({readable}), "
        "reading the deliverable for evidence that it holds."
    )
    if shown:
        description += f' For example: "{shown[0]}"'
    signal = f"The criterion is phrased around {readable}" + (f', as in "{shown[1]}".' if len(shown) > 1 else ".")
    pattern = f'"{shown[0]}"' if shown else f"A criterion phrased around {readable}."
    return description, signal, pattern


def name_cluster_offline(
    cluster_id: int,
    members: list[tuple[str, int]],
    examples: list[str],
    rules: LabelRules,
    taken: set[str],
) -> CapabilityCard:
    """A named card for one micro-cluster; the name is valid under `rules` and not in `taken`.

    `members` are (label, frequency) ranked by frequency. The name depends on the members
    and `taken` only, so a rerun names the same cluster the same way.
    """
    head, shared, rest = _name_words(members, rules)
    candidates = _candidates(head, shared, rest, rules)
    total = sum(max(f, 1) for _, f in members)
    if members and max(members[0][1], 1) >= DOMINANT * total:
        candidates = itertools.chain([members[0][0]], candidates)  # one label carries the cluster: keep its name
    name = next((c for c in candidates if not label_problems(c, rules) and c not in taken), None)
    if name is None:
        raise ValueError(
            f"cluster {cluster_id}: no valid unused name under the label rules; fix: widen min_words/max_words"
        )
    description, signal, pattern = _card_text(name, examples, rules)
    return CapabilityCard(
        name=name, description=description, diagnostic_signal=signal, example_pattern=pattern, non_examples=[]
    )
