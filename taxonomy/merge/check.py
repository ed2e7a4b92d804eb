"""The merge checker: every broken merge rule as a message that says what to change, and the hard
constraints a taxonomy must meet to be served."""

from __future__ import annotations

from collections import Counter

import numpy as np

from taxonomy.config import LabelRules, MergeConfig
from taxonomy.merge.measures import EPS, first_owner_members, micro_index, micro_weights, pct
from taxonomy.merge.siblings import choose_siblings, non_example_problems
from taxonomy.schemas import MergedCapability, MicroCapability
from taxonomy.validate import Violation, label_problems

# A card's text fields, each with what to write when it is empty.
CARD_FIELDS = {
    "description": "write 1-2 sentences on what the verifier checks",
    "diagnostic_signal": "write one sentence on the cue in a criterion that calls for it",
    "example_pattern": "write a 1-2 sentence example criterion",
}


def check_merge(
    proposal: list[MergedCapability],
    micro: list[MicroCapability],
    cfg: MergeConfig,
    rules: LabelRules,
    similarity: np.ndarray | None,
    co_counts: np.ndarray | None = None,
    cards: bool = True,
) -> list[Violation]:
    """Every broken merge rule as a message that says what to change (empty when all hold).
    `cards=False` leaves out the rules about one capability's own card (its name's form, empty fields,
    a name used twice): the LLM merge asks about those in a focused follow-up (`card_problems`).

    `similarity` is `capability_similarity(proposal, micro, centroids)`; with None the
    non-example rule is skipped and the min-share message names no neighbour. `co_counts`
    (capabilities x capabilities, criteria labelled into both) joins the choice of siblings.
    """
    out: list[str] = []
    index = micro_index(micro)
    w = micro_weights(micro)
    members = first_owner_members(proposal, index)
    shares = [w[m].sum() / max(w.sum(), EPS) for m in members]
    by_share = sorted(range(len(proposal)), key=lambda c: (-shares[c], c))
    n = len(proposal)
    if similarity is not None and np.shape(similarity) != (n, n):
        raise ValueError(f"similarity must be {n}x{n} (one row per capability), got {np.shape(similarity)}")

    out += _count_problems(proposal, by_share, cfg)
    out += _mapping_problems(proposal, micro, index)

    out += _share_problems(proposal, micro, members, shares, w, similarity, cfg)

    if cards:
        for cap in proposal:
            out += card_problems(cap, rules)
        for name, count in Counter(c.name for c in proposal).items():
            if count > 1:
                out.append(f"the name `{name}` is used by {count} capabilities; give each capability a distinct name")

    if similarity is not None:
        # Every capability draws boundaries against its nearest siblings (merge/siblings.py), no cosine cut-off.
        out += non_example_problems(
            [c.name for c in proposal], [c.non_examples for c in proposal], choose_siblings(similarity, co_counts)
        )
    return [Violation(None, msg) for msg in out]


def _share_problems(
    proposal: list[MergedCapability],
    micro: list[MicroCapability],
    members: list[list[int]],
    shares: list[float],
    w: np.ndarray,
    similarity: np.ndarray | None,
    cfg: MergeConfig,
) -> list[str]:
    """A capability above the maximum share (with its members to split along), without members, or below the
    minimum share (with its nearest neighbour to merge into)."""
    out: list[str] = []
    n = len(proposal)
    for c, cap in enumerate(proposal):
        if shares[c] > cfg.max_share + EPS:
            parts = ", ".join(micro[i].name for i in sorted(members[c], key=lambda i: (-w[i], i)))
            out.append(
                f"`{cap.name}` holds {shares[c]:.1%} of criteria (max "
                f"{pct(cfg.max_share)}); split it along its members: {parts}"
            )
        elif not members[c]:
            out.append(f"`{cap.name}` has no valid members; give it input names or drop it")
        elif shares[c] < cfg.min_share - EPS:
            hint = ""
            if similarity is not None and n > 1:
                row = [(similarity[c, d], -d) for d in range(n) if d != c]
                hint = f" (nearest: `{proposal[-max(row)[1]].name}`)"
            out.append(
                f"`{cap.name}` holds {shares[c]:.1%} of criteria (min "
                f"{pct(cfg.min_share)}); merge it into its nearest neighbour{hint}"
            )
    return out


def _count_problems(proposal: list[MergedCapability], by_share: list[int], cfg: MergeConfig) -> list[str]:
    """Too few or too many capabilities, with which to split or merge."""
    n, span = len(proposal), f"{cfg.min_caps}-{cfg.max_caps}"
    if n < cfg.min_caps:
        broad = ", ".join(f"`{proposal[c].name}`" for c in by_share[:2])
        fix = f"split the broadest ({broad}) along their members" if broad else "map the input names into capabilities"
        return [f"you gave {n} capabilities; give {span}: {fix}"]
    if n > cfg.max_caps:
        small = ", ".join(f"`{proposal[c].name}`" for c in by_share[cfg.max_caps :][::-1])
        return [f"you gave {n} capabilities; give {span}: merge the smallest ({small}) into their nearest neighbours"]
    return []


def card_problems(cap, rules: LabelRules) -> list[str]:
    """One capability's own card: its name's form and no empty field."""
    out = label_problems(cap.name, rules)
    for field, fix in CARD_FIELDS.items():
        if not getattr(cap, field).strip():
            out.append(f"`{cap.name}` has an empty {field}; {fix}")
    return out


def hard_violations(proposal: list[MergedCapability], micro: list[MicroCapability], cfg: MergeConfig) -> list[str]:
    """The hard constraints a taxonomy must meet to be served, each broken one as
    "<constraint>: <what>": capability count, max share, min share, every micro-cluster once."""
    index = micro_index(micro)
    w = micro_weights(micro)
    members = first_owner_members(proposal, index)
    shares = [w[m].sum() / max(w.sum(), EPS) for m in members]
    out = []
    if not cfg.min_caps <= len(proposal) <= cfg.max_caps:
        out.append(f"capability count {cfg.min_caps}-{cfg.max_caps}: the taxonomy has {len(proposal)}")
    out += share_violations([cap.name for cap in proposal], shares, cfg)
    out += [f"each micro-cluster mapped once: {p}" for p in _mapping_problems(proposal, micro, index)]
    return out


def share_violations(names: list[str], shares: list[float], cfg: MergeConfig) -> list[str]:
    """The hard share bounds, as "<constraint>: <what>"; the offline backend checks the shares its
    phrase model settled with the same words."""
    out = []
    for name, share in zip(names, shares):
        if share > cfg.max_share + EPS:
            out.append(f"max share {pct(cfg.max_share)}: `{name}` holds {share:.1%} of criteria")
        elif share < cfg.min_share - EPS:
            out.append(f"min share {pct(cfg.min_share)}: `{name}` holds {share:.1%} of criteria")
    return out


def _mapping_problems(
    proposal: list[MergedCapability], micro: list[MicroCapability], index: dict[str, int]
) -> list[str]:
    out = []
    places: dict[int, list[str]] = {}
    for cap in proposal:
        unknown = [n for n in cap.member_input_names if n not in index]
        if unknown:
            listed = ", ".join(f"`{u}`" for u in unknown)
            out.append(f"`{cap.name}` lists unknown member(s) {listed}; use only the input names exactly as given")
        for name in cap.member_input_names:
            if name in index:
                places.setdefault(index[name], []).append(cap.name)
    for i, caps in sorted(places.items()):
        if len(caps) > 1:
            where = ", ".join(f"`{c}`" for c in caps)
            out.append(f"`{micro[i].name}` is mapped {len(caps)} times ({where}); keep it in exactly one capability")
    unmapped = [m.name for i, m in enumerate(micro) if i not in places]
    if unmapped:
        listed = ", ".join(f"`{u}`" for u in unmapped)
        out.append(
            f"{len(unmapped)} input name(s) are not mapped: {listed}; "
            "add each to exactly one capability's member_input_names"
        )
    return out
