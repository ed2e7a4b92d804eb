"""Offline guidance drafts from a capability's own criteria, and the domain-note lines relevant to a capability."""
from __future__ import annotations

import re

from taxonomy.guidance.model import MAX_ITEMS, GuidanceAnswer
from taxonomy.schemas import Taxonomy, TaxonomyCapability

NOTES_MAX_CHARS = 6000  # longer domain notes are cut to the lines relevant to each capability
NOTE_LINES_PER_CAP = 3  # domain-note lines an offline draft quotes per capability


# ---- words ------------------------------------------------------------------------------
_TOKEN = re.compile(r"[a-z][a-z0-9]+")
# Words every capability card uses; they say nothing about which capability a note concerns.
_GENERIC = frozenset(
    "the and for with that this from into onto each every any all are was were has have had not but its their "
    "capability capabilities verifier verify verifies verified verifying check checks checked checking confirm confirms "
    "inspect inspects inspection audit audits validate validates criterion criteria deliverable deliverables agent "
    "whether against must should would could does done when where which what there these those than then also only "
    "same such other more most some given need needs needed required requires require specification spec stated "
    "states task tasks rubric item items evidence judge".split()
)


def _stem(word: str) -> str:
    """A crude stem: a plural `s` dropped, then the first five letters (recompute ~ recomputed, file ~ files)."""
    if len(word) > 4 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word[:5]


def _stems(text: str) -> set[str]:
    return {_stem(w) for w in _TOKEN.findall(text.lower()) if len(w) >= 4 and w not in _GENERIC}


_ARTIFACT = re.compile(r"`([^`]{2,80})`|\b([\w.-]+/[\w./-]+|[\w-]+\.[a-z][a-z0-9]{0,4})\b")
# A figure stands on its own: "ResNet-50" and "Set5" name something, and so does a number inside a quoted
# name ("20 Newsgroups"), which _QUOTED blanks out before figures are looked for.
_QUANTITY = re.compile(r"(?<![\w.])(?<!\w-)(\d[\d,.]*\s?%?)")
_QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”|«[^»]*»|„[^“”]*[“”]")
_EG = re.compile(r"\b(?:e\.g|i\.e|etc|vs|cf)\.?$", re.I)


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
    cap: TaxonomyCapability, notes: str | None, limit: int | None = NOTE_LINES_PER_CAP,
    taxonomy: Taxonomy | None = None, min_score: float = 1.5,
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
    for other in (taxonomy.capabilities if taxonomy else [cap]):
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


def notes_for_prompt(cap: TaxonomyCapability, notes: str | None, max_chars: int = NOTES_MAX_CHARS,
                     taxonomy: Taxonomy | None = None) -> str | None:
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


# ---- the offline draft ----------------------------------------------------------------
# No model drafts it, so it says only what the capability's own criteria support: what they
# mention, what they name, the figures they state, the siblings they are confused with, and the
# benchmark's own notes. No procedure or pitfall is invented for a kind of check it cannot read.
def _sentence(text: str) -> str:
    text = " ".join(str(text).split())
    return text if not text or text[-1] in ".!?" else text + "."


def _quote(items: list[str], n: int = 3) -> str:
    return ", ".join(f"`{i}`" for i in items[:n])


def _criteria_hints(examples: list[dict[str, str]]) -> tuple[list[str], list[str]]:
    """Artifacts (file names, paths, code spans) and figures the example criteria name, first seen first."""
    artifacts: list[str] = []
    quantities: list[str] = []
    for ex in examples:
        text = ex["text"]
        for m in _ARTIFACT.finditer(text):
            a = (m.group(1) or m.group(2) or "").strip()
            named = bool(a) and not a[0].isdigit() and not _EG.search(a) and ("/" in a or "." in a.strip("."))
            if named and a not in artifacts:
                artifacts.append(a)
        for m in _QUANTITY.finditer(_QUOTED.sub(" ", text)):
            q = m.group(1).strip().rstrip(".,")
            if q and q not in quantities and not any(q in a for a in artifacts):
                quantities.append(q)
    return artifacts, quantities


def _title(cap: TaxonomyCapability) -> str:
    return f"`{cap.name}`" + (f" ({cap.title})" if cap.title else "")


def offline_draft(cap: TaxonomyCapability, examples: list[dict[str, str]], notes: str | None,
                  taxonomy: Taxonomy | None = None) -> GuidanceAnswer:
    """Guidance drawn from the capability's own criteria and card, and the domain-note lines that match it."""
    conventions = relevant_note_lines(cap, notes, taxonomy=taxonomy)
    artifacts, quantities = _criteria_hints(examples)
    names = taxonomy.names() if taxonomy else []

    summary = (f"No model drafted this guidance; it is drawn from the criteria tagged {_title(cap)}. "
               + _sentence(cap.described()))

    procedure = [f"Restate the criterion as the one claim it makes; criteria of this kind turn on {_phrase_hint(cap)}."]
    procedure += [f"Apply the benchmark's own note: {_sentence(line)}" for line in conventions]
    if artifacts:
        procedure.append(f"Open what the criterion names, where it names it (these criteria name e.g. {_quote(artifacts)}), "
                         "and read it there rather than in the agent's account of it.")
    if quantities:
        procedure.append(f"Compare each figure the criterion states (e.g. {_quote(quantities)}) with the deliverable's, as written.")
    procedure.append("Mark the criterion met only if the evidence shows every part of it.")

    evidence = [f"Criteria like this one: “{ex['text'].strip()}”" for ex in examples[:2] if ex.get("text", "").strip()]
    if artifacts:
        evidence.append(f"The artifacts these criteria name, opened directly (e.g. {_quote(artifacts)}).")
    if not evidence:
        evidence.append("The part of the deliverable the criterion names, read directly.")

    pitfalls = [f"Tagged here by mistake: {_sentence(b)}" for b in cap.non_examples if any(f"`{n}`" in b for n in names) or not names]
    if not pitfalls:
        pitfalls.append("Grading a point the criterion does not state; grade only what it states.")
    return GuidanceAnswer(summary=summary, procedure=procedure[:MAX_ITEMS], evidence=evidence[:MAX_ITEMS], pitfalls=pitfalls[:MAX_ITEMS])


def _phrase_hint(cap: TaxonomyCapability) -> str:
    phrases = cap.key_phrases[:3] or ([cap.title] if cap.title else [])
    if not phrases:
        return "what it names"
    return ", ".join(f"“{p}”" for p in phrases[:-1]) + (" or " if len(phrases) > 1 else "") + f"“{phrases[-1]}”"
