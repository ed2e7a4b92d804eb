"""ungrounded and uncovered-brief: criteria read against their task's brief and each other.

Requirement cues are English grammar: modal verbs ("must", "should"), imperative markers
("please", "make sure"), limits ("at most", "no more than") and numbers.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

from taxonomy.lint.findings import Finding, clip
from taxonomy.lint.reading import Corpus, content, sentences
from taxonomy.text import words

COMMON_TASKS = 3  # an item named in this many tasks is common knowledge, not an invented reference
COVERED = 0.5  # a criterion holding this share of a requirement's words checks it
_ITEMS = re.compile(
    r"`([^`]+)`|\"([^\"]{2,60})\"|“([^”]{2,60})”|(?<![\w.])(\d+(?:[.,]\d+)?%?)(?![\w.])|(?<=\w\s)([A-Z][\w-]*[A-Z0-9][\w-]*)"
)
_PIECE = re.compile(r"\w+(?:[.,%]\w+)*%?")
_PARTS = re.compile(r",\s+(?:and\s+|or\s+)?|;\s+|\s+and\s+(?=[a-z]+\s)")
_MARKER = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_LABEL = re.compile(r"^([A-Z][^:.!?\n]{0,60}):(?:\s|$)")
# Kinds of attached material a brief carries for the responder to read (English nouns of documents).
_ATTACHED = re.compile(
    r"\b(?:reference|excerpt|policy|manual|handbook|notice|faq|appendix|attach\w*|document\w*|statute|background|"
    r"source|table|message|transcript|conversation|email|letter|article|report|data)\b",
    re.I,
)
_REQUIREMENT = re.compile(
    r"\b(?:must|should|shall|need to|needs to|required|requires|make sure|ensure|please|do not|don't|"
    r"at most|at least|no more than|fewer than|less than|only)\b",
    re.I,
)


def items(text: str) -> list[str]:
    """Quoted or back-ticked terms, numbers, and mid-sentence words in capitals with a second capital or digit
    (acronyms, names like "ResNet")."""
    return list(_items(text or ""))


@lru_cache(maxsize=100_000)  # three rules read every criterion's items
def _items(text: str) -> tuple[str, ...]:
    return tuple(next(g for g in m.groups() if g) for m in _ITEMS.finditer(text))


def quoted(text: str) -> list[str]:
    """Quoted or back-ticked terms: file names, identifiers, titles a criterion names; a sentence's
    punctuation inside the quotes ("baby blues.") is not part of the term."""
    found = (
        next(g for g in m.groups()[:3] if g).strip(" .,;:!?")
        for m in _ITEMS.finditer(text or "")
        if any(m.groups()[:3])
    )
    return [q for q in found if q]


def ungrounded(c: Corpus) -> list[Finding]:
    # Quoted and back-ticked terms only: numbers, acronyms and names a domain expert adds are the rubric's
    # knowledge, not invented references (readers judged none of them a defect on the bundled corpora).
    named = {r.idx: list(dict.fromkeys(quoted(r.text))) for r in c.rows}
    spread = Counter(i.lower() for rows in c.tasks.values() for i in {x for r in rows for x in named[r.idx]})
    out = []
    for rows in c.tasks.values():
        brief = rows[0].brief.lower()
        seen = Counter(t for r in rows for t in _pieces(r.text, named[r.idx]))  # in how many of the task's criteria
        texts = [r.text.lower() for r in rows]
        for r in rows:
            missing = [
                i
                for i in named[r.idx]
                if spread[i.lower()] < COMMON_TASKS
                and i.lower() not in brief
                and sum(i.lower() in t for t in texts) < 2
                and not all(seen[t] >= 2 for t in _pieces(i, [i]))
            ]
            if missing:
                shown = ", ".join(f'"{i}"' for i in missing[:4])
                out.append(
                    Finding(
                        "ungrounded",
                        "info",
                        r.task_id,
                        [r.criterion_id],
                        f'"{clip(r.text, 90)}" names {shown}, found neither '
                        "in the brief nor in the task's other criteria",
                        r.text,
                        "check that the item is real and meant (not a leaked answer "
                        "or an invented reference), or state it in the brief",
                    )
                )
    return out


def _pieces(text: str, named: list[str]) -> set[str]:
    """What an item is matched by: the item itself, else each of its words and numbers."""
    return {i.lower() for i in named} | set(_PIECE.findall(text.lower()))


def uncovered_brief(c: Corpus) -> list[Finding]:
    out = []
    for task_id, rows in c.tasks.items():
        checked = [r.content for r in rows]
        for line in requirements(rows[0].brief):
            # "must compare X, cite Y, and end with Z": each demand may be another criterion's.
            parts = [content(words(part), c.function) for part in _PARTS.split(line)]
            if all(len(need) < 2 or any(len(need & got) >= COVERED * len(need) for got in checked) for need in parts):
                continue
            out.append(
                Finding(
                    "uncovered-brief",
                    "info",
                    task_id,
                    [rows[0].criterion_id],
                    f'the brief asks "{clip(line, 120)}" and no criterion of the task checks it',
                    line,
                    "add a criterion that checks this requirement, or drop it from the brief",
                )
            )
    return out


def requirements(brief: str) -> list[str]:
    """The brief's requirements: its list items, and its lines' sentences that state one ("must", "should",
    "please", "at most", ...), outside attached material. A block headed by a label
    naming attached material ("Policy excerpt (...):", "Reference:", "Customer message:") is what the
    task gives the responder to read, not what the rubric checks; it runs to the next such label."""
    out, attached = [], False
    for raw in (brief or "").splitlines():
        line = _MARKER.sub("", raw).strip()
        # a list item outside attached material is a requirement however worded ("- Confirm the date.")
        item = line != raw.strip()
        label = _LABEL.match(line)
        if label:
            attached = bool(_ATTACHED.search(label.group(1)))
            line = line[label.end() :].strip()
        if attached or not line:
            continue
        out += [s for s in sentences(line) if (item or _REQUIREMENT.search(s)) and not s.rstrip().endswith("?")]
    return out
