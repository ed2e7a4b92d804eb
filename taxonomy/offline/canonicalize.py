"""Stage 2b without an LLM: name a micro-cluster of Stage-1 labels and fill its card.

The name keeps the words most of the cluster's label mass shares (frequency-weighted), so
"verify_optimizer_hyperparameter_value" and "verify_batch_iteration_budget_setting"
together become a name about verifying a setting, not about one member; a label carrying
most of the mass names the cluster itself. Taken names get the cluster's next words, then
a letter tag, so naming is unique and reproducible. The card text comes
from the check kind the members belong to (the lexicon's, or the closest by shared words
for labels an LLM wrote).
"""
from __future__ import annotations

import itertools
from collections import defaultdict

from taxonomy.config import LabelRules
from taxonomy.offline import checks
from taxonomy.schemas import CapabilityCard
from taxonomy.validate import label_problems

__all__ = ["name_cluster_offline", "kind_for_labels"]

SHARED = 0.4  # a word is the cluster's when it carries this share of the label mass
MAX_OBJECT_WORDS = 3  # short names read as a kind of check, long ones as one member
DOMINANT = 0.6  # a label with this share of the cluster's frequency names it
_FILLER = ("evidence", "check", "criteria", "requirement")
_TAGS = "abcdefghijklmnopqrstuvwxyz"

# Kinds a reader most often confuses with each kind: the card's non-examples.
NEIGHBOURS: dict[str, tuple[str, ...]] = {
    "implementation_logic": ("configuration_setting", "model_choice"),
    "configuration_setting": ("run_output", "implementation_logic"),
    "run_output": ("configuration_setting", "metric_computation"),
    "metric_computation": ("run_output", "result_trend"),
    "result_trend": ("run_output", "literal_value"),
    "literal_value": ("result_trend", "artifact_location"),
    "data_transformation": ("data_acquisition", "implementation_logic"),
    "data_acquisition": ("data_transformation", "model_choice"),
    "artifact_location": ("visual_presentation", "run_output"),
    "visual_presentation": ("artifact_location", "interactive_behavior"),
    "interactive_behavior": ("visual_presentation", "implementation_logic"),
    "narrative_judgment": ("result_trend", "artifact_location"),
    "logging_trace": ("run_output", "metric_computation"),
    "step_sequence": ("implementation_logic", "configuration_setting"),
    "model_choice": ("implementation_logic", "data_acquisition"),
}


def _stem_words(label: str, rules: LabelRules) -> list[str]:
    stem = label[: -len(rules.suffix)] if rules.suffix and label.endswith(rules.suffix) else label
    return [w for w in stem.split("_") if w]


def _suffix_words(rules: LabelRules) -> list[str]:
    return [w for w in rules.suffix.split("_") if w]


def _kind_vocabulary() -> dict[str, set[str]]:
    vocab = {}
    for k in checks.KINDS:
        words = {k.check} | {w for obj, _ in k.objects for w in obj.split("_")}
        words |= {w.strip(",.()").lower() for w in (k.action + " " + k.summary).split() if len(w) > 3}
        vocab[k.key] = words
    return vocab


_VOCAB = _kind_vocabulary()


def kind_for_labels(members: list[tuple[str, int]], rules: LabelRules) -> checks.CheckKind | None:
    """The check kind carrying most of the members' frequency (lexicon labels first, else shared words)."""
    votes: dict[str, float] = defaultdict(float)
    for label, freq in members:
        key = checks.kind_of_label(label, rules.suffix)
        if key is None:
            words = set(_stem_words(label, rules))
            overlap = {k: len(words & v) for k, v in _VOCAB.items()}
            best = max(overlap.values(), default=0)
            if best == 0:
                continue
            key = min(k for k, v in overlap.items() if v == best)
        votes[key] += max(freq, 1)
    if not votes:
        return None
    return checks.KIND_BY_KEY[max(sorted(votes), key=lambda k: votes[k])]


def _name_words(members: list[tuple[str, int]], rules: LabelRules, kind: checks.CheckKind | None) -> tuple[str, list[str], list[str]]:
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
    head = max(sorted(heads), key=lambda h: heads[h]) if heads else (kind.check if kind else "inspect")
    weight.pop(head, None)
    order = lambda w: position[w] / weight[w]  # noqa: E731 - mean relative position in the labels
    # Words several members use outrank one member's words of similar weight.
    ranked = sorted(weight, key=lambda w: (-weight[w] * spread[w] ** 0.5, w))
    shared = sorted([w for w in ranked if weight[w] >= SHARED * total][:MAX_OBJECT_WORDS], key=order)
    rest = [w for w in ranked if w not in shared]
    return head, shared, rest


def _compose(head: str, words: list[str], rules: LabelRules) -> str:
    return "_".join([head, *words]) + rules.suffix


def _candidates(head: str, shared: list[str], rest: list[str], kind: checks.CheckKind | None, rules: LabelRules):
    n_suffix = len(_suffix_words(rules))
    lo, hi = max(rules.min_words - n_suffix - 1, 1), rules.max_words - n_suffix - 1
    hi_base = min(hi, max(lo, MAX_OBJECT_WORDS))
    kind_words = kind.objects[0][0].split("_") if kind else []
    fallback = kind_words + list(_FILLER)
    base = shared[:hi_base]
    if len(base) < 2 and kind is not None and head == kind.check and len(kind_words) <= hi:
        base = kind_words  # members share little: the kind's own object names them best
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
            yield _compose(head, (base + tag)[: hi] if len(base) + 2 <= hi else base[: hi - 2] + tag, rules)


def _card_text(kind: checks.CheckKind | None, name: str, examples: list[str], rules: LabelRules) -> tuple[str, str, str, list[str]]:
    readable = " ".join(_stem_words(name, rules))
    example = next((e.strip() for e in examples if e and e.strip()), "")
    shown = example if len(example) <= 200 else example[:197].rstrip() + "..."
    if kind is None:
        description = f"The verifier must {readable} in the deliverable to judge the criterion."
        signal = f"The criterion asks to {readable}."
        pattern = f'"{shown}": the verifier must {readable}.' if shown else f"A criterion that asks to {readable}."
        return description, signal, pattern, []
    description = f"The verifier {kind.summary} ({readable})."
    signal = kind.signal[0].upper() + kind.signal[1:] + "." if kind.signal else f"The criterion asks to {kind.action}."
    pattern = f'"{shown}": the verifier needs to {kind.action}.' if shown else f"A criterion where the verifier needs to {kind.action}."
    non_examples = [
        f"Not when the verifier needs to {checks.KIND_BY_KEY[n].action} ({checks.KIND_BY_KEY[n].check}_... capabilities)."
        for n in NEIGHBOURS.get(kind.key, ())
    ]
    return description, signal, pattern, non_examples


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
    kind = kind_for_labels(members, rules)
    head, shared, rest = _name_words(members, rules, kind)
    candidates = _candidates(head, shared, rest, kind, rules)
    total = sum(max(f, 1) for _, f in members)
    if members and max(members[0][1], 1) >= DOMINANT * total:
        candidates = itertools.chain([members[0][0]], candidates)  # one label carries the cluster: keep its name
    name = next((c for c in candidates if not label_problems(c, rules) and c not in taken), None)
    if name is None:
        raise ValueError(f"cluster {cluster_id}: no valid unused name under the label rules; fix: widen min_words/max_words")
    description, signal, pattern, non_examples = _card_text(kind, name, examples, rules)
    return CapabilityCard(name=name, description=description, diagnostic_signal=signal, example_pattern=pattern, non_examples=non_examples)
