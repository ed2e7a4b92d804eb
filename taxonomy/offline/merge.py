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
from collections import Counter
from dataclasses import replace
from typing import Callable

import numpy as np
import polars as pl
from anyascii import anyascii

from taxonomy.config import LabelRules, PipelineConfig
from taxonomy.offline.discover import ascii_word
from taxonomy.offline.represent import (
    MIN_CRITERIA,
    ClassTfidf,
    MaximalMarginalRelevance,
    OncePerTitle,
    PhraseSpace,
    Term,
    WholeWords,
    representative,
)
from taxonomy.schemas import Taxonomy
from taxonomy.text import corpus_languages, function_words, is_spaceless, language_name, words
from taxonomy.validate import label_gist, label_problems

__all__ = ["describe_offline", "describe_groups"]

QUOTE_CHARS = 180
NAME_WORDS = 3  # words of a name after `check`: a longer one reads as one member
_CLAUSE = re.compile(r"[，、。；：,;:!?！？]")
_SYLLABLE = re.compile(r"[A-Z][a-z]*")
# A run of Han or of katakana, as Chinese and Japanese write most content words (a run holding hiragana is mostly the
# grammar between words; pieces of Thai or Hangul cut words).
_SCRIPT_RUN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]{2,}|[\u30a0-\u30ff]{2,}")


def _ascii_words(text: str) -> list[str]:
    """The words of a phrase as a name may spell them (labels are [a-z_] by rule)."""
    return [a for a in (ascii_word(w) for w in words(text)) if len(a) >= 2 and a.isalpha()]


def _quote(text: str) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 1].rsplit(" ", 1)[0] + " …"


def _phrases(terms: list[Term]) -> str:
    parts = [f"“{t.text}”" for t in terms]
    return ", ".join(parts[:-1]) + " or " + parts[-1] if len(parts) > 1 else "".join(parts)


def _name(sources: list[Callable[[], list[str]]], rules: LabelRules, banned: set[str], taken: set[str]) -> str:
    """`check_<words>_capability`, valid under the label rules and unused, its words those of the capability's own
    criteria: the title's words, then its labels' (read only when those gave no name), then its criteria's, then
    the corpus's; a corpus of one word names it twice. No paraphrase of a name already given: two names with the
    same words up to order and inflection are one name, as Stage 1's paraphrase rule has it. The last source is
    the way out where the criteria's words make no valid name (a lone generic word such as "Accuracy")."""
    room = min(NAME_WORDS, rules.max_words - len([w for w in rules.suffix.split("_") if w]) - 1)
    gists = {label_gist(name, rules) for name in taken}
    words: list[str] = []
    for k, source in enumerate(sources):  # each read only when the ones before it gave no name
        words += [w for w in dict.fromkeys(source()) if w not in banned and w not in words]
        cands = [words[:n] for n in range(2, room + 1)]
        cands += [[a, b] for i, a in enumerate(words[:8]) for b in words[i + 1 : 8]]
        cands += [[w, w] for w in words[:1]] if k == len(sources) - 2 else []
        for cand in cands:
            name = "_".join(["check", *cand]) + rules.suffix
            if name not in taken and label_gist(name, rules) not in gists and not label_problems(name, rules):
                return name
    raise ValueError("no valid offline capability name; fix: widen labels.min_words/max_words")


def _label_words(labels: list[str], rules: LabelRules) -> list[str]:
    counts = Counter(w for label in labels for w in label.removesuffix(rules.suffix).split("_")[1:] if len(w) >= 3)
    return [w for w, _ in counts.most_common()]


def _spelt_in(found: list[str], texts: list[str]) -> list[str]:
    """The words the criteria spell (in [a-z], as a name does): a label's fallback words are none of theirs."""
    spelt = ascii_word(" ".join(texts).replace(" ", "")) if texts else ""
    return [w for w in found if w in spelt]


def _criterion_words(texts: list[str]) -> list[str]:
    counts = Counter(a for t in texts for a in _ascii_words(t) if len(a) >= 3)
    return [w for w, _ in counts.most_common()]


def _syllables(texts: list[str]) -> list[str]:
    """The syllables a script written without spaces spells in [a-z] ("退款" -> "tui", "kuan"): words of a
    criterion where its runs give one word too few."""
    counts = Counter(
        s.lower() for t in texts for w in words(t) if is_spaceless(w) for s in _SYLLABLE.findall(anyascii(w))
    )
    return [w for w, _ in counts.most_common() if len(w) >= 2]


def _quoted_title(texts: list[str]) -> str:
    """A title that quotes a criterion, for a group none of whose phrases is a whole word (a script written
    without spaces): the shortest of them, cut only where its own punctuation ends a clause."""
    text = min((" ".join(t.split()) for t in texts if t.strip()), key=len, default="")
    if len(text) > QUOTE_CHARS // 3:
        stops = [m.end() for m in _CLAUSE.finditer(text[: QUOTE_CHARS // 3])]
        text = text[: stops[-1]].rstrip("，、,;；：: ") + " …" if stops else text
    return f"“{text}”" if text else ""


def _titles(
    texts: list[str], tasks: list[str], groups: list[np.ndarray], top: int
) -> tuple[PhraseSpace, list[list[Term]]]:
    """Each group's title phrases. A piece of a script written without spaces may cut a word in half, so it
    never titles a group (the group's title then quotes its criteria)."""
    space = PhraseSpace.fit(texts, tasks)
    terms: list[list[Term]] = [[] for _ in groups]
    steps = (
        ClassTfidf(pool=40),
        WholeWords(glued=False),
        MaximalMarginalRelevance(diversity=0.5, top=2 * top),
        WholeWords(),
        OncePerTitle(top=top),
    )
    for step in steps:
        terms = step(space, groups, terms)
    return space, [[replace(t, text=space.written(t.col)) for t in ts] for ts in terms]


def _signal(space: PhraseSpace, groups: list[np.ndarray], g: int, terms: list[Term]) -> str:
    """The cue in a criterion that calls for group g: its title phrases; where none is a whole word (a script
    written without spaces), the runs of Han or katakana its criteria use more than the rest, said to be runs;
    else what keeps a phrase from saying it."""
    if terms:
        return f"Its criteria use {_phrases(terms)} more often than the rest of the corpus does."
    ranked = ClassTfidf(pool=40)(space, groups, [[] for _ in groups])
    spaceless = any(is_spaceless(space.keys[t.col]) for t in ranked[g])
    ranked = [[t for t in ts if _SCRIPT_RUN.fullmatch(space.keys[t.col])] for ts in ranked]
    runs = [replace(t, text=space.written(t.col)) for t in MaximalMarginalRelevance(top=3)(space, groups, ranked)[g]]
    if runs:
        return (
            f"Its criteria contain {_phrases(runs)} more often than the rest of the corpus does (runs of characters "
            "of a script written without spaces, which may be parts of longer words)."
        )
    if spaceless:
        return (
            "Its criteria are written without spaces between words, and no run of characters they share more than "
            "the rest of the corpus reads as a word; the criteria quoted above show what it checks."
        )
    return (
        f"No phrase sets its criteria apart: none is used by {MIN_CRITERIA} or more of its {len(groups[g])} "
        "criteria more than by the rest of the corpus; the criteria quoted above show what it checks."
    )


def _renamed(repairs: list[str], renamed: dict[str, str]) -> list[str]:
    """The merge's notes in the final names."""
    return [re.sub(r"`([^`]+)`", lambda m: f"`{renamed.get(m.group(1), m.group(1))}`", note) for note in repairs]


def describe_groups(
    criteria: pl.DataFrame, groups: list[np.ndarray], labels: list[list[str]], cfg: PipelineConfig, taken: set[str]
) -> tuple[list[dict], list[list[Term]]]:
    """Each group of criteria (row indices) titled, named (unique, not in `taken`) and shown by its own criteria:
    the fields of its card, largest group named first; and its title terms. `labels[g]` are the Stage 1 labels
    its criteria carry, a name's second source of words."""
    texts = [t or "" for t in criteria["text"].to_list()]
    tasks = criteria["task_id"].cast(pl.Utf8).to_list()
    space, terms = _titles(texts, tasks, groups, cfg.offline.title_phrases)
    banned = set(cfg.labels.agent_verbs) | {"check", "capability"} | function_words(texts)
    cards: list[dict] = [{} for _ in groups]
    taken = set(taken)
    for g in sorted(range(len(groups)), key=lambda g: -len(groups[g])):
        title_words = [w for t in terms[g] for w in _ascii_words(t.text)]
        sources = [
            lambda tw=title_words: tw,
            lambda g=g: _spelt_in(_label_words(labels[g], cfg.labels), [texts[i] for i in groups[g]]),
            lambda g=g: _criterion_words([texts[i] for i in groups[g]]),
            lambda g=g: _syllables([texts[i] for i in groups[g]]),
            lambda: _criterion_words(texts),
            lambda g=g: _label_words(labels[g], cfg.labels),
        ]
        cards[g]["name"] = _name(sources, cfg.labels, banned, taken)
        taken.add(cards[g]["name"])
    shown = cfg.offline.shown_criteria
    for g, card in enumerate(cards):
        picks = representative(space, groups[g], terms[g], texts, tasks, shown + 1)
        quotes = [f"“{_quote(texts[i])}”" for i in picks]
        top = max((t.score for t in terms[g]), default=0.0) or 1.0
        card.update(
            title=" · ".join(t.text for t in terms[g]) or _quoted_title([texts[i] for i in picks]),
            key_phrases=[t.text for t in terms[g]],
            phrase_weights=[round(t.score / top, 4) for t in terms[g]],
            description="Criteria such as " + "; ".join(quotes[:shown]) if quotes else "No criterion of this corpus.",
            diagnostic_signal=_signal(space, groups, g, terms[g]),
            example_pattern=quotes[-1] if quotes else "",
        )
    return cards, terms


def describe_offline(
    taxonomy: Taxonomy, criteria: pl.DataFrame, primary: np.ndarray, cfg: PipelineConfig, siblings: list[list[int]]
) -> Taxonomy:
    """The taxonomy with every capability titled, named and shown by its criteria. Members stay; shares become
    those of the primary tags Stage 3 gives (`primary[i]`: criterion i's capability); `siblings[c]` are
    capability c's nearest siblings, which its boundaries name."""
    texts = [t or "" for t in criteria["text"].to_list()]
    k = len(taxonomy.capabilities)
    groups = [np.flatnonzero(primary == c) for c in range(k)]
    cards, terms = describe_groups(criteria, groups, [c.labels for c in taxonomy.capabilities], cfg, set())
    caps = [
        c.model_copy(deep=True, update={**card, "share": round(len(groups[i]) / max(len(texts), 1), 6)})
        for i, (c, card) in enumerate(zip(taxonomy.capabilities, cards))
    ]
    for c, cap in enumerate(caps):
        cap.non_examples = [
            f"if the criterion uses {_phrases(terms[s][:2])} rather "
            f"than {_phrases(terms[c][:2])}, prefer `{caps[s].name}`."
            if terms[s] and terms[c]
            else f"if the criterion reads more like `{caps[s].name}`'s criteria, prefer it."
            for s in siblings[c][:2]
        ]
    out = taxonomy.model_copy(deep=True)
    out.capabilities = caps
    out.written_by = "offline"
    out.function_words_of = ["English"] + [language_name(code) for code in corpus_languages(texts) if code != "en"]
    out.repairs = _renamed(list(taxonomy.repairs), {a.name: b.name for a, b in zip(taxonomy.capabilities, caps)})
    out.content_hash = out.compute_hash()
    return out
