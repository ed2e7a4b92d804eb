"""Offline guidance drafts: word stems, kinds of check, and the domain-note lines relevant to a capability."""
from __future__ import annotations

import re
from dataclasses import dataclass

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


# ---- kinds of check: what to tell a judge about each -----------------------------------
@dataclass(frozen=True)
class _Family:
    """One kind of check, recognised by word stems in a capability's card, with what to tell a judge about it."""

    stems: tuple[str, ...]
    summary: str
    procedure: tuple[str, ...]
    evidence: tuple[str, ...]
    pitfalls: tuple[str, ...]


_FAMILIES: tuple[_Family, ...] = (
    _Family(
        ("recom", "calcu", "compu", "metri", "formu", "quant", "numer", "numbe", "figur", "total", "ratio", "perce",
         "arith", "deriv", "score", "accur", "stati", "avera", "sum"),
        "Settle these by recomputing the figure from its inputs, never by trusting the number the deliverable reports.",
        ("Find the inputs the figure is derived from and recompute it yourself.",
         "Compare your result with the reported figure at the precision the criterion states, or at the figure's displayed precision if it states none."),
        ("Your own recomputation from the inputs, set beside the figure the deliverable reports.",),
        ("False pass: the reported number is plausible or matches the agent's own log, but was never recomputed from its inputs.",
         "False fail: a difference that is only rounding or display precision, which the criterion does not rule out."),
    ),
    _Family(
        ("liter", "const", "point", "exact", "sourc", "match", "verba", "input", "brief", "refer", "given"),
        "Settle these by comparing the value in the deliverable with the value in its source, units and scale included.",
        ("Look up the value in the source the criterion names (the brief, the input data, a reference) and compare it with the deliverable's value, units and scale included.",),
        ("The value as it appears in the deliverable and as it appears in the source, side by side.",),
        ("False pass: the right value in the wrong units or scale (thousands vs millions, percent vs fraction).",
         "False fail: the same value written in an equivalent form (1.5k vs 1,500) that the criterion does not forbid."),
    ),
    _Family(
        ("exist", "prese", "inven", "conta", "inclu", "saved", "save", "file", "secti", "compo", "struc",
         "missi", "artif", "folde", "direc", "colum", "sheet"),
        "Settle these by opening the deliverable and ticking off each prescribed component where it should be.",
        ("List what the deliverable actually contains (files, sections, columns, entries) and tick off each component the criterion prescribes.",
         "Open each component: check it is at the required location and holds real content."),
        ("The component itself, opened at its location; a mention of it in the agent's messages is not evidence.",),
        ("False pass: the file or section exists but is empty, a placeholder or a stub.",
         "False fail: the component exists under a slightly different name or location that the criterion does not forbid."),
    ),
    _Family(
        ("trace", "link", "linka", "cross", "recon", "consi", "align", "propa", "betwe", "acros", "corre", "depen"),
        "Settle these by following a value from its origin to every place the criterion names and checking each hop.",
        ("Find where the value originates, then follow it to every location the criterion names and check each one agrees with the origin.",),
        ("Both ends of every link seen together: the origin and each place the value should reach.",),
        ("False pass: two places agree only because both were typed in separately; if the criterion asks for a link, check the link.",
         "False fail: a value that agrees after a transformation the criterion allows (a unit conversion, a sign flip by convention)."),
    ),
    _Family(
        ("visua", "style", "forma", "layou", "font", "color", "colou", "plot", "chart", "graph", "rende",
         "displ", "presentation", "appea", "brand"),
        "Settle these by looking at the rendered output or its formatting properties, not at its text content.",
        ("Inspect the rendered output, or the stored formatting properties, of exactly the element the criterion names.",),
        ("The rendered element or its stored style properties (font, colour, size, position).",),
        ("False pass: the content is right, but the formatting the criterion asks about was never looked at.",
         "False fail: a visual difference the criterion does not specify (a shade, a default font) treated as a violation."),
    ),
    _Family(
        ("label", "name", "title", "heade", "headi", "metad", "capti", "legen"),
        "Settle these by comparing the label with the specification verbatim.",
        ("Read the label exactly as stored and compare it with the specification, including case and punctuation when the criterion quotes it.",),
        ("The label text as stored in the deliverable, next to the wording the criterion requires.",),
        ("False pass: a label that is close but not the wording the criterion quotes.",
         "False fail: a difference in case or spacing when the criterion does not quote an exact wording."),
    ),
    _Family(
        ("code", "imple", "funct", "class", "logic", "algor", "modul", "libra", "impor", "archi", "metho", "scrip"),
        "Settle these by reading the code path that does the work, not file names, comments or the agent's description of it.",
        ("Read the code path that does the work, from the entry point to the function, rather than file names or comments.",
         "Where it is cheap, run the code or read the output it produced to confirm the path is actually taken."),
        ("The code that executes, and where possible the output it produced.",),
        ("False pass: a function with the right name whose body is a stub, dead code, or never called.",
         "False fail: an equivalent implementation under a different name or structure than the criterion's wording suggests."),
    ),
    _Family(
        ("log", "execu", "train", "completion", "complete", "finis", "stdou", "runni", "episo", "epoch", "itera"),
        "Settle these from the run's own records: logs, outputs and timestamps that show the work executed.",
        ("Read the run's own logs or outputs for direct evidence that the step executed and finished.",),
        ("A log entry or output file written by the run itself, with the counts or timestamps the criterion names.",),
        ("False pass: a success message printed by the agent's script without the work it claims.",
         "False fail: completion recorded somewhere other than where you first looked (another log, a checkpoint, a results file)."),
    ),
    _Family(
        ("tempo", "time", "date", "perio", "seque", "chron", "order", "year", "month", "stage", "befor", "after"),
        "Settle these by laying out the dates or periods in order and checking each boundary the criterion names.",
        ("Lay out the dates, periods or steps in order and check each boundary and transition the criterion names.",),
        ("The dates or period labels as they appear in the deliverable, in sequence.",),
        ("False pass: an off-by-one period, or a fiscal year read as a calendar year.",
         "False fail: an order that differs in presentation only (e.g. newest first) when the criterion asks about the sequence itself."),
    ),
    _Family(
        ("narra", "claim", "discl", "expla", "justi", "discu", "reaso", "argum", "recommend", "quali", "coher", "clari",
         "reada", "gover", "strat", "summa", "conclu"),
        "Settle these by reading the passage in full and checking its substance against the analysis it rests on.",
        ("Read the passage the criterion concerns in full and check each required point is made, and that it agrees with the analysis it rests on.",),
        ("The passage itself, with the specific sentences that make (or fail to make) each required point.",),
        ("False pass: a keyword is present but the required substance is not.",
         "False fail: the point is made in different words or in another section than expected."),
    ),
    _Family(
        ("conve", "stand", "rule", "sign", "accou", "guide", "compliance", "regul", "polic", "ident", "domai"),
        "Settle these against the domain convention that applies, stated before looking at the deliverable.",
        ("State the convention that applies (from the domain notes where given) before looking at the deliverable, then check the deliverable against it.",),
        ("The element the convention governs, read against the convention as stated.",),
        ("False pass: a deliverable that is internally consistent but follows the wrong convention.",),
    ),
)

_GENERIC_FIRST = "Restate the criterion as one checkable claim: the object, the property, and any threshold or exact value it names."
_GENERIC_LOCATE = "Locate the evidence in the agent's artifacts or environment state; the agent's own summary of its work is a pointer, not evidence."
_GENERIC_LAST = "Mark the criterion met only if the evidence shows every part of it; a criterion with several parts is unmet when any part is."
_GENERIC_PITFALLS = (
    "False pass: accepting the agent's claim (in its messages or logs) that the work was done without opening the artifact.",
    "False fail: rejecting a criterion for a flaw it does not ask about; grade only what it states.",
)
_ARTIFACT = re.compile(r"`([^`]{2,80})`|\b([\w.-]+/[\w./-]+|[\w-]+\.[a-z][a-z0-9]{0,4})\b")
_QUANTITY = re.compile(r"(?<![\w.])(\d[\d,.]*\s?(?:%|percent\b|seeds?\b|epochs?\b|episodes?\b|days?\b|years?\b|x\b)?)")


def _families(cap: TaxonomyCapability) -> list[_Family]:
    """The best-matching kind of check, and a second one only when the card clearly has it too."""
    def words(text: str) -> set[str]:
        tokens = _TOKEN.findall(text.lower())
        return {_stem(w) for w in tokens} | set(tokens)

    card = words(" ".join([cap.description, cap.diagnostic_signal, cap.example_pattern]))
    name = words(cap.name.replace("_", " "))
    scored = []
    for i, fam in enumerate(_FAMILIES):
        stems = set(fam.stems)
        hits = len(stems & card) + 2 * len(stems & name)
        if hits:
            scored.append((-hits, i, fam))
    scored.sort(key=lambda t: (t[0], t[1]))
    if not scored:
        return []
    top = -scored[0][0]
    return [scored[0][2]] + [fam for hits, _, fam in scored[1:2] if -hits >= max(2, top / 2)]


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
    """(name stems, card stems, kind-of-check stems): generic verifier vocabulary removed, each set disjoint from the ones before."""
    name = _stems(cap.name.replace("_", " "))
    card = _stems(" ".join([cap.description, cap.diagnostic_signal, cap.example_pattern])) - name
    family = {_stem(w) for fam in _families(cap) for w in fam.stems if len(w) >= 4} - name - card
    return name, card, family


def relevant_note_lines(
    cap: TaxonomyCapability, notes: str | None, limit: int | None = NOTE_LINES_PER_CAP,
    taxonomy: Taxonomy | None = None, min_score: float = 1.5,
) -> list[str]:
    """Note lines that share words with the capability; best overlap first, ties in file order.

    A shared word scores 2 if it is in the capability's name, 1.5 if in the rest of its card,
    0.75 if only in the vocabulary of its kind of check; each score is divided by how many
    capabilities of `taxonomy` use that word, so a word two names share ("output") points at
    neither. A line needs `min_score`: one distinctive word of the name or card, or two of the
    kind of check.
    """
    name, card, family = capability_keywords(cap)
    spread: dict[str, int] = {}
    for other in (taxonomy.capabilities if taxonomy else [cap]):
        for w in set().union(*capability_keywords(other)):
            spread[w] = spread.get(w, 0) + 1
    weights = [(name, NAME_WEIGHT), (card, CARD_WEIGHT), (family, FAMILY_WEIGHT)]
    scored = []
    for i, line in enumerate(note_lines(notes)):
        words = _stems(line)
        score = sum(weight / spread.get(w, 1) for vocab, weight in weights for w in words & vocab)
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
def _sentence(text: str) -> str:
    text = " ".join(str(text).split())
    return text if not text or text[-1] in ".!?" else text + "."


def _quote(items: list[str], n: int = 3) -> str:
    return ", ".join(f"`{i}`" for i in items[:n])


def _criteria_hints(examples: list[dict[str, str]]) -> tuple[list[str], list[str]]:
    """Artifacts and quantities the example criteria name, in first-seen order."""
    artifacts: list[str] = []
    quantities: list[str] = []
    for ex in examples:
        text = ex["text"]
        for m in _ARTIFACT.finditer(text):
            a = (m.group(1) or m.group(2) or "").strip()
            if a and not a[0].isdigit() and a not in artifacts:
                artifacts.append(a)
        for m in _QUANTITY.finditer(text):
            q = m.group(1).strip().rstrip(".,")
            if q and q not in quantities and not any(q in a for a in artifacts):
                quantities.append(q)
    return artifacts, quantities


def offline_draft(cap: TaxonomyCapability, examples: list[dict[str, str]], notes: str | None,
                  taxonomy: Taxonomy | None = None) -> GuidanceAnswer:
    """Template guidance from the capability card, its example criteria and the matching domain-note lines."""
    fams = _families(cap)
    conventions = relevant_note_lines(cap, notes, taxonomy=taxonomy)
    artifacts, quantities = _criteria_hints(examples)

    summary = _sentence(cap.description) + " " + (fams[0].summary if fams else "Settle these from the artifact itself, never from the agent's account of it.")

    procedure = [_GENERIC_FIRST]
    procedure += [f"Apply the benchmark's convention: {_sentence(line)}" for line in conventions]
    procedure += [step for fam in fams for step in fam.procedure]
    if len(procedure) + 2 <= MAX_ITEMS:
        procedure.insert(1, _GENERIC_LOCATE)
    procedure = procedure[: MAX_ITEMS - 1] + [_GENERIC_LAST]

    evidence = [e for fam in fams for e in fam.evidence]
    if artifacts:
        evidence.append(f"The artifacts these criteria name, opened directly (e.g. {_quote(artifacts)}).")
    if quantities:
        evidence.append(f"Thresholds and counts exactly as the criterion states them (e.g. {_quote(quantities)}); check against them as written.")
    if not evidence:
        evidence.append("The artifact the criterion names, opened and read directly.")

    pitfalls = [p for fam in fams for p in fam.pitfalls] + list(_GENERIC_PITFALLS)
    pitfalls = list(dict.fromkeys(pitfalls))
    return GuidanceAnswer(summary=summary, procedure=procedure[:MAX_ITEMS], evidence=evidence[:MAX_ITEMS], pitfalls=pitfalls[:MAX_ITEMS])

