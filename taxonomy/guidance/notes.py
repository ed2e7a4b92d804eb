"""The domain-note lines relevant to a capability, so long notes reach each guidance prompt cut to what concerns it."""

from __future__ import annotations

import re

from taxonomy.schemas import Taxonomy, TaxonomyCapability
from taxonomy.text import stem, words

NOTES_MAX_CHARS = 6000  # longer domain notes are cut to the lines relevant to each capability


# ---- words ------------------------------------------------------------------------------
# Words every capability card uses; they say nothing about which capability a note concerns.
_GENERIC = frozenset(
    "the and for with that this from into onto each every any all are was were has have had not but its their "
    "capability capabilities verifier verify verifies verified "
    "verifying check checks checked checking confirm confirms "
    "inspect inspects inspection audit audits validate validates criterion criteria deliverable deliverables agent "
    "whether against must should would could does done when where which what there these those than then also only "
    "same such other more most some given need needs needed required requires require specification spec stated "
    "states task tasks rubric item items evidence judge".split()
)


def _stems(text: str) -> set[str]:
    return {stem(w) for w in words(text) if len(w) >= 4 and w not in _GENERIC}


# ---- relevance of domain-note lines -----------------------------------------------------
def note_lines(notes: str | None) -> list[str]:
    """Content lines of a notes file: bullets and numbering stripped, headings, rules and short lines dropped."""
    out = []
    for raw in (notes or "").splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or set(line) <= set("-=*_`~ "):
            continue
        line = re.sub(r"^(?:[-*+•]\s+|\d+[.)]\s+)", "", line).strip()
        if len(line.split()) >= 3:
            out.append(line)
    return out


NAME_WEIGHT, CARD_WEIGHT, FAMILY_WEIGHT = 2.0, 1.5, 0.75


def capability_keywords(cap: TaxonomyCapability) -> tuple[set[str], set[str], set[str]]:
    """(name and title stems, card stems, key-phrase stems): generic verifier vocabulary removed, each set
    disjoint from the ones before."""
    name = _stems(cap.name.replace("_", " ") + " " + cap.title)
    card = _stems(" ".join([cap.description, cap.diagnostic_signal, cap.example_pattern])) - name
    phrases = _stems(" ".join(cap.key_phrases[:4])) - name - card  # its most telling phrases only
    return name, card, phrases


def relevant_note_lines(
    cap: TaxonomyCapability,
    notes: str | None,
    limit: int | None = None,
    taxonomy: Taxonomy | None = None,
    min_score: float = 1.5,
) -> list[str]:
    """Note lines that share words with the capability; best overlap first, ties in file order.

    A shared word scores 2 if it is in the capability's name or title, 1.5 if in the rest of its card,
    0.75 if only in its key phrases; each score is divided by how many
    capabilities of `taxonomy` use that word, so a word two names share ("output") points at
    neither. A line needs `min_score`: one distinctive word of the name or card, or two of its
    key phrases.
    """
    own = capability_keywords(cap)
    # A word counts against the capabilities that use it at the same place (name, card, phrases):
    # quoted criteria put many words in every card, and must not dilute a word two names share.
    spread: list[dict[str, int]] = [{}, {}, {}]
    for other in taxonomy.capabilities if taxonomy else [cap]:
        for level, vocab in enumerate(capability_keywords(other)):
            for w in vocab:
                spread[level][w] = spread[level].get(w, 0) + 1
    weights = [NAME_WEIGHT, CARD_WEIGHT, FAMILY_WEIGHT]
    scored = []
    for i, line in enumerate(note_lines(notes)):
        words = _stems(line)
        score = sum(weights[level] / spread[level].get(w, 1) for level, vocab in enumerate(own) for w in words & vocab)
        if score >= min_score:
            scored.append((-score, i, line))
    scored.sort()
    return [line for _, _, line in scored[:limit]]


def notes_for_prompt(
    cap: TaxonomyCapability, notes: str | None, max_chars: int = NOTES_MAX_CHARS, taxonomy: Taxonomy | None = None
) -> str | None:
    """The whole notes when short; otherwise the lines relevant to this capability (None if none are)."""
    if not notes or not notes.strip():
        return None
    if len(notes) <= max_chars:
        return notes.strip()
    kept, size = [], 0
    for line in relevant_note_lines(cap, notes, limit=None, taxonomy=taxonomy):
        if size + len(line) > max_chars:
            break
        kept.append(line)
        size += len(line) + 1
    return "\n".join(kept) or None
