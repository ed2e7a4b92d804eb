"""Guidance written to disk: capability and per-task markdown, the routing table, and stale-file cleanup."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from taxonomy.guidance.inputs import routed_criteria, select_examples
from taxonomy.guidance.model import GuidanceAnswer, GuidanceError
from taxonomy.guidance.principles import FIELDS as PRINCIPLES
from taxonomy.guidance.principles import WORD, any_of, judge_lines
from taxonomy.run import RunDir
from taxonomy.schemas import Taxonomy, TaxonomyCapability

FOLDER = "guidance"
EXAMPLE_MAX_CHARS = 400  # a criterion quoted in a guidance file is cut to this length


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
        return {
            "folder": str(self.folder),
            "files": self.n_files,
            "capabilities": len(self.capability_files),
            "tasks": len(self.task_files),
            "criteria": self.n_criteria,
            "routed_criteria": self.n_routed,
            "untagged_criteria": self.n_criteria - self.n_routed,
            "removed_stale": len(self.removed),
        }


def title(name: str, given: str = "") -> str:
    """The capability's title in the corpus's own words where the taxonomy gives one, else its name as words."""
    words = (given or name.removesuffix("_capability").replace("_", " ")).strip()
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
    groups: dict[str, list[str]] = {
        "False passes (an unmet criterion passed)": [],
        "False fails (a met criterion rejected)": [],
        "Other traps": [],
    }
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


def _sentence(text: str) -> str:
    text = " ".join(str(text).split())
    return text if not text or text[-1] in ".!?" else text + "."


# Where no model drafted guidance the judge is told so, and the person running the export how to get it.
NO_DRAFT = (
    "No model drafted guidance for this kind of check: judge each criterion from its own text. "
    "For guidance, run `taxonomy guidance RUN_DIR` with a model (`export GEMINI_API_KEY=...`, or "
    "`--provider openai` with `llm.base_url` set to a local server), then export again."
)


def _when_it_applies(cap: TaxonomyCapability, summary: str) -> list[str]:
    described = _sentence(cap.described())
    head = [] if described in " ".join(summary.split()) else [described]
    card = [f"- **Signal:** {_line(cap.diagnostic_signal, 2000)}"] if cap.diagnostic_signal.strip() else []
    card += [f"- **Typical criterion:** {_line(cap.example_pattern, 2000)}"] if cap.example_pattern.strip() else []
    card += [f"- **Not this capability:** {_line(ne, 2000)}" for ne in cap.non_examples]
    return head + ([""] if head and card else []) + card


def guidance_body(
    cap: TaxonomyCapability, draft: GuidanceAnswer | None, level: str, say_undrafted: bool = True
) -> list[str]:
    """The guidance proper, with sub-headings at `level` ("##" in a capability file, "###" in a task file).
    Without a model's draft: the NO_DRAFT line (unless the caller said it once already), what is known of
    the capability, and P2/P3."""
    summary = _line(draft.summary, 4000) if draft is not None else NO_DRAFT if say_undrafted else ""
    applies = _when_it_applies(cap, summary)
    lines = ([summary, ""] if summary else []) + ([f"{level} When it applies", "", *applies, ""] if applies else [])
    lines += [f"{level} What the check needs", "", *judge_lines(cap), ""]
    if draft is None:
        return lines
    return lines + [
        f"{level} Procedure",
        "",
        *_numbered(draft.procedure),
        "",
        f"{level} Evidence that settles a verdict",
        "",
        *_bullets(draft.evidence),
        "",
        f"{level} Pitfalls",
        "",
        *_pitfall_lines(draft.pitfalls),
        "",
    ]


_SOURCE_NOTE = {
    "llm": "drafted by an LLM from the capability card, example criteria and domain notes",
    "fallback": "no guidance: the LLM's answer stayed invalid after re-asking",
}


def capability_markdown(
    cap: TaxonomyCapability,
    draft: GuidanceAnswer | None,
    examples: list[dict[str, str]],
    n_primary: int,
    n_any: int,
    source: str = "",
) -> str:
    lines = [
        f"# Judge guidance: {title(cap.name, cap.title)}",
        "",
        f"Capability `{cap.name}`: primary tag of {n_primary} criteria, needed (any tag) by {n_any}.",
        "",
        *guidance_body(cap, draft, "##"),
    ]
    if examples:
        lines += ["## Example criteria", ""]
        lines += [f"- [{_line(ex['task_id'], 120)}] {_line(ex['text'])}" for ex in examples]
        lines.append("")
    if source in _SOURCE_NOTE:
        lines += [f"<!-- {_SOURCE_NOTE[source]} -->", ""]
    return "\n".join(lines).rstrip() + "\n"


def task_markdown(
    task_id: str,
    sections: list[tuple[TaxonomyCapability, GuidanceAnswer | None, list[str]]],
    n_criteria: int,
    n_untagged: int,
) -> str:
    """One judge-guidance document for a task: a `##` section per capability its criteria need."""
    lines = [
        f"# Judge guidance for task {_line(task_id, 200)}",
        "",
        f"This task has {n_criteria} criteria; they need {len(sections)} kinds of check, one section each below, "
        "the most needed first. The criterion text always governs: "
        "this guidance says how to check, not what to require.",
    ]
    none_drafted = all(draft is None for _, draft, _ in sections)
    if sections and none_drafted:  # said once for the whole file, not once per section
        lines += ["", NO_DRAFT]
    if n_untagged:
        lines += ["", f"{n_untagged} of its criteria have no capability tag; judge them from the criterion text alone."]
    lines.append("")
    for cap, draft, ids in sections:
        lines += [
            f"## {title(cap.name, cap.title)} (`{cap.name}`)",
            "",
            f"Needed by {len(ids)} of the task's criteria: {', '.join(_line(i, 80) for i in ids[:20])}"
            + (", …" if len(ids) > 20 else "")
            + ".",
            "",
            *guidance_body(cap, draft, "###", say_undrafted=not none_drafted),
        ]
    return "\n".join(lines).rstrip() + "\n"


def write_guidance(
    run: RunDir,
    taxonomy: Taxonomy,
    criteria: pl.DataFrame,
    tags: pl.DataFrame,
    drafts: dict[str, GuidanceAnswer | None],
    examples_per_cap: int = 5,
    folder: str = FOLDER,
) -> GuidanceFiles:
    """Capability files, the routing table and per-task guidance, written atomically under run/<folder>/
    (`run` may be any folder opened as a RunDir, e.g. an export's)."""
    routed = routed_criteria(criteria, tags)
    caps = {c.name: c for c in taxonomy.capabilities}
    missing = [n for n in caps if n not in drafts]
    if missing:
        raise GuidanceError(
            f"no guidance draft for {', '.join(missing)}; fix: draft every capability of the taxonomy (draft_guidance)"
        )
    root = run.path / folder

    out = _Writing(run, caps, drafts, routed, folder)
    cap_files = _capability_files(out, examples_per_cap, getattr(drafts, "source", {}))
    task_files, task_rel = _task_files(out)
    rows = _routing(out, task_rel)

    written = set(cap_files.values()) | set(task_files.values())
    removed = [p for p in [*root.glob("*.md"), *(root / "tasks").glob("*.md")] if p not in written]
    for p in removed:
        p.unlink()
    return GuidanceFiles(
        root,
        cap_files,
        root / "routing.csv",
        task_files,
        n_criteria=routed.height,
        n_routed=sum(1 for r in rows if r["tags"]),
        removed=removed,
    )


@dataclass
class _Writing:
    """What every writer of the guidance folder reads: the run, the taxonomy's capabilities by name, their drafts,
    the routed criteria and the folder under the run."""

    run: RunDir
    caps: dict[str, TaxonomyCapability]
    drafts: dict[str, GuidanceAnswer | None]
    routed: pl.DataFrame
    folder: str


def _capability_files(out: _Writing, examples_per_cap: int, source: dict[str, str]) -> dict[str, Path]:
    """One markdown file per capability: its guidance, its counts and example criteria."""
    run, caps, drafts, routed, folder = out.run, out.caps, out.drafts, out.routed, out.folder
    cap_files: dict[str, Path] = {}
    for name, cap in caps.items():
        n_primary = routed.filter(pl.col("primary") == name).height
        n_any = routed.filter(pl.col("tags").list.contains(name)).height
        rel = f"{folder}/{name}.md"
        run.write_text(
            rel,
            capability_markdown(
                cap,
                drafts[name],
                select_examples(routed, name, examples_per_cap),
                n_primary,
                n_any,
                source.get(name, ""),
            ),
        )
        cap_files[name] = run.path / rel
    return cap_files


def _task_files(out: _Writing) -> tuple[dict[str, Path], dict[str, str]]:
    """One markdown file per task ({task: path}, {task: path under the folder})."""
    run, caps, drafts, routed, folder = out.run, out.caps, out.drafts, out.routed, out.folder
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
        rel = f"{folder}/tasks/{stem}.md"
        run.write_text(
            rel, task_markdown(task_id, [(caps[n], drafts[n], need[n]) for n in ranked], group.height, untagged)
        )
        task_files[task_id] = run.path / rel
        task_rel[task_id] = f"tasks/{stem}.md"
    return task_files, task_rel


def _routing(out: _Writing, task_rel: dict[str, str]) -> list[dict]:
    """routing.csv: per criterion its capabilities, their files, its task's file and P2/P3; the rows written."""
    run, caps, routed, folder = out.run, out.caps, out.routed, out.folder
    rows = []
    for r in routed.iter_rows(named=True):
        known = [t for t in r["tags"] if t in caps]
        rows.append(
            {
                "criterion_id": r["criterion_id"],
                "task_id": r["task_id"],
                "primary": r["primary"] if r["primary"] in caps else "",
                "tags": ";".join(known),
                "guidance_files": ";".join(f"{t}.md" for t in known),
                "task_file": task_rel[str(r["task_id"])],
                # P2/P3 of the criterion: needed when any capability it is tagged with needs it (principles.any_of)
                **{f: WORD[any_of(getattr(caps[t], f) for t in known)] for f in PRINCIPLES},
            }
        )
    schema = {
        k: pl.Utf8 for k in ("criterion_id", "task_id", "primary", "tags", "guidance_files", "task_file", *PRINCIPLES)
    }
    run.write_text(f"{folder}/routing.csv", pl.DataFrame(rows, schema=schema).write_csv())
    return rows
