"""taxonomy.json in and taxonomy.md out. A hand-edited taxonomy is checked before Stage 3 uses it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from taxonomy.config import LabelRules
from taxonomy.corpus.jsonio import decode
from taxonomy.schemas import DISSOLVED, STABLE, STATED, Taxonomy
from taxonomy.validate import label_problems


# Keys a taxonomy.json written by an older rubric-taxonomy may hold, dropped when it is loaded.
OLD_KEYS = ("placement", "placement_hash")


class TaxonomyError(ValueError):
    """A malformed taxonomy file, on one line naming the file, the place and the fix."""


def load_taxonomy(path: str | Path, rules: LabelRules | None = None) -> Taxonomy:
    path = Path(path)
    if not path.is_file():
        raise TaxonomyError(f"{path}: no such taxonomy file; fix: point to the taxonomy.json of a finished run")
    try:
        raw = json.loads(decode(path.read_bytes()))
    except json.JSONDecodeError as exc:
        raise TaxonomyError(
            f"{path}: line {exc.lineno}: invalid JSON ({exc.msg}); fix: correct the edit at that line"
        ) from None
    except UnicodeDecodeError as exc:
        raise TaxonomyError(
            f"{path}: not {exc.encoding.upper()} text (byte {exc.start}); fix: save the edited taxonomy as UTF-8"
        ) from None
    if isinstance(raw, dict):  # older files: the offline backend's placement list, no longer written or read
        for key in OLD_KEYS:
            raw.pop(key, None)
    try:
        taxonomy = Taxonomy.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise TaxonomyError(
            f"{path}: {where}: {err['msg']}; fix: every capability needs name, "
            "description, diagnostic_signal, example_pattern, non_examples, members"
        ) from None
    if not taxonomy.capabilities:
        raise TaxonomyError(f"{path}: capabilities: empty; fix: list at least one capability")
    rules = rules or LabelRules()
    seen: set[str] = set()
    for i, cap in enumerate(taxonomy.capabilities):
        problems = label_problems(cap.name, rules)
        if problems:
            raise TaxonomyError(f"{path}: capabilities.{i}.name: {problems[0]}; fix: rename it")
        if cap.name in seen:
            raise TaxonomyError(
                f"{path}: capabilities.{i}.name: `{cap.name}` appears twice; fix: give each capability a unique name"
            )
        seen.add(cap.name)
    # A hand edit changes the content; the hash then names the edited taxonomy, not the generated one.
    taxonomy.content_hash = taxonomy.compute_hash()
    return taxonomy


def principle_mark(value: bool | None) -> str:
    """✓ needed, – not needed, ? unknown (the offline backend does not decide)."""
    return "?" if value is None else "✓" if value else "–"


def _stated(c) -> str:
    """A person's statement of what the capability checks (`taxonomy edit describe`), marked as theirs."""
    return f"**{STATED}:** {c.checks} " if c.checks else ""


# Said once at the top of a key-less taxonomy: what it is, and the three ways to add meaning.
NO_MODEL = (
    "No model read these criteria: each capability is a group of criteria worded alike, titled by the phrases "
    "that set it apart and shown by criteria quoted as written. To add meaning, set a key "
    "(`export GEMINI_API_KEY=...`) and run again, use a local server (`--provider openai` with `llm.base_url`), "
    'or say what a capability checks yourself: `taxonomy edit RUN describe NAME "what it checks"`.'
)


def _principles(taxonomy: Taxonomy) -> tuple[bool, list[str]]:
    """Whether P2/P3 are undecided for every capability, and the lines that say so once (a column of "?" under
    every capability tells a reader nothing), with why; whoever wrote the taxonomy (a run, an edit), one rule."""
    caps = taxonomy.capabilities
    if all(c.needs_native_inspection is None and c.needs_domain_conventions is None for c in caps):
        why = dict.fromkeys(
            r for c in caps for r in (c.needs_native_inspection_reason, c.needs_domain_conventions_reason) if r
        )
        return True, [
            "Design principles (the paper's Section 4): P1 reactive verification applies to every capability. "
            "P2 (needs native inspection of the artifacts) and P3 "
            "(needs domain conventions absent from the criterion text) "
            f"are left out of the table, since every capability has the same answer. {' '.join(why)}".rstrip(),
            "",
        ]
    return False, [
        "Design principles (the paper's Section 4): P1 reactive verification applies to every capability; "
        "P2 = needs native inspection of the artifacts (properties lost when flattened to text or rendered); "
        "P3 = needs domain conventions absent from the criterion text. ✓ yes, – no, ? unknown.",
        "",
    ]


def _section(c, offline: bool, said_once: bool, size: tuple[int, float]) -> list[str]:
    head = ["", f"## `{c.name}`" + (f": {c.title}" if c.title else ""), ""] + (
        [_stated(c).strip(), ""] if c.checks else []
    )
    if offline:  # its size and its criteria: the rest would be statistics no reader acts on
        return head + [f"{size[0]} criteria ({100 * size[1]:.1f}%). {c.description}"]
    lines = head + [
        c.description,
        "",
        f"- **Diagnostic signal:** {c.diagnostic_signal}",
        f"- **Example:** {c.example_pattern}",
        "- **Members:** " + ", ".join(f"`{m}`" for m in c.members),
    ]
    if not said_once:
        lines += [
            (
                f"- **P2, native inspection:** {principle_mark(c.needs_native_inspection)} "
                f"{c.needs_native_inspection_reason}"
            ).rstrip(),
            (
                f"- **P3, domain conventions:** {principle_mark(c.needs_domain_conventions)} "
                f"{c.needs_domain_conventions_reason}"
            ).rstrip(),
        ]
    return lines + [f"- **Boundary:** {ne}" for ne in c.non_examples]


def _sizes(taxonomy: Taxonomy, shares: Any) -> tuple[dict[str, tuple[int, float]], str, str]:
    """Each capability's (criteria, share), the table's column name and the sentence saying what the share is.
    `shares` is Stage 3's (shares.primary_shares): once the criteria are tagged, the share every other
    figure (the summary, the report) gives; before, Stage 2c's estimate, named as such."""
    if shares is not None:
        tagged = {r["capability"]: (int(r["n"]), float(r["share"])) for r in shares.iter_rows(named=True)}
        return (
            {c.name: tagged.get(c.name, (0, 0.0)) for c in taxonomy.capabilities},
            "share (Stage 3)",
            "Share: the capability's share of all criteria as primary "
            "Stage 3 tag, as in stage3_summary.md and the report.",
        )
    n = taxonomy.n_criteria
    return (
        {c.name: (round(c.share * n), c.share) for c in taxonomy.capabilities},
        "share at merge",
        "Share at merge: the criteria whose most frequent micro-cluster maps to the capability (Stage 2c's estimate); "
        "Stage 3 tags each criterion and gives the final share.",
    )


def stability_note(taxonomy: Taxonomy) -> str:
    """What the stability column means and how to read it, with how it was computed."""
    run = taxonomy.stability
    return (
        f"Stability: how sure the run is of each capability. Over {run.resamples} resamples of "
        f"{run.criteria_per_resample} criteria, Stage 2a clustered their labels again (the run's own embeddings, "
        "no model call) and each new micro-cluster went to the nearest capability; the figure is the mean "
        "Jaccard overlap of the capability's criteria with the group they landed in. "
        f"{STABLE} or more: stable, its criteria stay together; below {DISSOLVED}: dissolved, one sample's guess "
        "whose criteria belong with other capabilities. Each criterion's agreement (the share of resamples "
        "in which it stayed in its primary capability) is in stage3_stability.parquet."
    )


def _stability_cell(value: float | None) -> str:
    if value is None:
        return "–"
    word = "stable" if value >= STABLE else "dissolved" if value < DISSOLVED else "unsure"
    return f"{value:.2f} {word}"


def taxonomy_markdown(taxonomy: Taxonomy, shares: Any = None) -> str:
    offline = taxonomy.written_by == "offline"
    said_once, principles = _principles(taxonomy)
    sizes, share_column, share_note = _sizes(taxonomy, shares)
    caps = sorted(taxonomy.capabilities, key=lambda c: -sizes[c.name][1])  # largest first, as the printed summary
    lines = [
        f"# Capability taxonomy: {taxonomy.corpus or 'corpus'}",
        "",
        f"{len(caps)} {'capability' if len(caps) == 1 else 'capabilities'} over {taxonomy.n_criteria} "
        f"{'criterion' if taxonomy.n_criteria == 1 else 'criteria'}; content hash `{taxonomy.content_hash}`.",
        "",
    ]
    if taxonomy.violations:  # first, so no reader takes the shares below at face value
        lines += (
            ["**Broken constraints** (kept with --accept-violations):", ""]
            + [f"- {v}" for v in taxonomy.violations]
            + [""]
        )
    if offline:
        lines += [NO_MODEL, ""]
    lines += principles + [share_note, ""]
    stability = taxonomy.stability_figures()  # None when not computed, or computed for another membership
    if stability is not None:
        lines += [stability_note(taxonomy), ""]
    columns = [] if said_once else ["P1", "P2", "P3"]
    lines += [
        f"| capability | {share_column} | "
        + ("stability | " if stability is not None else "")
        + "".join(f"{col} | " for col in columns)
        + ("title |" if offline else "description |"),
        "|---|---:|" + ("---:|" if stability is not None else "") + ":-:|" * len(columns) + "---|",
    ]
    for c in caps:
        marks = (
            []
            if said_once
            else ["✓", principle_mark(c.needs_native_inspection), principle_mark(c.needs_domain_conventions)]
        )
        first = f"`{c.name}`" if offline or not c.title else f"`{c.name}` ({c.title})"
        last = f"{_stated(c)}{c.title if offline else c.description}"
        sure = f"{_stability_cell(stability[c.name])} | " if stability is not None else ""
        lines.append(
            f"| {first} | {100 * sizes[c.name][1]:.1f}% | {sure}" + "".join(f"{m} | " for m in marks) + f"{last} |"
        )
    for c in caps:
        lines += _section(c, offline, said_once, sizes[c.name])
    if taxonomy.repairs:
        lines += ["", "## Repairs made in code", ""] + [f"- {r}" for r in taxonomy.repairs]
    return "\n".join(lines) + "\n"
