"""`taxonomy lint`: find defective criteria in a rubric corpus, like a code linter finds defective code.

    lint(frame, capability=None, select=None) -> [Finding]   the offline rules (default: those on by default),
                                                              deterministic
    summary_line(frame, target) -> str                        one line: the findings summed, the command listing them
    run_summary(run_dir) -> str                               that line for a finished run (`taxonomy run` prints it)
    findings_by_criterion(frame, capability=None) -> {criterion_id: [Finding]}
    report_section(criteria, tags) -> dict                    the report's rows: criteria beside their findings

The rules live one family per module (signs, duplicates, wording, grounding, weights), registered once
in rules.py; the LLM's findings (llm.py) are validated and merged with them; output.py writes every format.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Iterable

import polars as pl

from taxonomy.corpus.config import show_path
from taxonomy.lint.findings import SEVERITIES, Finding, plural, rank
from taxonomy.lint.reading import Corpus
from taxonomy.lint.rules import RULES

__all__ = ["RULES", "SEVERITIES", "Finding", "lint", "summary_line", "run_summary", "findings_by_criterion", "counts"]


def lint(
    frame: pl.DataFrame, capability: dict[str, str] | None = None, select: Iterable[str] | None = None
) -> list[Finding]:
    """The offline rules over a criteria frame (criterion_id, task_id, text, weight, brief), in the corpus's order;
    `select` None runs the rules on by default (not the previews)."""
    chosen = None if select is None else tuple(select)
    # `taxonomy run` prints the summary and then renders the report, both over the same criteria: the last
    # answer is kept for an identical call, so the rules run once.
    key = (tuple(frame.columns), tuple(frame.hash_rows().to_list()), tuple(sorted((capability or {}).items())), chosen)
    if _LAST.get("key") != key:
        _LAST.update(key=key, found=run_rules(Corpus.of(frame, capability), chosen))
    return [replace(f) for f in _LAST["found"]]  # copies: a caller may merge its own findings into one


_LAST: dict = {}


def run_rules(corpus: Corpus, select: Iterable[str] | None = None) -> list[Finding]:
    chosen = [r for r in RULES.values() if r.default("offline")] if select is None else [RULES[name] for name in select]
    english = corpus.english_only() if any(r.english for r in chosen) else corpus
    found = [f for rule in chosen for f in rule.check(english if rule.english else corpus)]
    order = {r.criterion_id: r.idx for r in corpus.rows}
    return sorted(found, key=lambda f: (order.get(f.criterion_ids[0], 0), -rank(f.severity), f.rule))


def counts(findings: list[Finding]) -> dict[str, int]:
    return {s: sum(f.severity == s for f in findings) for s in reversed(SEVERITIES)}


def summary_line(frame: pl.DataFrame, target: str, capability: dict[str, str] | None = None) -> str:
    """What `taxonomy run` prints: the offline findings summed, and the command that lists them."""
    n = counts(lint(frame, capability))
    said = ", ".join(plural(n[s], name) for s, name in (("error", "error"), ("warning", "warning"), ("info", "note")))
    if not any(n.values()):
        return f"Lint: {said} in the rubric: nothing to list"
    return f"Lint: {said} in the rubric; list them with `taxonomy lint {target}`"


def run_summary(run_dir: Path) -> str:
    """summary_line for a finished run directory, with its capabilities (what `taxonomy lint RUN` lists)."""
    # lazy, here and in report_section: target.py reads a run through the pipeline (jinja2, the LLM runner: about
    # 0.15 s), and cli.py imports this package to build `taxonomy --help`
    from taxonomy.lint.target import load_target

    target = load_target(Path(run_dir))
    return summary_line(target.frame, show_path(Path(run_dir)), target.capability)


def report_section(criteria: pl.DataFrame, tags: pl.DataFrame | None = None, limit: int = 200) -> dict:
    """The report's lint section: each criterion with a warning or an error, its text beside the findings
    (notes only counted, with the command that lists them)."""
    from taxonomy.lint.target import primary_capability

    capability = primary_capability(tags)
    per = findings_by_criterion(criteria, capability)
    text = dict(zip(criteria["criterion_id"].to_list(), criteria["text"].to_list()))
    rows = [
        {
            "criterion_id": cid,
            "task_id": f.task_id,
            "text": text.get(cid, ""),
            "severity": f.severity,
            "rule": f.rule,
            "message": f.message,
            "fix": f.fix,
        }
        for cid, found in per.items()
        for f in found
        if f.severity != "info"
    ]
    notes = {cid for cid, found in per.items() if any(f.severity == "info" for f in found)}
    return {"rows": rows[:limit], "more": max(len(rows) - limit, 0), "criteria_with_notes": len(notes)}


def findings_by_criterion(frame: pl.DataFrame, capability: dict[str, str] | None = None) -> dict[str, list[Finding]]:
    """Each criterion's offline findings (a finding about two criteria is listed under both)."""
    out: dict[str, list[Finding]] = {}
    for f in lint(frame, capability):
        for cid in f.criterion_ids:
            out.setdefault(cid, []).append(f)
    return out
