"""Stage 1 without an LLM: 1-3 verifier-side labels and a grounded rationale per criterion.

Labels come from the check-kind lexicon (checks.py); the rationale names what the verifier
does and quotes the part of the criterion that made the lexicon pick the kind.
"""
from __future__ import annotations

import re

import polars as pl

from taxonomy.config import LabelRules
from taxonomy.offline import checks
from taxonomy.validate import check_rationale_grounding, label_problems

__all__ = ["discover_offline", "label_criterion", "conform_label"]

# A secondary kind must score at least this share of the primary's score to be listed.
SECONDARY_RATIO = 0.6
SECONDARY_MIN = 0.8

_QUOTES = "\"'“”‘’`"
_BREAK = re.compile(f"[{_QUOTES}\\n\\r]")
_CONTEXT_BEFORE, _CONTEXT_AFTER = 40, 60
_MAX_PHRASE = 120


def conform_label(label: str, rules: LabelRules) -> str | None:
    """A lexicon label rewritten to satisfy `rules` (suffix, word count, banned words); None if impossible."""
    default_suffix = "_capability"
    stem = label[: -len(default_suffix)] if label.endswith(default_suffix) else label
    suffix_words = [w for w in rules.suffix.split("_") if w]
    banned = set(rules.forbidden_tokens)
    words = [w for w in stem.split("_") if w and w not in banned]
    while words and words[0] in rules.agent_verbs:
        words = words[1:]
    room = rules.max_words - len(suffix_words)
    if len(words) > room:
        # Keep the check word and the last (head) nouns of the object.
        words = words[:1] + words[len(words) - room + 1:] if room > 1 else words[:room]
    while len(words) + len(suffix_words) < rules.min_words:
        words.append("evidence")
    out = "_".join(words) + rules.suffix
    return out if not label_problems(out, rules) else None


def _segment(text: str, pos: int) -> tuple[int, int]:
    """The stretch of `text` around `pos` bounded by quote characters or line breaks."""
    start = max((m.end() for m in _BREAK.finditer(text, 0, pos)), default=0)
    nxt = _BREAK.search(text, pos)
    return start, nxt.start() if nxt else len(text)


def _trim(text: str, start: int, end: int) -> str:
    """text[start:end] snapped inward to whole words, stripped of edge punctuation."""
    if start > 1 and text[start - 1] in _QUOTES and text[start - 2].isalnum():
        start += 1  # the tail of "robot's" is not a word of its own: skip past it below
    if start > 0 and text[start - 1].isalnum():
        while start < end and text[start].isalnum():
            start += 1
    if end < len(text) and text[end].isalnum():
        while end > start and text[end - 1].isalnum():
            end -= 1
    return text[start:end].strip(" ,;:.()[]{}-")


def _candidates(text: str, span: tuple[int, int]):
    s, e = span
    if e > s:
        seg_s, seg_e = _segment(text, s)
        yield _trim(text, max(seg_s, s - _CONTEXT_BEFORE), min(seg_e, e + _CONTEXT_AFTER, s + _MAX_PHRASE))
    segments, start = [], 0
    for m in _BREAK.finditer(text):
        segments.append((start, m.start()))
        start = m.end()
    segments.append((start, len(text)))
    for seg_s, seg_e in sorted(segments, key=lambda se: se[0] - se[1]):  # longest first
        yield _trim(text, seg_s, min(seg_e, seg_s + _MAX_PHRASE))


def _rationale(text: str, kinds: list[checks.CheckKind], span: tuple[int, int], rules: LabelRules) -> str:
    body = f"{rules.rationale_prefix} {kinds[0].action}"
    also = "; it also needs to " + " and to ".join(k.action for k in kinds[1:]) if len(kinds) > 1 else ""
    tried = []
    for phrase in _candidates(text, span):
        if len(phrase) < 3:
            continue
        rationale = f'{body} to confirm "{phrase}"{also}.'
        if not check_rationale_grounding(rationale, text):
            return rationale
        tried.append(rationale)
    return tried[0] if tried else f'{body} to confirm "{text.strip()}"{also}.'


def label_criterion(text: str, category: str | None, rules: LabelRules, cache: dict | None = None) -> tuple[list[str], str]:
    """(labels, rationale) for one criterion; the labels are ranked, most confident first.

    `cache` (lexicon label -> label under `rules`) may be shared across calls with the same rules.
    """
    conformed = {} if cache is None else cache
    hits = checks.detect(text, category)
    top = hits[0].score
    chosen, labels = [], []
    for i, hit in enumerate(hits):
        if len(labels) >= rules.max_labels:
            break
        if i and (hit.score < SECONDARY_MIN or hit.score < SECONDARY_RATIO * top):
            break
        raw = checks.label_for(hit.kind, text)
        if raw not in conformed:
            conformed[raw] = conform_label(raw, rules)
        label = conformed[raw]
        if label and label not in labels:
            labels.append(label)
            chosen.append(checks.KIND_BY_KEY[hit.kind])
    if not labels:  # rules too strict for every object variant: the primary kind's default object
        kind = checks.KIND_BY_KEY[hits[0].kind]
        label = conform_label(f"{kind.check}_{kind.objects[0][0]}_capability", rules)
        labels, chosen = [label or f"{kind.check}_{kind.objects[0][0]}{rules.suffix}"], [kind]
    return labels, _rationale(text, chosen, hits[0].span, rules)


def discover_offline(frame: pl.DataFrame, rules: LabelRules) -> pl.DataFrame:
    """Stage-1 table (criterion_id, labels, rationale) for every row of a criterion frame."""
    categories = frame["category"].to_list() if "category" in frame.columns else [None] * frame.height
    conformed: dict[str, str | None] = {}
    rows = [label_criterion(t or "", c, rules, conformed) for t, c in zip(frame["text"].to_list(), categories)]
    return pl.DataFrame(
        {
            "criterion_id": frame["criterion_id"].cast(pl.Utf8),
            "labels": [labels for labels, _ in rows],
            "rationale": [rationale for _, rationale in rows],
        },
        schema={"criterion_id": pl.Utf8, "labels": pl.List(pl.Utf8), "rationale": pl.Utf8},
    )
