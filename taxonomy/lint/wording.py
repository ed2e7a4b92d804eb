"""compound, vague and hygiene: what one criterion's own wording says.

Cues are grammar and typography (list markers, "N of the following", clause joints); the words a
criterion of this corpus opens with ("Recommends", "States") are learned from the corpus.
"""
from __future__ import annotations

import re
import unicodedata
from collections import Counter

from taxonomy.lint.findings import Finding, clip
from taxonomy.lint.reading import SUBORDINATORS, Corpus, Row, fold

OPENER_MIN = 5          # criteria opening with a word before it counts as how a check starts...
OPENER_SHARE = 0.002    # ...or this share of the corpus, whichever is more,
OPENER_TASKS = 3        # in this many tasks
CLAUSE_WORDS = 3        # each side of a joint this long, to be a check of its own
GENERIC_TASKS = 0.05    # a word found in this share of tasks names nothing particular
VAGUE_WORDS = 4        # besides its judging words, a criterion of more content words says something particular
OVERLONG_CHARS = 1000
VAGUE_MIN_TASKS = 20    # fewer tasks cannot tell a word common to many tasks from a particular one
# English words that judge or hedge rather than name (grammar of appraisal, the same in every field), folded.
JUDGING = frozenset(fold(w) for w in (
    "appropriate appropriately adequate adequately sufficient sufficiently proper properly suitable suitably good well "
    "nice clear clearly helpful relevant reasonable reasonably correct correctly accurate accurately quality effective "
    "effectively useful meaningful thorough thoroughly comprehensive overall generally somewhat fairly possibly perhaps "
    "maybe probably might reasonable acceptable decent satisfactory strong robust high").split())
_ITEM = re.compile(r"(?:^|[\s:;,])\(?([1-9]|[a-hA-H]|i{1,3}|iv)[.)]\s+\S")
_SERIES = ({"1", "2"}, {"a", "b"}, {"i", "ii"})  # a list numbers its first two items
_BULLET = re.compile(r"\n\s*(?:[-*•]|\d+[.)])\s+\S")
_N_OF = re.compile(r"\b(?:\d+|two|three|four|five|six)\s+(?:out\s+)?of\s+(?:the\s+following|these|the\s+\d+|\d+)\b", re.I)
_JOINT = re.compile(r"(?:;|[.!?](?=\s+[A-Z])|,?\s+(?:and|but|and\s+also|as\s+well\s+as|while)\s+)\s*([^\W\d_]+)", re.U)
_STRONG = re.compile(r"(?:;|[.!?]|,\s+and)\s*([^\W\d_]+)", re.U)
# Verbs of being and their auxiliaries: English grammar, how a clause states its predicate.
_PREDICATE = re.compile(r"\b(?:is|are|was|were|has been|have been|should be|must be|can be|will be)\b", re.I)
_MOJIBAKE = re.compile("\ufffd|Ã[\u0080-\u00bf]|â€|Â[\u00a0-\u00bf]|[\u0000-\u0008\u000b\u000c\u000e-\u001f\u200b-\u200f\ufeff]")
_NAMED = re.compile(r"\d|[\"'`“”‘’«»]|\S\s+[A-Z]")


def openers(c: Corpus, loose: bool = False) -> frozenset[str]:
    """Words that start many criteria in several tasks: how a check of this corpus is written
    ("Recommends", "States"). `loose`: any such word that starts criteria of two tasks ("Specifies"),
    read only after a full stop, a semicolon or ", and"."""
    firsts = Counter((r.ws[0], r.task_id) for r in c.rows if r.ws)
    tasks = Counter(w for w, _ in firsts)
    count = Counter(r.ws[0] for r in c.rows if r.ws)
    least, spread = (2, 2) if loose else (max(OPENER_MIN, OPENER_SHARE * len(c.rows)), OPENER_TASKS)
    return frozenset(w for w, n in count.items() if n >= least and tasks[w] >= spread and w not in c.function)


def compound(c: Corpus) -> list[Finding]:
    starts, any_start = openers(c), openers(c, loose=True)
    out = []
    for rows in c.tasks.values():
        # After a full stop, a semicolon or ", and", a clause opening as criteria of this corpus or of
        # this very task do ("The ...", "Step ...") is a check of its own, joined on.
        local = any_start | frozenset(r.ws[0] for r in rows if r.ws)
        for r in rows:
            severity, why = _bundled(r.text, starts, local)
            if why:
                out.append(Finding(
                    "compound", severity, r.task_id, [r.criterion_id], f'"{clip(r.text, 100)}" {why}',
                    r.text, "split it into one criterion per check, each with its own weight, so a response meeting half of it gets half the points"))
    return out


def _bundled(text: str, starts: frozenset[str], local: frozenset[str]) -> tuple[str, str]:
    """(severity, why): a numbered list or "N of the following" is several checks for certain; a
    clause written like a criterion of its own usually is, but may be the same check's second half."""
    marks = {m.lower() for m in _ITEM.findall(text)}
    if any(series <= marks for series in _SERIES) or len(_BULLET.findall(text)) >= 2:
        return "warning", "lists several items, each a check of its own"
    m = _N_OF.search(text)
    if m:
        return "warning", f'scores "{m.group(0)}" items as one check'
    for joint in _JOINT.finditer(text):
        word = joint.group(1)
        strong = _STRONG.fullmatch(text[joint.start():joint.end()]) is not None
        left, right = text[:joint.start()], text[joint.start(1):]
        # Both sides state something of their own: each has a verb of being ("X is saved; Y are plotted").
        clauses = strong and all(_PREDICATE.search(" ".join(side.split()[:12])) for side in (left[-120:], right))
        if word.lower() in SUBORDINATORS or not (word.lower() in starts or (strong and word.lower() in local) or clauses):
            continue
        before, after = left.split(), right.split()
        if len(before) >= CLAUSE_WORDS and len(after) >= CLAUSE_WORDS:
            return "info", f'joins checks: its part from "{word}" on is written like a criterion of its own'
    return "", ""


def vague(c: Corpus) -> list[Finding]:
    if len(c.tasks) < VAGUE_MIN_TASKS:
        return []  # summary.skipped says so (coverage.py)
    spread: Counter = Counter()
    for rows in c.tasks.values():
        spread.update(set().union(*(r.content for r in rows)))
    generic = {w for w, n in spread.items() if n >= GENERIC_TASKS * len(c.tasks)}
    out = []
    for r in c.rows:
        rest = r.content - JUDGING
        if len(rest) < len(r.content) and rest <= generic and len(rest) <= VAGUE_WORDS and not _NAMED.search(r.text.strip()):
            out.append(Finding(
                "vague", "info", r.task_id, [r.criterion_id],
                f'"{clip(r.text, 100)}" names no object, number, quoted term or item: every word of it is common to many tasks',
                r.text, "say what the response must contain or do, so two graders would agree"))
    return out


def hygiene(c: Corpus) -> list[Finding]:
    out = []
    for r in c.rows:
        for severity, what, fix in _junk(r):
            out.append(Finding("hygiene", severity, r.task_id, [r.criterion_id], f'"{clip(r.text, 80)}" {what}', r.text, fix))
    return out


def _junk(r: Row) -> list[tuple[str, str, str]]:
    text, found = r.text, []
    bad = _MOJIBAKE.search(text)
    if bad:
        name = unicodedata.name(bad.group(0)[0], f"U+{ord(bad.group(0)[0]):04X}")
        found.append(("warning", f"holds encoding junk ({bad.group(0)!r}, {name})", "re-save the corpus as UTF-8 and retype the broken characters"))
    if not r.ws:
        found.append(("warning", "has no words", "write the check as a sentence"))
    if text != text.strip() or "  " in text.strip().replace("\n", " ") or "\t" in text:
        found.append(("info", "has stray white space (leading, trailing, doubled or tabs)", "trim the text"))
    if len(text) > OVERLONG_CHARS:
        found.append(("info", f"is {len(text)} characters long: graders skim long criteria", "keep the check in one or two sentences; move explanations to the brief"))
    return found
