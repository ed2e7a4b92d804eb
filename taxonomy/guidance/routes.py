"""What every export routes: each task's brief and criteria (weight, penalty sign, ranked capabilities),
grouped by the capabilities they need, and the text a judge gets for one group."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from taxonomy.config import ExportConfig
from taxonomy.guidance.files import guidance_body
from taxonomy.guidance.model import GuidanceAnswer, GuidanceDrafts, GuidanceError
from taxonomy.schemas import Taxonomy, TaxonomyCapability

UNTAGGED = "untagged"  # the group of a task's criteria that Stage 3 gave no capability


class ExportError(GuidanceError):
    """An export that cannot be written as asked (bad input, a contradictory setting), on one line with the fix."""


@dataclass(frozen=True)
class Criterion:
    criterion_id: str
    task_id: str
    text: str
    weight: float
    penalty: bool
    capabilities: tuple[str, ...]  # ranked, most confident first

    @property
    def primary(self) -> str | None:
        return self.capabilities[0] if self.capabilities else None


@dataclass
class Task:
    task_id: str
    brief: str
    criteria: list[Criterion] = field(default_factory=list)

    def groups(self, order: dict[str, int]) -> list[tuple[str, list[Criterion]]]:
        """(capability, its criteria in task order), the most needed capability first (ties: taxonomy order);
        criteria with no capability last, under UNTAGGED, so no criterion is left out of a grader."""
        need: dict[str, list[Criterion]] = {}
        for c in self.criteria:
            for cap in c.capabilities:
                need.setdefault(cap, []).append(c)
        ranked = sorted(need, key=lambda n: (-len(need[n]), order[n]))
        out = [(n, need[n]) for n in ranked]
        untagged = [c for c in self.criteria if not c.capabilities]
        return out + ([(UNTAGGED, untagged)] if untagged else [])


def load_tasks(taxonomy: Taxonomy, criteria: pl.DataFrame, tags: pl.DataFrame) -> list[Task]:
    """Tasks in corpus order. A tag outside the taxonomy means the tags and taxonomy disagree: an error."""
    known = set(taxonomy.names())
    tagged = dict(zip(tags["criterion_id"].to_list(), tags["tags"].to_list()))
    cols = set(criteria.columns)
    tasks: dict[str, Task] = {}
    for r in criteria.iter_rows(named=True):
        caps = tuple(tagged.get(r["criterion_id"]) or ())
        unknown = [c for c in caps if c not in known]
        if unknown:
            raise ExportError(
                f"stage3_tags.parquet: criterion {r['criterion_id']} is "
                f"tagged {unknown[0]!r}, which is not in taxonomy.json; "
                "fix: re-run `taxonomy tag RUN_DIR` against the current taxonomy"
            )
        weight = float(r["weight"]) if "weight" in cols and r["weight"] is not None else 1.0
        penalty = weight < 0 or ("direction" in cols and r["direction"] == "penalty")
        task = tasks.setdefault(str(r["task_id"]), Task(str(r["task_id"]), ""))
        if not task.brief and "brief" in cols and r["brief"]:
            task.brief = str(r["brief"])
        task.criteria.append(
            Criterion(str(r["criterion_id"]), task.task_id, str(r["text"] or ""), weight, penalty, caps)
        )
    return list(tasks.values())


# ---- the text a judge gets --------------------------------------------------------------
RULES = (
    "Judge each criterion on its own, met or unmet, from evidence "
    "in the agent's work (its files, outputs and actions), "
    "never from the agent's own account of it. A criterion with a positive weight is a requirement: it counts for the "
    "agent when met. A criterion marked penalty (negative weight) "
    "describes a fault: it counts against the agent when it "
    "holds. The criterion text governs; the guidance says how to check, not what to require."
)
BINARY = "Score 1 (pass) only if every requirement listed is met and no penalty listed holds; otherwise score 0 (fail)."


def criterion_line(i: int, c: Criterion) -> str:
    sign = f"{c.weight:+g}"
    label = f"weight {sign}, penalty" if c.penalty else f"weight {sign}"
    return f"{i}. [{label}] {' '.join(c.text.split())} (criterion {c.criterion_id})"


def criteria_block(criteria: list[Criterion]) -> str:
    return "\n".join(criterion_line(i, c) for i, c in enumerate(criteria, 1))


def guidance_text(cap: TaxonomyCapability | None, draft: GuidanceAnswer | None) -> str:
    """A capability's guidance as markdown with `###` sub-headings (the one no-draft line where no model
    drafted it); a fixed line for untagged criteria (cap None)."""
    if cap is None:
        return (
            "No capability guidance applies to these criteria (Stage 3 gave "
            "them no capability); judge them from the criterion text alone."
        )
    return "\n".join(guidance_body(cap, draft, "###")).strip()


# ---- what a format writes from, and what it wrote ---------------------------------------
@dataclass(frozen=True)
class ExportInputs:
    """What every export format writes from: the run's tasks with their routed criteria, the judge's view
    of the taxonomy, the drafted guidance, and the run and taxonomy it came from (for headers)."""

    run_name: str
    taxonomy_hash: str
    tasks: list[Task]
    taxonomy: Taxonomy
    drafts: GuidanceDrafts
    criteria: pl.DataFrame
    tags: pl.DataFrame
    cfg: ExportConfig
    judge_model: str


@dataclass
class Written:
    files: list[Path]
    counts: dict[str, int]


def jsonl_text(rows: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
