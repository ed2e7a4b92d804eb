"""vague and hygiene: what one criterion's own wording says (compound has its own module).

Cues are grammar of appraisal ("clear", "appropriate") and typography (encoding junk, white space);
which words are common to many tasks is learned from the corpus.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

from taxonomy.lint.findings import Finding, clip
from taxonomy.lint.reading import Corpus, Row, fold

GENERIC_TASKS = 0.05  # a word found in this share of tasks names nothing particular
VAGUE_WORDS = 4  # besides its judging words, a criterion of more content words says something particular
OVERLONG_CHARS = 1000
VAGUE_MIN_TASKS = 20  # fewer tasks cannot tell a word common to many tasks from a particular one
# English words that judge or hedge rather than name (grammar of appraisal, the same in every field), folded.
JUDGING = frozenset(
    fold(w)
    for w in (
        "appropriate appropriately adequate adequately sufficient "
        "sufficiently proper properly suitable suitably good well "
        "nice clear clearly helpful relevant reasonable reasonably "
        "correct correctly accurate accurately quality effective "
        "effectively useful meaningful thorough thoroughly comprehensive "
        "overall generally somewhat fairly possibly perhaps "
        "maybe probably might reasonable acceptable decent satisfactory strong robust high"
    ).split()
)
_MOJIBAKE = re.compile(
    "\ufffd|Ã[\u0080-\u00bf]|â€|Â[\u00a0-\u00bf]|[\u0000-\u0008\u000b\u000c\u000e-\u001f\u200b-\u200f\ufeff]"
)
_NAMED = re.compile(r"\d|[\"'`“”‘’«»]|\S\s+[A-Z]")


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
        if (
            len(rest) < len(r.content)
            and rest <= generic
            and len(rest) <= VAGUE_WORDS
            and not _NAMED.search(r.text.strip())
        ):
            out.append(
                Finding(
                    "vague",
                    "info",
                    r.task_id,
                    [r.criterion_id],
                    f'"{clip(r.text, 100)}" names no object, number, quoted '
                    "term or item: every word of it is common to many tasks",
                    r.text,
                    "say what the response must contain or do, so two graders would agree",
                )
            )
    return out


def hygiene(c: Corpus) -> list[Finding]:
    out = []
    for r in c.rows:
        for severity, what, fix in _junk(r):
            out.append(
                Finding("hygiene", severity, r.task_id, [r.criterion_id], f'"{clip(r.text, 80)}" {what}', r.text, fix)
            )
    return out


def _junk(r: Row) -> list[tuple[str, str, str]]:
    text, found = r.text, []
    bad = _MOJIBAKE.search(text)
    if bad:
        name = unicodedata.name(bad.group(0)[0], f"U+{ord(bad.group(0)[0]):04X}")
        found.append(
            (
                "warning",
                f"holds encoding junk ({bad.group(0)!r}, {name})",
                "re-save the corpus as UTF-8 and retype the broken characters",
            )
        )
    if not r.ws:
        found.append(("warning", "has no words", "write the check as a sentence"))
    if text != text.strip() or "  " in text.strip().replace("\n", " ") or "\t" in text:
        found.append(("info", "has stray white space (leading, trailing, doubled or tabs)", "trim the text"))
    if len(text) > OVERLONG_CHARS:
        found.append(
            (
                "info",
                f"is {len(text)} characters long: graders skim long criteria",
                "keep the check in one or two sentences; move explanations to the brief",
            )
        )
    return found
