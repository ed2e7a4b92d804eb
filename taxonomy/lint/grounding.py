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
COVERED = 0.5     # a criterion holding this share of a requirement's words checks it
_ITEMS = re.compile(r"`([^`]+)`|\"([^\"]{2,60})\"|“([^”]{2,60})”|(?<![\w.])(\d+(?:[.,]\d+)?%?)(?![\w.])|(?<=\w\s)([A-Z][\w-]*[A-Z0-9][\w-]*)")
_PIECE = re.compile(r"\w+(?:[.,%]\w+)*%?")
_REQUIREMENT = re.compile(r"\b(?:must|should|shall|need to|needs to|required|requires|make sure|ensure|please|do not|don't|"
                          r"at most|at least|no more than|fewer than|less than|only)\b", re.I)


def items(text: str) -> list[str]:
    """Quoted or back-ticked terms, numbers, and mid-sentence words in capitals with a second capital or digit (acronyms, names like "ResNet")."""
    return list(_items(text or ""))


@lru_cache(maxsize=100_000)  # three rules read every criterion's items
def _items(text: str) -> tuple[str, ...]:
    return tuple(next(g for g in m.groups() if g) for m in _ITEMS.finditer(text))


def quoted(text: str) -> list[str]:
    """Quoted or back-ticked terms: file names, identifiers, titles a criterion names."""
    return [next(g for g in m.groups()[:3] if g) for m in _ITEMS.finditer(text or "") if any(m.groups()[:3])]


def ungrounded(c: Corpus) -> list[Finding]:
    # Quoted and back-ticked terms only: numbers, acronyms and names a domain expert adds are the rubric's
    # knowledge, not invented references (readers judged none of them a defect on the bundled corpora).
    named = {r.idx: list(dict.fromkeys(quoted(r.text))) for r in c.rows}
    spread = Counter(i.lower() for rows in c.tasks.values() for i in {x for r in rows for x in named[r.idx]})
    out = []
    for rows in c.tasks.values():
        brief = rows[0].brief.lower()
        seen = Counter(t for r in rows for t in _pieces(r.text, named[r.idx]))  # in how many of the task's criteria
        for r in rows:
            missing = [i for i in named[r.idx] if spread[i.lower()] < COMMON_TASKS and i.lower() not in brief
                       and not all(seen[t] >= 2 for t in _pieces(i, [i]))]
            if missing:
                shown = ", ".join(f'"{i}"' for i in missing[:4])
                out.append(Finding(
                    "ungrounded", "info", r.task_id, [r.criterion_id],
                    f'"{clip(r.text, 90)}" names {shown}, found neither in the brief nor in the task\'s other criteria',
                    r.text, "check that the item is real and meant (not a leaked answer or an invented reference), or state it in the brief"))
    return out


def _pieces(text: str, named: list[str]) -> set[str]:
    """What an item is matched by: the item itself, else each of its words and numbers."""
    return {i.lower() for i in named} | set(_PIECE.findall(text.lower()))


def uncovered_brief(c: Corpus) -> list[Finding]:
    out = []
    for task_id, rows in c.tasks.items():
        brief = rows[0].brief
        checked = [r.content for r in rows]
        for sentence in sentences(brief):
            need = content(words(sentence), c.function)
            if sentence.rstrip().endswith("?") or not _REQUIREMENT.search(sentence) or len(need) < 2:
                continue
            if not any(len(need & got) >= COVERED * len(need) for got in checked):
                out.append(Finding(
                    "uncovered-brief", "info", task_id, [rows[0].criterion_id],
                    f'the brief asks "{clip(sentence, 120)}" and no criterion of the task checks it',
                    sentence, "add a criterion that checks this requirement, or drop it from the brief"))
    return out
