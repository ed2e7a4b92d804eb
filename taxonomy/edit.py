"""`taxonomy edit RUN rename OLD NEW | merge A B | split A | describe A TEXT`: edits that propagate.

An edit writes a new taxonomy.json (new content hash) and taxonomy.md, checks the merge
constraints again (merge.check.check_merge, as Stage 2c does), and brings the Stage 3 tags
in line: a rename or a merge maps the tags exactly (a criterion tagged A or B is now tagged
with the merged capability), a split re-tags only the criteria that carried the split
capability, through the run's own backend. The taxonomy and tags it replaces are kept in
RUN/edits/<old hash>/ as a small run directory, so `taxonomy diff RUN/edits/<hash> RUN`
shows what the edit changed. Outputs built from the old taxonomy (breakdown, audit,
guidance, the distilled tagger) are listed as stale; the report is recomputed.

A split cuts the capability along its micro-clusters (two groups, Ward on their label
centroids, as the merge repair does). The LLM path names the parts through the runner;
the offline path names each part after its largest micro-capability.

A describe sets what a capability checks in a person's own sentence (`checks`), which taxonomy.md,
the report, the exports and the prompts carry as theirs; the tags stay.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict

from taxonomy.config import LabelRules, MergeConfig
from taxonomy.llm.runner import Job
from taxonomy.merge.bounds import recorded_bounds
from taxonomy.merge.check import check_merge
from taxonomy.merge.measures import capability_similarity, to_taxonomy_capabilities
from taxonomy.merge.solver import Solver, unique_valid_name
from taxonomy.offline.backend import checked
from taxonomy.offline.merge import describe_groups
from taxonomy.offline.tag import tag_with
from taxonomy.pipeline import micro_centroids
from taxonomy.prompts import render
from taxonomy.provenance import fingerprint
from taxonomy.run import (
    CRITERIA,
    DISTILLED,
    LABELS,
    LABEL_EMBEDDINGS,
    MICRO,
    TAGGER,
    TAGS,
    TAGS_SUMMARY,
    TAXONOMY,
    TAXONOMY_MD,
    RunError,
    now,
    stale_uses,
    taxonomy_in_use,
)
from taxonomy.schemas import CapabilityCard, MergedCapability, MicroCapability, Taxonomy, TaxonomyCapability
from taxonomy.shares import primary_shares, summary_markdown
from taxonomy.taxonomy_io import load_taxonomy, taxonomy_markdown
from taxonomy.validate import Violation, label_problems

OPS = ("rename", "merge", "split", "describe")
USAGE = {
    "rename": "rename OLD NEW",
    "merge": "merge A B",
    "split": "split A",
    "describe": 'describe A "what it checks"',
}
MAX_CHECKS_CHARS = 300  # one sentence a reader takes in at a glance, not a second description
# Outputs built from a run's taxonomy that the run's manifest does not track as a use (see run.stale_uses).
DEPENDENTS = {DISTILLED: "distill"}


class EditError(RunError):
    """An edit that cannot be made, on one line with the fix (a RunError: the CLI exits 2)."""


class SplitPart(CapabilityCard):
    part_idx: int


class SplitAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")
    parts: list[SplitPart]


@dataclass
class EditResult:
    op: str
    old_hash: str
    new_hash: str
    taxonomy: Taxonomy
    retagged: int
    backup: Path
    stale: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# ---- the edits on the taxonomy alone ---------------------------------------------------
def _find(taxonomy: Taxonomy, name: str) -> int:
    names = taxonomy.names()
    if name not in names:
        raise EditError(f"taxonomy.json: no capability `{name}`; fix: use one of {', '.join(names)}")
    return names.index(name)


def _check_new_name(name: str, taken: list[str], rules: LabelRules) -> None:
    problems = label_problems(name, rules)
    if problems:
        raise EditError(f"`{name}`: {problems[0]}; fix: choose a name that follows the label rules")
    if name in taken:
        raise EditError(f"`{name}` is already a capability; fix: choose a new name (or `merge` the two)")


def _name_pattern(name: str) -> re.Pattern:
    # Whole names only, so `verify_totals_capability` is not found inside `cross_verify_totals_capability`.
    return re.compile(rf"(?<![a-z_]){re.escape(name)}(?![a-z_])")


def _swap_name_in_text(text: str, old: str, new: str) -> str:
    return _name_pattern(old).sub(new, text)


def _phrases(name: str, rules: LabelRules) -> list[str]:
    """How prose names a capability: its words ("check totals match"), then without the head verb ("totals match")."""
    words = name.removesuffix(rules.suffix).split("_")
    return [" ".join(words)] + ([" ".join(words[1:])] if len(words) > 2 else [])


def _swap_name_in_prose(text: str, old: str, new: str, rules: LabelRules) -> str:
    """The name in snake form, then as words: a description written from the old name must not keep it."""
    text = _swap_name_in_text(text, old, new)
    for before, after in zip(_phrases(old, rules), _phrases(new, rules) * 2):
        text = re.sub(rf"(?<![\w-]){re.escape(before)}(?![\w-])", after, text, flags=re.IGNORECASE)
    return text


def rename_capability(taxonomy: Taxonomy, old: str, new: str, rules: LabelRules) -> Taxonomy:
    i = _find(taxonomy, old)
    _check_new_name(new, taxonomy.names(), rules)
    out = taxonomy.model_copy(deep=True)
    cap = out.capabilities[i]
    cap.name = new
    # The card's own prose, not its quoted example (a criterion's words are never rewritten).
    cap.description = _swap_name_in_prose(cap.description, old, new, rules)
    cap.diagnostic_signal = _swap_name_in_prose(cap.diagnostic_signal, old, new, rules)
    for other in out.capabilities:  # boundaries that named the old capability now name the new one
        other.non_examples = [_swap_name_in_prose(ne, old, new, rules) for ne in other.non_examples]
    return out


def describe_capability(taxonomy: Taxonomy, name: str, text: str) -> Taxonomy:
    """`text`: what the capability checks, one sentence; empty takes a person's statement back."""
    i = _find(taxonomy, name)
    text = " ".join(text.split())
    if len(text) > MAX_CHECKS_CHARS:
        raise EditError(
            f"describe `{name}`: the statement has {len(text)} characters; fix: say what it checks in one "
            f"sentence of at most {MAX_CHECKS_CHARS}"
        )
    if text and text[-1] not in ".!?。！？":
        text += "."
    out = taxonomy.model_copy(deep=True)
    out.capabilities[i].checks = text
    return out


def merge_capabilities(taxonomy: Taxonomy, a: str, b: str, labels_of: dict[str, list[str]]) -> Taxonomy:
    """B folds into A: A keeps its name and card, takes B's members, labels and phrases,
    so whatever placed a criterion in B (tags, a frozen-taxonomy audit) now places it in A; boundaries to B
    now point at A."""
    ia, ib = _find(taxonomy, a), _find(taxonomy, b)
    if ia == ib:
        raise EditError(f"merge `{a}` `{b}`: the same capability twice; fix: name two different capabilities")
    out = taxonomy.model_copy(deep=True)
    keep, gone = out.capabilities[ia], out.capabilities[ib]
    keep.members = keep.members + [m for m in gone.members if m not in keep.members]
    keep.share = round(keep.share + gone.share, 6)
    keep.labels = sorted(
        set(keep.labels) | set(gone.labels) | {lab for m in keep.members for lab in labels_of.get(m, [])}
    )
    keep.non_examples = [ne for ne in keep.non_examples if not _name_pattern(b).search(ne)]
    # A tagger reading only the cards (a model, or the offline card similarity) must still see what B held.
    keep.description = f"{keep.description.rstrip()} Merged into it: {gone.description.strip()}"
    _merge_phrases(keep, gone)
    out.capabilities.pop(ib)
    for cap in out.capabilities:  # no text names a capability that is gone
        cap.description = _swap_name_in_text(cap.description, b, a)
        cap.diagnostic_signal = _swap_name_in_text(cap.diagnostic_signal, b, a)
        if cap is not keep:
            cap.non_examples = list(dict.fromkeys(_swap_name_in_text(ne, b, a) for ne in cap.non_examples))
    return out


def _merge_phrases(keep, gone) -> None:
    """The offline scoring model of the merged capability: each phrase at the stronger of its two weights and
    the larger offset, so it outscores everything A or B outscored (a criterion of either stays in it)."""
    if not getattr(gone, "key_phrases", None):
        return
    weights = dict(zip(keep.key_phrases, keep.phrase_weights))
    for phrase, w in zip(gone.key_phrases, gone.phrase_weights):
        weights[phrase] = max(w, weights.get(phrase, w))
    keep.key_phrases, keep.phrase_weights = list(weights), list(weights.values())
    keep.score_offset = max(keep.score_offset, gone.score_offset)


# ---- split -------------------------------------------------------------------------------
Namer = Callable[[CapabilityCard, list[list[MicroCapability]], list[str]], list[CapabilityCard]]


def split_groups(
    members: list[int], micro: list[MicroCapability], centroids: np.ndarray, cfg: MergeConfig, rules: LabelRules
) -> tuple[list[int], list[int]]:
    """Two groups of micro indices; the same two-way cut the merge repair makes."""
    parts = Solver(micro, centroids, cfg, rules).bisect(members, need_min_share=True)
    if parts is None:
        raise EditError(
            "the capability has a single micro-cluster, so there is nothing to split it along; "
            "fix: split a capability with two or more members (see the report's hierarchy)"
        )
    return sorted(parts, key=lambda p: -sum(micro[i].n_criteria for i in p))


def offline_names(
    card: CapabilityCard, parts: list[list[MicroCapability]], taken: list[str], rules: LabelRules, run=None, cfg=None
) -> tuple[list[CapabilityCard], list[dict]]:
    """Each part titled, named and described from its own criteria (those whose Stage 1 label is one of its
    micro-capabilities'), as the offline merge names a capability, with its title and phrases; without the
    run's criteria on disk, after its largest micro-capability."""
    if run is not None and cfg is not None and run.has(CRITERIA) and run.has(LABELS):
        criteria = run.read_parquet(CRITERIA)
        stage1 = run.read_parquet(LABELS)
        first = dict(zip(stage1["criterion_id"].to_list(), stage1["labels"].list.first().to_list()))
        own = [first.get(cid) for cid in criteria["criterion_id"].to_list()]
        labels = [sorted({lab for m in p for lab in m.member_labels}) for p in parts]
        groups = [np.flatnonzero([lab in held for lab in own]) for held in map(set, labels)]
        if all(len(g) for g in groups):
            cards, _ = describe_groups(criteria, groups, labels, cfg, set(taken))
            shown = [{k: c[k] for k in ("title", "key_phrases", "phrase_weights")} for c in cards]
            return [
                CapabilityCard(
                    **{k: c[k] for k in ("name", "description", "diagnostic_signal", "example_pattern")},
                    non_examples=[],
                )
                for c in cards
            ], shown
    used = set(taken)
    out = []
    for members in parts:
        ranked = sorted(members, key=lambda m: (-m.n_criteria, m.name))
        name = unique_valid_name([m.name for m in ranked], used, rules)
        used.add(name)
        lead = ranked[0]
        covers = ", ".join(m.name.removesuffix(rules.suffix).replace("_", " ") for m in ranked[:6])
        out.append(
            CapabilityCard(
                name=name,
                description=f"{lead.description} It covers: {covers}.".strip(),
                diagnostic_signal=lead.diagnostic_signal or card.diagnostic_signal,
                example_pattern=lead.example_pattern or card.example_pattern,
                non_examples=[],
            )
        )
    return out, [{} for _ in parts]


def split_problems(answer: SplitAnswer, n: int, taken: list[str], rules: LabelRules) -> list[Violation]:
    out = []
    idx = sorted(p.part_idx for p in answer.parts)
    if idx != list(range(n)):
        out.append(Violation(None, f"give exactly one item per part, part_idx 0 to {n - 1}; you gave {idx}"))
    names = [p.name for p in answer.parts]
    for p in answer.parts:
        out += [Violation(None, f"part {p.part_idx}: `{p.name}`: {msg}") for msg in label_problems(p.name, rules)]
        if p.name in taken:
            out.append(
                Violation(None, f"part {p.part_idx}: `{p.name}` is already another capability; choose a new name")
            )
        if not p.description.strip() or not p.diagnostic_signal.strip():
            out.append(Violation(None, f"part {p.part_idx}: write a description and a diagnostic_signal"))
    if len(set(names)) != len(names):
        out.append(Violation(None, "give each part a different name"))
    return out


def llm_names(
    engine, card: CapabilityCard, parts: list[list[MicroCapability]], taken: list[str], rules: LabelRules, total: int
) -> tuple[list[CapabilityCard] | None, list[str]]:
    """The parts named by the model through the one runner (cached, re-asked with the violations); None where no
    model runs."""
    context = [
        {
            "share": sum(m.n_criteria for m in p) / max(total, 1),
            "members": [
                {"name": m.name, "share": m.n_criteria / max(total, 1), "description": m.description} for m in p
            ],
            "labels": [lab for m in p for lab in m.member_labels][:12],
        }
        for p in parts
    ]
    prompt = render("edit_split.j2", rules=rules, capability=card, parts=context, taken=taken)
    job = Job(
        prompt=prompt, schema=SplitAnswer, validate=partial(split_problems, n=len(parts), taken=taken, rules=rules)
    )
    answers = engine.ask("edit", [job], "Naming the parts of the split")
    if answers is None:
        return None, []
    (answer,) = answers
    if not answer.ok:
        why = "; ".join(str(v) for v in answer.violations[:3]) or "no valid answer"
        return None, [
            "the model's names for the split parts broke the rules after "
            f"{answer.attempts} attempt(s) ({why}); named offline instead"
        ]
    by_idx = {p.part_idx: p for p in answer.value.parts}
    return [CapabilityCard(**by_idx[i].model_dump(exclude={"part_idx"})) for i in range(len(parts))], []


def split_capability(
    taxonomy: Taxonomy,
    name: str,
    micro: list[MicroCapability],
    centroids: np.ndarray,
    cfg: MergeConfig,
    rules: LabelRules,
    engine,
    keep_name: bool = False,
    run=None,
    pipeline_cfg=None,
) -> tuple[Taxonomy, list[str]]:
    """`keep_name`: the name was given by hand (`edit rename`), so the largest part keeps it and the card
    it was given; the other parts are named afresh."""
    i = _find(taxonomy, name)
    cap = taxonomy.capabilities[i]
    groups = split_groups(_member_indices(cap, micro), micro, centroids, cfg, rules)
    parts = [[micro[k] for k in g] for g in groups]
    taken = [n for n in taxonomy.names() if n != name or keep_name]
    cards, shown, notes = _part_cards(
        cap, parts, taken, rules, engine, sum(m.n_criteria for m in micro), run, pipeline_cfg
    )
    if keep_name:  # parts come largest first
        notes.append(_keep_name(cap, cards, shown, len(parts[0])))
    out = taxonomy.model_copy(deep=True)
    new_caps = _part_capabilities(cap, cards, shown, parts, micro)
    # Other capabilities' boundaries that named the split one now name both parts.
    both = " or ".join(f"`{c.name}`" for c in new_caps)
    for other in out.capabilities:
        other.non_examples = [ne.replace(f"`{name}`", both) for ne in other.non_examples]
    out.capabilities[i : i + 1] = new_caps
    return out, notes


def _member_indices(cap: TaxonomyCapability, micro: list[MicroCapability]) -> list[int]:
    """Where the capability's micro-capabilities sit in `micro`: each must be on disk to be split along."""
    index = {m.name: k for k, m in enumerate(micro)}
    missing = [m for m in cap.members if m not in index]
    if missing:
        raise EditError(
            f"micro_capabilities.json: no micro-capability {', '.join(missing)} of `{cap.name}`; "
            "fix: split a taxonomy built in this run (its micro-clusters must be on disk)"
        )
    return [index[m] for m in cap.members]


def _part_cards(
    cap: TaxonomyCapability,
    parts: list[list[MicroCapability]],
    taken: list[str],
    rules: LabelRules,
    engine,
    total: int,
    run=None,
    pipeline_cfg=None,
) -> tuple[list[CapabilityCard], list[dict], list[str]]:
    """A card per part, named by the model or, where none runs or its names break the rules, offline; with what
    the offline naming shows of each part (title, phrases) and notes for the user."""
    cards, notes = llm_names(engine, cap, parts, taken, rules, total)
    shown: list[dict] = [{} for _ in parts]
    if cards is None:
        # A part titled by its own phrases may spell the split capability's name, which would then name another
        # set of criteria than the one tagged with it before the edit.
        cards, shown = offline_names(
            cap, parts, [*taken, cap.name] if cap.name not in taken else taken, rules, run, pipeline_cfg
        )
    return cards, shown, notes


def _keep_name(cap: TaxonomyCapability, cards: list[CapabilityCard], shown: list[dict], n_largest: int) -> str:
    """The largest part (first) takes the hand-given name and card in `cards` and `shown`; returns the note."""
    cards[0] = CapabilityCard(
        **cap.model_dump(include={"name", "description", "diagnostic_signal", "example_pattern"}), non_examples=[]
    )
    shown[0] = cap.model_dump(include={"title", "key_phrases", "phrase_weights"})
    return (
        f"`{cap.name}` was named by hand: its largest part keeps the "
        f"name ({n_largest} of {len(cap.members)} micro-clusters)"
    )


def _part_capabilities(
    cap: TaxonomyCapability,
    cards: list[CapabilityCard],
    shown: list[dict],
    parts: list[list[MicroCapability]],
    micro: list[MicroCapability],
) -> list[TaxonomyCapability]:
    """The parts as taxonomy capabilities: their cards, members, labels and shares, and what the whole needed."""
    proposal = [
        MergedCapability(**c.model_dump(), member_input_names=[m.name for m in p]) for c, p in zip(cards, parts)
    ]
    new_caps = to_taxonomy_capabilities(proposal, micro)
    for c, p, extra in zip(new_caps, parts, shown):
        c.labels = sorted({lab for m in p for lab in m.member_labels})
        for key, value in extra.items():
            setattr(c, key, value)
        for key in ("needs_native_inspection", "needs_domain_conventions"):
            if getattr(c, key) is None and not getattr(c, f"{key}_reason"):  # a part needs what the whole needed
                setattr(c, key, getattr(cap, key))
                setattr(c, f"{key}_reason", getattr(cap, f"{key}_reason"))
    return new_caps


# ---- constraints ---------------------------------------------------------------------
def constraint_violations(
    taxonomy: Taxonomy, micro: list[MicroCapability], centroids: np.ndarray | None, cfg: MergeConfig, rules: LabelRules
) -> list[str]:
    proposal = [
        MergedCapability(**c.model_dump(include=set(CapabilityCard.model_fields)), member_input_names=c.members)
        for c in taxonomy.capabilities
    ]
    similarity = capability_similarity(proposal, micro, centroids) if centroids is not None else None
    return [str(v) for v in check_merge(proposal, micro, cfg, rules, similarity)]


def add_boundaries(
    taxonomy: Taxonomy, micro: list[MicroCapability], centroids: np.ndarray, cfg: MergeConfig, rules: LabelRules
) -> list[str]:
    """Confusable pairs get boundary sentences naming each other, as the merge repair adds them."""
    proposal = [
        MergedCapability(**c.model_dump(include=set(CapabilityCard.model_fields)), member_input_names=c.members)
        for c in taxonomy.capabilities
    ]
    solver = Solver(micro, centroids, cfg, rules)
    solver.add_boundaries(proposal)
    for cap, p in zip(taxonomy.capabilities, proposal):
        cap.non_examples = list(p.non_examples)
    return solver.repairs


# ---- tags -------------------------------------------------------------------------------
def map_tags(tags: pl.DataFrame, mapping: dict[str, str]) -> pl.DataFrame:
    """Tags renamed through `mapping`, duplicates dropped keeping the first (so the rank order holds)."""
    new = [list(dict.fromkeys(mapping.get(t, t) for t in (ts or []))) for ts in tags["tags"].to_list()]
    return tags.with_columns(
        tags=pl.Series(new, dtype=pl.List(pl.Utf8)),
        primary=pl.Series([t[0] if t else None for t in new], dtype=pl.Utf8),
    )


def retag_rows(tags: pl.DataFrame, fresh: pl.DataFrame) -> pl.DataFrame:
    """`tags` with the rows of `fresh` (same criterion ids) replaced, in the original order."""
    fresh = fresh.select(tags.columns)
    return (
        tags.with_row_index("_at")
        .join(fresh.select("criterion_id"), on="criterion_id", how="anti")
        .vstack(tags.with_row_index("_at").select("_at", "criterion_id").join(fresh, on="criterion_id"))
        .sort("_at")
        .drop("_at")
    )


# ---- the command -------------------------------------------------------------------------
def dependents(run_dir: Path, old_hash: str) -> list[str]:
    return [
        f"{name} was built with taxonomy {old_hash}; re-run `taxonomy {cmd}`"
        for name, cmd in DEPENDENTS.items()
        if (run_dir / name).exists()
    ]


def backup(run_dir: Path, taxonomy_hash: str) -> Path:
    """The replaced taxonomy and tags as a run directory of their own, for `taxonomy diff`."""
    dest = run_dir / "edits" / taxonomy_hash[:16]
    dest.mkdir(parents=True, exist_ok=True)
    for name in (TAXONOMY, TAXONOMY_MD, TAGS, CRITERIA, TAGGER):
        if (run_dir / name).exists() and not (dest / name).exists():
            shutil.copy2(run_dir / name, dest / name)
    return dest


def apply_edit(s, op: str, args: list[str], allow_violations: bool = False) -> EditResult:
    """Edit the taxonomy of the session's run and propagate it. `s` is a pipeline Session."""
    run = s.run
    _check_args(op, args)
    taxonomy_in_use(run, "edit")  # the tags on disk must belong to this taxonomy before they are carried over
    old = load_taxonomy(run.need(TAXONOMY, "merge"), s.cfg.labels)
    tags = run.read_parquet(TAGS, "tag")
    micro = [MicroCapability.model_validate(m) for m in run.read_json(MICRO)] if run.has(MICRO) else []
    centroids = micro_centroids(run, micro) if micro and run.has(LABEL_EMBEDDINGS) else None
    bounds = recorded_bounds(run.manifest, s.cfg.merge)
    before = constraint_violations(old, micro, centroids, bounds, s.cfg.labels) if micro else []
    fitted = s.backend.fitted_tagger(run.path)  # read once: the split re-tags with it, and it follows the edit
    new, new_tags, retagged, notes = _changed(s, op, args, old, tags, micro, centroids, fitted)
    if op in ("merge", "split"):
        _shares_from_tags(new, new_tags)
    after = constraint_violations(new, micro, centroids, bounds, s.cfg.labels) if micro else []
    if not micro:
        notes.append("merge constraints not checked: this run has no micro_capabilities.json")
    introduced = [v for v in after if v not in before]
    if introduced and not allow_violations:
        raise EditError(
            f"{run.path / TAXONOMY}: the {op} breaks {len(introduced)} merge constraint(s): {introduced[0]}"
            f"{' (and more)' if len(introduced) > 1 else ''}; nothing was written; fix: edit differently, "
            "or pass --accept-violations to keep it with the violations recorded"
        )
    new.repairs = [r for r in old.repairs if not r.startswith("unresolved:")] + [
        f"edit: {op} {' '.join(args)} ({now()})"
    ]
    if "violations" in Taxonomy.model_fields:  # where the merge stage records accepted violations
        new.violations = after
    else:
        new.repairs += [f"unresolved: {v}" for v in after]
    new.content_hash = new.compute_hash()
    if new.content_hash == old.content_hash:
        raise EditError(f"edit {op} {' '.join(args)}: the taxonomy would not change; fix: nothing to do")

    return _write(s, op, args, old, new, new_tags, retagged, after, notes, fitted)


def _changed(
    s,
    op: str,
    args: list[str],
    old: Taxonomy,
    tags: pl.DataFrame,
    micro: list[MicroCapability],
    centroids: np.ndarray | None,
    fitted=None,
) -> tuple[Taxonomy, pl.DataFrame, int, list[str]]:
    """The edited taxonomy, its tags, how many criteria were re-tagged, and notes for the user (`fitted`: the
    run's key-less tagger, None for a run without one)."""
    run = s.run
    notes: list[str] = []
    retagged = 0
    if op == "rename":
        new = rename_capability(old, args[0], args[1], s.cfg.labels)
        new_tags = map_tags(tags, {args[0]: args[1]})
    elif op == "describe":
        new, new_tags = describe_capability(old, args[0], args[1]), tags
    elif op == "merge":
        new = merge_capabilities(old, args[0], args[1], {m.name: m.member_labels for m in micro})
        if old.capabilities[_find(old, args[1])].checks:
            notes.append(f"`{args[1]}`'s statement of what it checks went with it; `{args[0]}` keeps its own")
        new_tags = map_tags(tags, {args[1]: args[0]})
        retagged = tags.filter(pl.col("tags").list.contains(args[1])).height
    else:
        if not micro or centroids is None:
            raise EditError(
                f"{run.path}: split needs micro_capabilities.json, clusters.parquet and label_embeddings.npy; "
                "fix: split in the run that built the taxonomy"
            )
        renamed = any(
            e.get("op") == "rename" and e.get("args", [None, None])[1] == args[0] for e in run.manifest.get("edits", [])
        )
        new, notes = split_capability(
            old,
            args[0],
            micro,
            centroids,
            s.cfg.merge,
            s.cfg.labels,
            s.backend,
            keep_name=renamed,
            run=run,
            pipeline_cfg=s.cfg,
        )
        new.capabilities = _with_shares(new, micro)
        notes += add_boundaries(new, micro, centroids, s.cfg.merge, s.cfg.labels)
        affected = tags.filter(pl.col("tags").list.contains(args[0]))
        fresh = _retag(s, new, affected["criterion_id"], fitted)
        new_tags = retag_rows(tags, fresh)
        retagged = fresh.height
    return new, new_tags, retagged, notes


def _check_args(op: str, args: list[str]) -> None:
    if op not in OPS:
        raise EditError(f"edit {op}: unknown edit; fix: use one of {', '.join(OPS)}")
    want = {"rename": 2, "merge": 2, "split": 1, "describe": 2}[op]
    if len(args) != want:
        what = "a capability name and a sentence in quotes" if op == "describe" else f"{want} capability name(s)"
        raise EditError(f"edit {op}: takes {what}, got {len(args)} argument(s); fix: taxonomy edit RUN {USAGE[op]}")


def _write(
    s,
    op: str,
    args: list[str],
    old: Taxonomy,
    new: Taxonomy,
    new_tags: pl.DataFrame,
    retagged: int,
    after: list[str],
    notes: list[str],
    fitted=None,
) -> EditResult:
    """The edited taxonomy and tags replace the run's, the old ones kept in edits/<hash>/, and the tags'
    provenance names the new taxonomy."""
    run = s.run
    saved = backup(run.path, old.content_hash)
    stale = dependents(run.path, old.content_hash)
    run.write_json(TAXONOMY, new.model_dump())
    if fitted is not None:  # the key-less tagger follows the edit, so a frozen tag of the new taxonomy applies it
        _edited_tagger(fitted, new).save(run.path)
    run.write_text(TAXONOMY_MD, taxonomy_markdown(new, primary_shares(new_tags)))
    run.write_parquet(TAGS, new_tags)
    run.write_text(TAGS_SUMMARY, summary_markdown(primary_shares(new_tags)))
    record: dict[str, Any] = {
        "op": op,
        "args": args,
        "from_hash": old.content_hash,
        "to_hash": new.content_hash,
        "retagged": retagged,
        "finished": now(),
        "backup": str(saved.relative_to(run.path)),
    }
    run.manifest.setdefault("edits", []).append(record)
    tag_info = (run.manifest.get("stages") or {}).get("tag")
    if isinstance(tag_info, dict):
        # The tags on disk are now those of the edited taxonomy: their provenance says so, so the
        # uses accept them and `taxonomy run` does not re-tag from scratch.
        digest, parts = fingerprint(s, "tag", new.content_hash)
        tag_info.update(
            taxonomy_hash=new.content_hash, fingerprint=digest, fingerprint_parts=parts, edited=record["finished"]
        )
    run.save_manifest()
    stale = list(stale_uses(run).values()) + stale
    return EditResult(op, old.content_hash, new.content_hash, new, retagged, saved, stale, after, notes)


def _shares_from_tags(taxonomy: Taxonomy, tags: pl.DataFrame) -> None:
    """Each capability's share as its primary tags give it, so taxonomy.md, the report and the tag
    counts beside them say the same (an edit moves tags, not the micro counts Stage 2c started from)."""
    counts = dict(tags.filter(pl.col("primary").is_not_null()).group_by("primary").len().iter_rows())
    for cap in taxonomy.capabilities:
        cap.share = round(counts.get(cap.name, 0) / max(tags.height, 1), 6)


def _with_shares(taxonomy: Taxonomy, micro: list[MicroCapability]):
    """Every capability's share recomputed from the micro counts, as Stage 2c computes them (they sum to one)."""
    proposal = [
        MergedCapability(**c.model_dump(include=set(CapabilityCard.model_fields)), member_input_names=c.members)
        for c in taxonomy.capabilities
    ]
    fresh = to_taxonomy_capabilities(proposal, micro)
    for cap, f in zip(taxonomy.capabilities, fresh):
        cap.share = f.share
    return taxonomy.capabilities


def _edited_tagger(tagger, taxonomy: Taxonomy):
    """The run's key-less tagger with its capabilities those of the edited taxonomy: the same fit (transform,
    prototypes, offsets), each prototype owned by the capability that now holds its label."""
    return tagger.bind(taxonomy, {member: cap.labels for cap in taxonomy.capabilities for member in cap.members})


def _retag(s, taxonomy: Taxonomy, ids: pl.Series, fitted=None) -> pl.DataFrame:
    """Stage 3 over just these criteria, through the run's backend (offline: the run's tagger `fitted`, bound to
    the edit)."""
    criteria = s.run.read_parquet(CRITERIA).filter(pl.col("criterion_id").is_in(ids.to_list()))
    if fitted is not None:
        return checked(
            tag_with(_edited_tagger(fitted, taxonomy), criteria, s.cfg.tag.max_tags), taxonomy.names(), s.cfg.tag
        )
    stage1 = s.run.read_parquet(LABELS) if s.run.has(LABELS) else None
    if stage1 is not None:
        stage1 = stage1.filter(pl.col("criterion_id").is_in(ids.to_list()))
    micro_labels = {member: cap.labels for cap in taxonomy.capabilities for member in cap.members}
    return s.backend.tag(criteria, taxonomy, s.cfg, stage1, micro_labels)
