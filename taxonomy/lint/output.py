"""The four output formats of `taxonomy lint`: text (grouped by task), json, sarif (2.1.0) and github."""

from __future__ import annotations

import json
from collections import Counter
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from taxonomy.lint.coverage import line as not_checked
from taxonomy.lint.findings import SEVERITIES, Finding, plural
from taxonomy.lint.rules import RULES

FORMATS = ("text", "json", "sarif", "github")
_SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
_GITHUB_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def summary(findings: list[Finding], n_criteria: int, n_tasks: int, llm: dict | None = None) -> dict:
    flagged = {cid for f in findings for cid in f.criterion_ids}
    out = {
        "criteria": n_criteria,
        "tasks": n_tasks,
        "findings": len(findings),
        "criteria_flagged": len(flagged),
        "by_severity": {s: sum(f.severity == s for f in findings) for s in reversed(SEVERITIES)},
        "by_rule": dict(sorted(Counter(f.rule for f in findings).items())),
    }
    if llm is not None:
        out["llm"] = llm
    return out


def render(fmt: str, findings: list[Finding], summ: dict) -> str:
    return {"text": text, "json": as_json, "sarif": sarif, "github": github}[fmt](findings, summ)


def _where(f: Finding) -> str:
    loc = f.location or {}
    if not loc.get("file"):
        return f.criterion_ids[0]
    if loc.get("line"):
        return f"{loc['file']}:{loc['line']}"
    return f"{loc['file']}#{loc['pointer']}" if loc.get("pointer") else str(loc["file"])


def text(findings: list[Finding], summ: dict) -> str:
    lines: list[str] = []
    by_task: dict[str, list[Finding]] = {}
    for f in findings:
        by_task.setdefault(f.task_id, []).append(f)
    for task, found in by_task.items():
        lines.append(f"task {task} ({len(found)} finding{'s' if len(found) != 1 else ''})")
        for f in found:
            marker = "" if f.source == "offline" else f" [{f.source}]"
            lines.append(f"  {_where(f)}: {f.severity} {f.rule}{marker}: {f.message}")
            lines.append(f"      fix: {f.fix}")
        lines.append("")
    s = summ["by_severity"]
    rules = ", ".join(f"{rule} {n}" for rule, n in summ["by_rule"].items()) or "none"
    counted = ", ".join(
        plural(s[k], name) for k, name in (("error", "error"), ("warning", "warning"), ("info", "note"))
    )
    hidden = summ["findings"] - summ.get("shown", summ["findings"])
    lines.append(
        f"{plural(summ['findings'], 'finding')} ({counted}) on "
        f"{summ['criteria_flagged']} of {plural(summ['criteria'], 'criterion', 'criteria')} "
        f"in {plural(summ['tasks'], 'task')}; by rule: {rules}"
        + (f"; {hidden} below --min-severity not listed" if hidden else "")
    )
    if "llm" in summ:
        lines.append(_llm_line(summ["llm"]))
    if "skipped" in summ:
        lines.append(not_checked(summ["skipped"]))
    return "\n".join(lines) + "\n"


def _llm_line(llm: dict) -> str:
    if not llm.get("asked"):
        return f"LLM review: not run ({llm.get('why', 'no model')})"
    line = (
        f"LLM review: {plural(llm['asked'], 'task')} asked, {plural(llm['kept'], 'finding')} "
        f"kept, {llm['dropped']} dropped as invalid after re-asks"
    )
    unanswered = llm.get("unanswered")
    return line + (f", {plural(unanswered, 'task')} without a valid answer" if unanswered else "")


def as_json(findings: list[Finding], summ: dict) -> str:
    return (
        json.dumps({"findings": [f.as_dict() for f in findings], "summary": summ}, indent=2, ensure_ascii=False) + "\n"
    )


def _uri(file: str) -> str:
    path = Path(file)
    return path.resolve().as_uri() if path.is_absolute() else path.as_posix()


def sarif(findings: list[Finding], summ: dict) -> str:
    rules = list(RULES)
    results = []
    for f in findings:
        result = {
            "ruleId": f.rule,
            "ruleIndex": rules.index(f.rule),
            "level": _SARIF_LEVEL[f.severity],
            "message": {"text": f"{f.message}. Fix: {f.fix}"},
            "properties": {
                "task_id": f.task_id,
                "criterion_ids": f.criterion_ids,
                "source": f.source,
                "evidence": f.evidence,
            },
        }
        loc = f.location or {}
        if loc.get("file"):
            physical = {"artifactLocation": {"uri": _uri(loc["file"])}}
            if loc.get("line"):
                physical["region"] = {"startLine": int(loc["line"])}
            place = {"physicalLocation": physical}
            if loc.get("pointer"):  # where in a JSON tree: its JSON pointer
                place["logicalLocations"] = [{"fullyQualifiedName": loc["pointer"], "kind": "element"}]
            result["locations"] = [place]
        results.append(result)
    driver = {
        "name": "taxonomy lint",
        "version": _version(),
        "informationUri": "https://docs.oasis-open.org/sarif/sarif/v2.1.0/",
        "rules": [
            {"id": r, "name": r.replace("-", " ").title().replace(" ", ""), "shortDescription": {"text": d.description}}
            for r, d in RULES.items()
        ],
    }
    log = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{"tool": {"driver": driver}, "results": results, "properties": {"summary": summ}}],
    }
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def _version() -> str:
    try:
        return version("rubric-taxonomy")
    except PackageNotFoundError:
        return "0+checkout"


def _escape(value: str, prop: bool = False) -> str:
    value = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return value.replace(":", "%3A").replace(",", "%2C") if prop else value


def github(findings: list[Finding], summ: dict) -> str:
    lines = []
    for f in findings:
        loc = f.location or {}
        props = [f"file={_escape(str(loc['file']), True)}"] if loc.get("file") else []
        props += [f"line={loc['line']}"] if loc.get("file") and loc.get("line") else []
        props.append(f"title={_escape(f'{f.rule} ({f.task_id})', True)}")
        lines.append(f"::{_GITHUB_LEVEL[f.severity]} {','.join(props)}::{_escape(f'{f.message}. Fix: {f.fix}')}")
    return "\n".join(lines) + ("\n" if lines else "")
