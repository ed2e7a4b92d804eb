"""Judge guidance (the paper's P3): one guidance file per capability, routed to criteria and tasks.

A verifier that accepts domain context through a guidance channel (Gandalf's judge guidance,
a prompt grader's custom prompt) grades better and cheaper when that context says, per kind
of check, what to open, what evidence settles a verdict, and which traps cause false passes
(an unmet criterion passed) and false fails (a met criterion rejected). This module drafts
that text per capability, with an LLM or offline from the taxonomy's own cards, and writes:

    guidance/<capability>.md     one file per capability
    guidance/routing.csv         criterion_id, task_id, primary, tags, guidance_files, task_file
    guidance/tasks/<task>.md     per task: only the sections its criteria need, as one markdown
                                 document a verifier takes as its judge guidance

Paths in routing.csv are relative to the guidance/ folder that holds it.
"""
from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from taxonomy.llm.runner import Job, Runner
from taxonomy.prompts import render, template_hash
from taxonomy.run import RunDir, RunError
from taxonomy.schemas import Model, Taxonomy, TaxonomyCapability
from taxonomy.validate import Violation

log = logging.getLogger("taxonomy.guidance")

STAGE = "guidance"
PROMPT = "guidance.j2"
FOLDER = "guidance"
MIN_ITEMS, MAX_ITEMS = 1, 8
NOTES_MAX_CHARS = 6000  # longer domain notes are cut to the lines relevant to each capability
NOTE_LINES_PER_CAP = 3  # domain-note lines an offline draft quotes per capability
EXAMPLE_MAX_CHARS = 400  # a criterion quoted in a guidance file is cut to this length


class GuidanceError(RunError):
    """Bad guidance input (e.g. a missing notes file), on one line with the fix."""


# ---- the LLM answer -------------------------------------------------------------------
class GuidanceAnswer(Model):
    summary: str
    procedure: list[str]
    evidence: list[str]
    pitfalls: list[str]


def validate_guidance(answer: GuidanceAnswer, min_items: int = MIN_ITEMS, max_items: int = MAX_ITEMS) -> list[Violation]:
    """Whole-answer violations (item None): an empty summary, a list outside min..max items, a blank item."""
    out = []
    if not answer.summary.strip():
        out.append(Violation(None, "`summary` is empty; write 2-3 sentences on how to judge criteria of this capability"))
    for key in ("procedure", "evidence", "pitfalls"):
        items = getattr(answer, key)
        if not min_items <= len(items) <= max_items:
            out.append(Violation(None, f"`{key}` has {len(items)} items; give {min_items}-{max_items}"))
        if any(not str(i).strip() for i in items):
            out.append(Violation(None, f"`{key}` contains an empty item; remove it or write it out"))
    return out


class GuidanceDrafts(dict):
    """capability name → GuidanceAnswer, plus where each came from and which LLM answers failed.

    `source[name]` is "llm", "offline", or "fallback" (the offline draft after an invalid LLM answer);
    `fallbacks[name]` lists the last violations of the answer that was given up on.
    """

    def __init__(self) -> None:
        super().__init__()
        self.source: dict[str, str] = {}
        self.fallbacks: dict[str, list[str]] = {}


# ---- inputs ---------------------------------------------------------------------------
def routed_criteria(criteria: pl.DataFrame, tags: pl.DataFrame) -> pl.DataFrame:
    """Criteria in corpus order with their tags: [criterion_id, task_id, text, tags, primary].

    A criterion without tags (Stage 3 failed, or absent from the tags table) has tags [] and primary null.
    """
    keep = tags.select("criterion_id", "tags", "primary")
    joined = criteria.select("criterion_id", "task_id", "text").join(keep, on="criterion_id", how="left", maintain_order="left")
    return joined.with_columns(pl.col("tags").fill_null(pl.lit([], dtype=pl.List(pl.Utf8))))


def select_examples(routed: pl.DataFrame, capability: str, n: int) -> list[dict[str, str]]:
    """Up to n criteria whose primary tag is `capability`: one per task first (corpus order), then the rest."""
    rows = routed.filter(pl.col("primary") == capability).to_dicts()
    first_of_task, seen = [], set()
    for r in rows:
        if r["task_id"] not in seen:
            seen.add(r["task_id"])
            first_of_task.append(r)
    chosen_ids = {r["criterion_id"] for r in first_of_task[:n]}
    rest = [r for r in rows if r["criterion_id"] not in chosen_ids]
    chosen = (first_of_task[:n] + rest)[:n]
    return [{"task_id": str(r["task_id"]), "criterion_id": str(r["criterion_id"]), "text": str(r["text"] or "")} for r in chosen]


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


# ---- drafting -------------------------------------------------------------------------
def draft_guidance(
    taxonomy: Taxonomy, criteria: pl.DataFrame, tags: pl.DataFrame, notes: str | None, runner: Runner | None,
    examples_per_cap: int = 5,
) -> GuidanceDrafts:
    """Guidance per capability: one LLM call each with a runner (stage "guidance"), else the offline draft.

    An LLM answer that is still invalid after the runner's re-asks is replaced by the offline draft
    for that capability; `drafts.fallbacks` names it with the reasons, and a warning is logged.
    """
    routed = routed_criteria(criteria, tags)
    notes = notes if notes and notes.strip() else None
    examples = {cap.name: select_examples(routed, cap.name, examples_per_cap) for cap in taxonomy.capabilities}
    drafts = GuidanceDrafts()
    if runner is None:
        for cap in taxonomy.capabilities:
            drafts[cap.name] = offline_draft(cap, examples[cap.name], notes, taxonomy)
            drafts.source[cap.name] = "offline"
        return drafts
    prompts = [render(PROMPT, cap=cap, examples=examples[cap.name], notes=notes_for_prompt(cap, notes, taxonomy=taxonomy))
               for cap in taxonomy.capabilities]
    jobs = [Job(prompt, GuidanceAnswer, validate_guidance) for prompt in prompts]
    answers = runner.run(STAGE, jobs, "Judge guidance")
    for cap, answer in zip(taxonomy.capabilities, answers):
        if answer.ok:
            drafts[cap.name], drafts.source[cap.name] = answer.value, "llm"
            continue
        reasons = [str(v) for v in answer.violations] or ["no valid answer"]
        log.warning("guidance for %s: no valid answer after %d attempts (%s); using the offline draft",
                    cap.name, answer.attempts, "; ".join(reasons))
        drafts[cap.name] = offline_draft(cap, examples[cap.name], notes, taxonomy)
        drafts.source[cap.name] = "fallback"
        drafts.fallbacks[cap.name] = reasons
    return drafts


# ---- writing --------------------------------------------------------------------------
@dataclass
class GuidanceFiles:
    folder: Path
    capability_files: dict[str, Path]  # capability name → file
    routing: Path
    task_files: dict[str, Path]  # task_id → file
    n_criteria: int = 0
    n_routed: int = 0  # criteria with at least one guidance file
    removed: list[Path] = field(default_factory=list)  # stale files of an earlier run, deleted

    @property
    def n_files(self) -> int:
        return len(self.capability_files) + len(self.task_files) + 1

    def as_dict(self) -> dict[str, Any]:
        return {"folder": str(self.folder), "files": self.n_files, "capabilities": len(self.capability_files),
                "tasks": len(self.task_files), "criteria": self.n_criteria, "routed_criteria": self.n_routed,
                "untagged_criteria": self.n_criteria - self.n_routed, "removed_stale": len(self.removed)}


def title(name: str) -> str:
    words = name.removesuffix("_capability").replace("_", " ").strip()
    return words[:1].upper() + words[1:]


def task_filename(task_id: str, taken: set[str] | None = None) -> str:
    """A safe file stem for a task id: `/` becomes `__`, other unsafe characters `_`; clashes get a short hash."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", str(task_id).replace("/", "__")).strip("._") or "task"
    stem = stem[:100]
    if taken is not None and stem in taken:
        stem = f"{stem}-{hashlib.sha256(str(task_id).encode()).hexdigest()[:8]}"
    return stem


def _line(text: str, limit: int = EXAMPLE_MAX_CHARS) -> str:
    """One line of markdown: whitespace collapsed, cut at `limit`, and never opening a heading or a quote,
    so model-written text cannot add sections to a guidance file."""
    text = " ".join(str(text).split()).lstrip("#> ").strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _numbered(items: list[str]) -> list[str]:
    return [f"{i}. {_line(s, 2000)}" for i, s in enumerate(items, 1)]


def _bullets(items: list[str]) -> list[str]:
    return [f"- {_line(s, 2000)}" for s in items]


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _pitfall_lines(pitfalls: list[str]) -> list[str]:
    """Grouped under false passes / false fails when the items say which they are."""
    groups: dict[str, list[str]] = {"False passes (an unmet criterion passed)": [], "False fails (a met criterion rejected)": [], "Other traps": []}
    keys = list(groups)
    for p in pitfalls:
        low = p.strip().lower()
        if low.startswith("false pass"):
            groups[keys[0]].append(_capital(re.sub(r"^false pass(es)?\s*[:\-–—]\s*", "", p.strip(), flags=re.I)))
        elif low.startswith("false fail"):
            groups[keys[1]].append(_capital(re.sub(r"^false fail(s)?\s*[:\-–—]\s*", "", p.strip(), flags=re.I)))
        else:
            groups[keys[2]].append(p)
    if not groups[keys[0]] and not groups[keys[1]]:
        return _bullets(pitfalls)
    out = []
    for head, items in groups.items():
        if items:
            out += [f"*{head}:*", ""] + _bullets(items) + [""]
    return out[:-1]


def _when_it_applies(cap: TaxonomyCapability, summary: str) -> list[str]:
    described = _sentence(cap.description)
    lines = [] if described in " ".join(summary.split()) else [described, ""]
    if cap.diagnostic_signal.strip():
        lines.append(f"- **Signal:** {_line(cap.diagnostic_signal, 2000)}")
    if cap.example_pattern.strip():
        lines.append(f"- **Typical criterion:** {_line(cap.example_pattern, 2000)}")
    lines += [f"- **Not this capability:** {_line(ne, 2000)}" for ne in cap.non_examples]
    return lines


def _body(cap: TaxonomyCapability, draft: GuidanceAnswer, level: str) -> list[str]:
    """The guidance proper, with sub-headings at `level` ("##" in a capability file, "###" in a task file)."""
    return [
        _line(draft.summary, 4000), "",
        f"{level} When it applies", "", *_when_it_applies(cap, draft.summary), "",
        f"{level} Procedure", "", *_numbered(draft.procedure), "",
        f"{level} Evidence that settles a verdict", "", *_bullets(draft.evidence), "",
        f"{level} Pitfalls", "", *_pitfall_lines(draft.pitfalls), "",
    ]


_SOURCE_NOTE = {
    "llm": "drafted by an LLM from the capability card, example criteria and domain notes",
    "offline": "drafted offline from the capability card, example criteria and domain notes (no LLM)",
    "fallback": "drafted offline because the LLM's answer stayed invalid after re-asking",
}


def capability_markdown(cap: TaxonomyCapability, draft: GuidanceAnswer, examples: list[dict[str, str]],
                        n_primary: int, n_any: int, source: str = "") -> str:
    lines = [f"# Judge guidance: {title(cap.name)}", "", f"Capability `{cap.name}`: primary tag of {n_primary} criteria, "
             f"needed (any tag) by {n_any}.", "", *_body(cap, draft, "##")]
    if examples:
        lines += ["## Example criteria", ""]
        lines += [f"- [{_line(ex['task_id'], 120)}] {_line(ex['text'])}" for ex in examples]
        lines.append("")
    if source in _SOURCE_NOTE:
        lines += [f"<!-- {_SOURCE_NOTE[source]} -->", ""]
    return "\n".join(lines).rstrip() + "\n"


def task_markdown(task_id: str, sections: list[tuple[TaxonomyCapability, GuidanceAnswer, list[str]]],
                  n_criteria: int, n_untagged: int) -> str:
    """One judge-guidance document for a task: a `##` section per capability its criteria need."""
    lines = [f"# Judge guidance for task {_line(task_id, 200)}", "",
             f"This task has {n_criteria} criteria; they need {len(sections)} kinds of check, one section each below, "
             "the most needed first. The criterion text always governs: this guidance says how to check, not what to require."]
    if n_untagged:
        lines += ["", f"{n_untagged} of its criteria have no capability tag; judge them from the criterion text alone."]
    lines.append("")
    for cap, draft, ids in sections:
        lines += [f"## {title(cap.name)} (`{cap.name}`)", "",
                  f"Needed by {len(ids)} of the task's criteria: {', '.join(_line(i, 80) for i in ids[:20])}"
                  + (", …" if len(ids) > 20 else "") + ".", "",
                  *_body(cap, draft, "###")]
    return "\n".join(lines).rstrip() + "\n"


def write_guidance(run: RunDir, taxonomy: Taxonomy, criteria: pl.DataFrame, tags: pl.DataFrame,
                   drafts: dict[str, GuidanceAnswer], examples_per_cap: int = 5) -> GuidanceFiles:
    """Capability files, the routing table and per-task guidance, written atomically under run/guidance/."""
    routed = routed_criteria(criteria, tags)
    caps = {c.name: c for c in taxonomy.capabilities}
    missing = [n for n in caps if n not in drafts]
    if missing:
        raise GuidanceError(f"no guidance draft for {', '.join(missing)}; fix: draft every capability of the taxonomy (draft_guidance)")
    source = getattr(drafts, "source", {})
    folder = run.path / FOLDER

    cap_files: dict[str, Path] = {}
    for name, cap in caps.items():
        n_primary = routed.filter(pl.col("primary") == name).height
        n_any = routed.filter(pl.col("tags").list.contains(name)).height
        rel = f"{FOLDER}/{name}.md"
        run.write_text(rel, capability_markdown(cap, drafts[name], select_examples(routed, name, examples_per_cap),
                                                n_primary, n_any, source.get(name, "")))
        cap_files[name] = run.path / rel

    # Per task: the capabilities any of its criteria needs, most needed first (ties: taxonomy order).
    order = {n: i for i, n in enumerate(caps)}
    task_files: dict[str, Path] = {}
    task_rel: dict[str, str] = {}
    taken: set[str] = set()
    for (task_id,), group in routed.group_by("task_id", maintain_order=True):
        task_id = str(task_id)
        need: dict[str, list[str]] = {}
        for r in group.iter_rows(named=True):
            for t in r["tags"]:
                if t in caps and r["criterion_id"] not in need.setdefault(t, []):
                    need[t].append(str(r["criterion_id"]))
        ranked = sorted(need, key=lambda n: (-len(need[n]), order[n]))
        untagged = sum(1 for r in group.iter_rows(named=True) if not any(t in caps for t in r["tags"]))
        stem = task_filename(task_id, taken)
        taken.add(stem)
        rel = f"{FOLDER}/tasks/{stem}.md"
        run.write_text(rel, task_markdown(task_id, [(caps[n], drafts[n], need[n]) for n in ranked], group.height, untagged))
        task_files[task_id] = run.path / rel
        task_rel[task_id] = f"tasks/{stem}.md"

    rows = []
    for r in routed.iter_rows(named=True):
        known = [t for t in r["tags"] if t in caps]
        rows.append({
            "criterion_id": r["criterion_id"], "task_id": r["task_id"], "primary": r["primary"] if r["primary"] in caps else "",
            "tags": ";".join(known), "guidance_files": ";".join(f"{t}.md" for t in known), "task_file": task_rel[str(r["task_id"])],
        })
    schema = {k: pl.Utf8 for k in ("criterion_id", "task_id", "primary", "tags", "guidance_files", "task_file")}
    run.write_text(f"{FOLDER}/routing.csv", pl.DataFrame(rows, schema=schema).write_csv())

    written = set(cap_files.values()) | set(task_files.values())
    removed = [p for p in [*folder.glob("*.md"), *(folder / "tasks").glob("*.md")] if p not in written]
    for p in removed:
        p.unlink()
    return GuidanceFiles(folder, cap_files, folder / "routing.csv", task_files, n_criteria=routed.height,
                         n_routed=sum(1 for r in rows if r["tags"]), removed=removed)


# ---- the whole use ----------------------------------------------------------------------
def read_notes(notes_path: Path | None) -> str | None:
    if notes_path is None:
        return None
    path = Path(notes_path)
    if not path.is_file():
        raise GuidanceError(f"{path}: no such domain-notes file; fix: pass an existing text or markdown file of the benchmark's conventions, or leave out the notes")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise GuidanceError(f"{path}: not UTF-8 text; fix: save the domain notes as UTF-8 plain text or markdown") from None
    return text if text.strip() else None


def generate_guidance(session: Any, notes_path: Path | None = None, examples_per_cap: int = 5) -> dict[str, Any]:
    """Read a finished run, draft guidance (LLM with `session.runner`, else offline), write it, return a manifest entry.

    The caller records the returned dict (e.g. `session.run.record("guidance", info)`).
    """
    from taxonomy.taxonomy_io import load_taxonomy

    notes = read_notes(notes_path)
    run: RunDir = session.run
    criteria = run.read_parquet("criteria.parquet", "discover")
    taxonomy = load_taxonomy(run.need("taxonomy.json", "merge"), session.cfg.labels)
    tags = run.read_parquet("stage3_tags.parquet", "tag")
    drafts = draft_guidance(taxonomy, criteria, tags, notes, session.runner, examples_per_cap)
    files = write_guidance(run, taxonomy, criteria, tags, drafts, examples_per_cap)
    info: dict[str, Any] = {
        **files.as_dict(),
        "notes": str(notes_path) if notes_path is not None else None,
        "prompt_hash": template_hash(PROMPT),
        "sources": {s: list(drafts.source.values()).count(s) for s in ("llm", "offline", "fallback")},
        "fallbacks": dict(drafts.fallbacks),
        "calls": 0,
    }
    if session.runner is not None and STAGE in session.runner.usage:
        info.update(session.runner.usage[STAGE].as_dict(session.cfg.llm.prices))
    return info
