"""What a lint did not check, so a silent rule is never read as a clean rubric: criteria a rule cannot
read (another language or script, for the rules that read English grammar), a corpus too small for a
rule, rules off by default, and the model's review when no model ran. JSON `summary.skipped`."""

from __future__ import annotations

import unicodedata
from collections import Counter

from taxonomy.lint.findings import plural
from taxonomy.lint.reading import Corpus, Row
from taxonomy.lint.rules import RULES
from taxonomy.lint.wording import VAGUE_MIN_TASKS


def skipped(corpus: Corpus, offline: list[str], model: list[str], llm: dict, n_criteria: int) -> list[dict]:
    """[{rule, reason, criteria}]: each rule's criteria left unread, and why."""
    out = []
    foreign = [r for r in corpus.rows if not r.english]
    if foreign:
        n = _count(foreign)
        why = f"not English ({_scripts(foreign)}): the rule reads English grammar"
        out += [{"rule": rule, "reason": why, "criteria": n} for rule in offline if RULES[rule].english]
    english_tasks = {r.task_id for r in corpus.rows if r.english}
    if "vague" in offline and len(english_tasks) < VAGUE_MIN_TASKS:
        out.append(
            {
                "rule": "vague",
                "reason": f"{plural(len(english_tasks), 'task')} in English: the rule needs {VAGUE_MIN_TASKS} to tell "
                "a common word from a particular one",
                "criteria": _count([r for r in corpus.rows if r.english]),
            }
        )
    for rule in RULES.values():
        if rule.id not in offline and "offline" in rule.preview:
            out.append(
                {
                    "rule": rule.id,
                    "reason": "a preview offline, judged precision under 0.5: --preview or --select turns it on",
                    "criteria": n_criteria,
                }
            )
    if not llm.get("asked"):
        out.append(
            {"rule": "model review", "reason": f"no model ran: {llm.get('why', 'not asked')}", "criteria": n_criteria}
        )
    else:
        out += [
            {
                "rule": rule.id,
                "reason": "a preview from the model, judged precision under 0.5: --preview or --select turns it on",
                "criteria": n_criteria,
            }
            for rule in RULES.values()
            if "llm" in rule.preview and rule.id not in model
        ]
    return out


def line(skips: list[dict]) -> str:
    """The text summary's one line."""
    if not skips:
        return "Not checked: nothing (every rule read every criterion)"
    grouped: dict[tuple[str, int], list[str]] = {}
    for s in skips:
        grouped.setdefault((s["reason"], s["criteria"]), []).append(s["rule"])
    parts = [
        f"{', '.join(rules)} on {plural(n, 'criterion', 'criteria')} ({reason})"
        for (reason, n), rules in grouped.items()
    ]
    return "Not checked: " + "; ".join(parts)


def _count(rows: list[Row]) -> int:
    return sum(1 + len(r.copies) for r in rows)


def _scripts(rows: list[Row]) -> str:
    """ "CJK script", "Cyrillic script", "another language in Latin letters", or several of them."""
    named = Counter(_script(r.text) for r in rows)
    return " and ".join(f"{name} ({n:,})" if len(named) > 1 else name for name, n in named.most_common())


def _script(text: str) -> str:
    for ch in text:
        if ch.isalpha() and ch >= "\u0250":
            return unicodedata.name(ch, "another").split()[0] + " script"
    return "another language in Latin letters"
