"""The key-less backend's capabilities, titled and shown by their own criteria.

After the merge settles which micro-clusters form each capability, a criterion belongs to the
capability that holds its Stage 1 label (tag.py). Each capability is then shown by:

- a title: its characteristic phrases (represent.py: class-based TF-IDF, diversified, once per title);
- a name: `check_<the title's words>_capability`, valid under the label rules and unique;
- representative criteria, quoted as written;
- boundaries against its nearest siblings, by the two titles' phrases.

Nothing here says what a capability checks, since no model read the criteria; `written_by = "offline"`
marks every text as drawn from the corpus, and a person can add the meaning (`taxonomy edit describe`).
"""
from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import polars as pl

from taxonomy.config import LabelRules, PipelineConfig
from taxonomy.offline.kinds import ascii_word
from taxonomy.offline.represent import ClassTfidf, MaximalMarginalRelevance, OncePerTitle, PhraseSpace, Term, representative
from taxonomy.offline.tag import capability_scores
from taxonomy.schemas import Taxonomy
from taxonomy.text import corpus_languages, function_words, language_name, words
from taxonomy.validate import label_problems

__all__ = ["describe_offline"]

QUOTE_CHARS = 180
NAME_WORDS = 3       # words of a name after `check`: a longer one reads as one member
_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "eleventh", "twelfth")


def _ascii_words(text: str) -> list[str]:
    """The words of a phrase as a name may spell them (labels are [a-z_] by rule)."""
    return [a for a in (ascii_word(w) for w in words(text)) if len(a) >= 2 and a.isalpha()]


def _quote(text: str) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 1].rsplit(" ", 1)[0] + " …"


def _phrases(terms: list[Term]) -> str:
    parts = [f"“{t.text}”" for t in terms]
    return ", ".join(parts[:-1]) + " or " + parts[-1] if len(parts) > 1 else "".join(parts)


def _name(terms: list[Term], rules: LabelRules, banned: set[str], taken: set[str], rank: int) -> str:
    """`check_<title words>_capability`, padded with grammar when short; an ordinal kind when no phrase
    yields a valid unused name (a script without Latin letters, or words the label rules forbid)."""
    room = min(NAME_WORDS, rules.max_words - len([w for w in rules.suffix.split("_") if w]) - 1)
    words = list(dict.fromkeys(w for t in terms for w in _ascii_words(t.text) if w not in banned))
    candidates = [words[:n] for n in range(min(2, len(words)), room + 1)] + [["for", *words][:room]] if words else []
    candidates += [[_ORDINALS[(rank + i) % len(_ORDINALS)], "kind"] for i in range(len(_ORDINALS))]
    for cand in candidates:
        name = "_".join(["check", *cand]) + rules.suffix
        if name not in taken and not label_problems(name, rules):
            return name
    raise ValueError("no valid offline capability name; fix: widen labels.min_words/max_words")


def _titles(texts: list[str], tasks: list[str], groups: list[np.ndarray], top: int) -> tuple[PhraseSpace, list[list[Term]]]:
    space = PhraseSpace.fit(texts, tasks)
    terms: list[list[Term]] = [[] for _ in groups]
    for step in (ClassTfidf(pool=40), MaximalMarginalRelevance(diversity=0.5, top=2 * top), OncePerTitle(top=top)):
        terms = step(space, groups, terms)
    return space, [[replace(t, text=space.written(t.col)) for t in ts] for ts in terms]


def _renamed(repairs: list[str], renamed: dict[str, str]) -> list[str]:
    """The merge's notes in the final names."""
    return [re.sub(r"`([^`]+)`", lambda m: f"`{renamed.get(m.group(1), m.group(1))}`", note) for note in repairs]


def describe_offline(taxonomy: Taxonomy, criteria: pl.DataFrame, stage1: pl.DataFrame, cfg: PipelineConfig,
                     siblings: list[list[int]]) -> Taxonomy:
    """The taxonomy with every capability titled, named and shown by its criteria. Members stay; shares become
    those of the primary tags Stage 3 gives; `siblings[c]` are capability c's nearest siblings, which its
    boundaries name."""
    texts = [t or "" for t in criteria["text"].to_list()]
    tasks = criteria["task_id"].cast(pl.Utf8).to_list()
    by_id = dict(zip(stage1["criterion_id"].to_list(), stage1["labels"].to_list()))
    own = [list(by_id.get(i) or []) for i in criteria["criterion_id"].cast(pl.Utf8).to_list()]
    primary = capability_scores(criteria, own, taxonomy, None, cfg.offline, cfg.merge)[0].argmax(axis=1)  # as Stage 3 tags
    k = len(taxonomy.capabilities)
    groups = [np.flatnonzero(primary == c) for c in range(k)]
    space, terms = _titles(texts, tasks, groups, cfg.offline.title_phrases)
    banned = set(cfg.labels.agent_verbs) | {"check", "capability"} | function_words(texts)
    caps = [c.model_copy(deep=True) for c in taxonomy.capabilities]
    for c, cap in enumerate(caps):
        cap.share = round(len(groups[c]) / max(len(texts), 1), 6)
    taken: set[str] = set()
    for rank, c in enumerate(sorted(range(k), key=lambda c: -len(groups[c]))):
        caps[c].name = _name(terms[c], cfg.labels, banned, taken, rank)
        taken.add(caps[c].name)
    shown = cfg.offline.shown_criteria
    for c, cap in enumerate(caps):
        picks = representative(space, groups[c], terms[c], texts, tasks, shown + 1)
        quotes = [f"“{_quote(texts[i])}”" for i in picks]
        top = max((t.score for t in terms[c]), default=0.0) or 1.0
        cap.title = " · ".join(t.text for t in terms[c])
        cap.key_phrases, cap.phrase_weights = [t.text for t in terms[c]], [round(t.score / top, 4) for t in terms[c]]
        cap.description = "Criteria such as " + "; ".join(quotes[:shown]) if quotes else "No criterion of this corpus."
        cap.diagnostic_signal = (f"Its criteria use {_phrases(terms[c])} more often than the rest of the corpus does."
                                 if terms[c] else "No phrase sets its criteria apart.")
        cap.example_pattern = quotes[-1] if quotes else ""
        cap.non_examples = [f"if the criterion uses {_phrases(terms[s][:2])} rather than {_phrases(terms[c][:2])}, prefer `{caps[s].name}`."
                            if terms[s] and terms[c] else f"if the criterion reads more like `{caps[s].name}`'s criteria, prefer it."
                            for s in siblings[c][:2]]
    out = taxonomy.model_copy(deep=True)
    out.capabilities = caps
    out.written_by = "offline"
    out.function_words_of = ["English"] + [language_name(code) for code in corpus_languages(texts) if code != "en"]
    out.placement, out.placement_hash = [], ""
    out.repairs = _renamed(list(taxonomy.repairs), {a.name: b.name for a, b in zip(taxonomy.capabilities, caps)})
    out.content_hash = out.compute_hash()
    return out
