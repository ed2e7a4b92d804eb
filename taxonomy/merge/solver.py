"""The deterministic repair solver: a merge proposal (the model's, a Ward start, or none) made to pass
`check_merge`.

The LLM path repairs its best answer with `solve_merge` as a last resort; the offline path repairs its Ward
start the same way; with no start it agglomerates from scratch. `edit.py` splits with the same `Solver.bisect`."""

from __future__ import annotations

import itertools
import string
from dataclasses import dataclass

import numpy as np
from sklearn.cluster import AgglomerativeClustering

from taxonomy.config import LabelRules, MergeConfig
from taxonomy.merge.check import CARD_FIELDS
from taxonomy.merge.measures import (
    EPS,
    capability_similarity,
    checked_centroids,
    micro_index,
    micro_weights,
    pct,
    weighted_centroid,
)
from taxonomy.merge.siblings import MAX_NON_EXAMPLES, capability_co_counts, choose_siblings, named_siblings
from taxonomy.schemas import MergedCapability, MicroCapability
from taxonomy.validate import label_problems


@dataclass
class Group:
    members: list[int]  # micro indices
    card: MergedCapability | None = None  # the model's card while the group is still the model's
    name: str = ""  # without a card: the name the solver gave it when it cut it off, kept by every later note


class Solver:
    def __init__(
        self,
        micro: list[MicroCapability],
        centroids: np.ndarray,
        cfg: MergeConfig,
        rules: LabelRules,
        co_micro: np.ndarray | None = None,
    ):
        self.micro, self.cfg, self.rules, self.co_micro = micro, cfg, rules, co_micro
        self.centroids = checked_centroids(micro, centroids)
        self.index = micro_index(micro)
        self.w = micro_weights(micro)
        self.total = self.w.sum()
        self.repairs: list[str] = []
        self._reported: set[tuple] = set()

    # -- measures
    def share(self, g: Group) -> float:
        return self.w[g.members].sum() / self.total

    def centroid(self, g: Group) -> np.ndarray:
        return weighted_centroid(g.members, self.w, self.centroids)

    def ranked(self, members: list[int]) -> list[int]:
        return sorted(members, key=lambda i: (-self.w[i], i))

    def label(self, g: Group) -> str:
        return g.card.name if g.card else g.name or self.micro[self.ranked(g.members)[0]].name

    def note_once(self, key: tuple, message: str) -> None:
        if key not in self._reported:
            self._reported.add(key)
            self.repairs.append(message)

    def nearest(self, target: np.ndarray, groups: list[Group], extra: float, skip: Group | None = None) -> Group | None:
        """Most similar group that can absorb `extra` share and stay within max_share."""
        order = sorted(
            (g for g in groups if g is not skip),
            key=lambda g: (-float(self.centroid(g) @ target), groups.index(g)),
        )
        return next((g for g in order if self.share(g) + extra <= self.cfg.max_share + EPS), None)

    # -- starting points
    def from_start(self, start: list[MergedCapability]) -> list[Group]:
        owner: dict[int, str] = {}
        groups = []
        for cap in start:
            members = []
            for name in cap.member_input_names:
                i = self.index.get(name)
                if i is None:
                    self.repairs.append(f"dropped unknown member `{name}` from `{cap.name}`")
                elif i in owner:
                    self.repairs.append(f"`{name}` was also mapped to `{cap.name}`; kept it only in `{owner[i]}`")
                else:
                    owner[i] = cap.name
                    members.append(i)
            if members:
                groups.append(Group(members, cap.model_copy(deep=True)))
            else:
                self.repairs.append(f"dropped `{cap.name}`: it has no valid, unclaimed member")
        if not groups:
            return []
        self.fix_names(groups)
        for i in range(len(self.micro)):
            if i not in owner:
                g = self.nearest(self.centroids[i], groups, self.w[i] / self.total) or self.nearest(
                    self.centroids[i], groups, 0.0
                )
                if g is None:  # every group is already over max_share; the split step will fix that
                    g = groups[0]
                self.repairs.append(
                    f"mapped the unmapped `{self.micro[i].name}` to `{self.label(g)}` (nearest by centroid)"
                )
                g.members.append(i)
        return groups

    def from_scratch(self) -> list[Group]:
        """Weighted ward agglomeration of the micro centroids, never past max_share, down to max_caps groups."""
        groups = [Group([i]) for i in range(len(self.micro))]
        floor = self.total * 1e-6  # keeps zero-criteria micro-clusters ordered by distance
        while len(groups) > self.cfg.max_caps:
            c = np.array([self.centroid(g) for g in groups])
            size = np.maximum([self.w[g.members].sum() for g in groups], floor)
            share = size / self.total
            sq = (c * c).sum(axis=1)
            dist = np.maximum(sq[:, None] + sq[None, :] - 2 * c @ c.T, 0.0)
            # Ward's merge cost favours close pairs and small groups, so no early giant forms.
            cost = size[:, None] * size[None, :] / (size[:, None] + size[None, :]) * dist
            cost[np.tril_indices(len(groups))] = np.inf
            cost[share[:, None] + share[None, :] > self.cfg.max_share + EPS] = np.inf
            a, b = np.unravel_index(np.argmin(cost), cost.shape)  # first minimum: deterministic ties
            if not np.isfinite(cost[a, b]):
                break
            groups[a].members += groups.pop(b).members
        self.repairs.append(
            f"no usable start: agglomerated {len(self.micro)} micro-capabilities into {len(groups)} groups "
            f"by weighted centroid distance, none above {pct(self.cfg.max_share)}"
        )
        return groups

    # -- repair steps
    def repair(self, groups: list[Group]) -> list[Group]:
        cfg = self.cfg
        max_steps = 4 * len(self.micro) + 20  # each step splits or folds; the loop cannot cycle, this is a guard
        for _ in range(max_steps):
            over = [g for g in groups if self.share(g) > cfg.max_share + EPS]
            for g in over:
                if len(g.members) == 1:
                    self.note_once(
                        ("alone", g.members[0]),
                        (
                            f"infeasible: `{self.label(g)}` alone holds {self.share(g):.1%} of criteria "
                            f"(max {pct(cfg.max_share)}); one micro-cluster cannot be split, re-cluster with a larger k"
                        ),
                    )
            splittable = [g for g in over if len(g.members) > 1]
            if splittable:
                self.split(groups, max(splittable, key=self.share), need_min_share=False)
                continue
            if self.fold(groups):
                continue
            if len(groups) < cfg.min_caps:
                candidates = sorted(groups, key=lambda g: (-self.share(g), groups.index(g)))
                if any(self.split(groups, g, need_min_share=True) for g in candidates):
                    continue
                self.repairs.append(
                    f"infeasible: {len(groups)} capabilities and no group splits into two parts of at least "
                    f"{pct(cfg.min_share)} each; min_caps={cfg.min_caps} not reached"
                )
            return groups
        self.repairs.append(f"stopped after {max_steps} repair steps; returned the best proposal so far")
        return groups

    def fold(self, groups: list[Group]) -> bool:
        """Fold the smallest group that must go into its nearest neighbour that stays within max_share."""
        too_many = len(groups) > self.cfg.max_caps
        cents = np.array([self.centroid(g) for g in groups])
        sim = cents @ cents.T
        np.fill_diagonal(sim, -np.inf)
        closeness = sim.max(axis=1) if len(groups) > 1 else np.zeros(len(groups))
        # Smallest first; among equal shares the one with the closest neighbour, a natural merge.
        order = sorted(range(len(groups)), key=lambda j: (round(self.share(groups[j]), 12), -closeness[j], j))
        for g in [groups[j] for j in order]:
            small = self.share(g) < self.cfg.min_share - EPS
            if not (small or too_many):
                continue
            target = self.nearest(self.centroid(g), groups, self.share(g), skip=g)
            if target is None:
                self.note_once(
                    ("stuck", tuple(sorted(g.members))),
                    (
                        f"could not fold `{self.label(g)}` ({self.share(g):.1%}) into any group without exceeding "
                        f"{pct(self.cfg.max_share)}; left it"
                    ),
                )
                continue
            why = (
                f"below the {pct(self.cfg.min_share)} minimum"
                if small
                else f"more than {self.cfg.max_caps} capabilities"
            )
            self.repairs.append(
                f"folded `{self.label(g)}` ({self.share(g):.1%}, {why}) "
                f"into its nearest neighbour `{self.label(target)}`"
            )
            target.members += g.members
            groups.remove(g)
            return True
        return False

    def split(self, groups: list[Group], g: Group, need_min_share: bool) -> bool:
        parts = self.bisect(g.members, need_min_share)
        if parts is None:
            return False
        big, small = sorted(parts, key=lambda p: (-self.w[p].sum(), min(p)))
        a = Group(big, g.card, g.name)
        # The half without the card is named once, here: its largest micro-cluster's name, or the next one no other
        # group goes by (the card may hold that name), so no note names two groups alike and cards() keeps it.
        taken = {self.label(x) for x in groups if x is not g} | {self.label(a)}
        b = Group(small, name=unique_valid_name([self.micro[i].name for i in self.ranked(small)], taken, self.rules))
        why = (
            f"above the {pct(self.cfg.max_share)} maximum"
            if not need_min_share
            else f"fewer than {self.cfg.min_caps} capabilities"
        )
        self.repairs.append(
            f"split `{self.label(g)}` ({self.share(g):.1%}, {why}) along its micro-clusters into "
            f"`{self.label(a)}` ({self.share(a):.1%}) and `{self.label(b)}` ({self.share(b):.1%})"
        )
        at = groups.index(g)
        groups[at : at + 1] = [a, b]
        return True

    def bisect(self, members: list[int], need_min_share: bool) -> tuple[list[int], list[int]] | None:
        """Two-way split: ward on member centroids when both halves reach min_share; else the most
        balanced cut along the principal axis that does; else (only if allowed) ward anyway."""
        if len(members) < 2:
            return None
        m = sorted(members)
        x = self.centroids[m]
        if len(m) == 2:
            ward = ([m[0]], [m[1]])
        else:
            side = AgglomerativeClustering(n_clusters=2, linkage="ward").fit_predict(x)
            ward = ([i for i, s in zip(m, side) if s == 0], [i for i, s in zip(m, side) if s == 1])

        def ok(p) -> bool:
            return min(self.w[p[0]].sum(), self.w[p[1]].sum()) / self.total >= self.cfg.min_share - EPS

        if ok(ward):
            return ward
        centred = x - np.average(x, axis=0, weights=self.w[m] if self.w[m].sum() > 0 else None)
        axis = np.linalg.svd(centred, full_matrices=False)[2][0]
        order = [m[j] for j in np.lexsort((np.arange(len(m)), centred @ axis))]
        cuts = [(order[:k], order[k:]) for k in range(1, len(order))]
        good = [c for c in cuts if ok(c)]
        if good:
            return min(good, key=lambda c: max(self.w[c[0]].sum(), self.w[c[1]].sum()))
        return None if need_min_share else ward

    # -- cards
    def fix_names(self, groups: list[Group]) -> None:
        """Invalid or repeated names become the largest valid member's name, made unique; the
        first holder of a repeated name keeps it. Done early so repair messages are unambiguous."""
        used: set[str] = set()
        for g in groups:
            if g.card is None:
                continue
            problems = label_problems(g.card.name, self.rules)
            if problems or g.card.name in used:
                new = unique_valid_name([self.micro[i].name for i in self.ranked(g.members)], used, self.rules)
                why = problems[0] if problems else "the name was already taken by another capability"
                self.repairs.append(f"renamed `{g.card.name}` to `{new}` ({why})")
                g.card.name = new
            used.add(g.card.name)

    def cards(self, groups: list[Group]) -> list[MergedCapability]:
        """One card per group; names are settled in the model's order (first holder keeps a
        duplicated name), the result is listed by descending share."""
        used: set[str] = set()
        carded = {g.card.name for g in groups if g.card is not None}
        out = []
        for g in groups:
            ranked = self.ranked(g.members)
            top = self.micro[ranked[0]]
            if g.card is None:
                # Micro non_examples name micro siblings that no longer exist; boundaries are redone below. A group
                # the solver formed never had a name to rename: it keeps the one it was cut off with, else takes its
                # first member name no card holds.
                card = MergedCapability(
                    name=unique_valid_name(
                        [g.name] * bool(g.name) + [self.micro[i].name for i in ranked], used | carded, self.rules
                    ),
                    description=top.description,
                    diagnostic_signal=top.diagnostic_signal,
                    example_pattern=top.example_pattern,
                    non_examples=[],
                    member_input_names=[],
                )
            else:
                card = g.card.model_copy(deep=True)
                for field in CARD_FIELDS:
                    if not getattr(card, field).strip():
                        setattr(card, field, getattr(top, field))
                        self.repairs.append(
                            f"filled the empty {field} of `{card.name}` from its largest member `{top.name}`"
                        )
            problems = label_problems(card.name, self.rules)
            if problems or card.name in used:
                new = unique_valid_name([self.micro[i].name for i in ranked], used, self.rules)
                why = problems[0] if problems else "the name was already taken by another capability"
                self.repairs.append(f"renamed `{card.name}` to `{new}` ({why})")
                card.name = new
            used.add(card.name)
            card.member_input_names = [self.micro[i].name for i in ranked]
            out.append((-self.share(g), card.name, card))
        return [card for *_, card in sorted(out, key=lambda t: t[:2])]

    def add_boundaries(self, proposal: list[MergedCapability]) -> None:
        """Each capability keeps the non-examples that name one capability still in the taxonomy (at
        most MAX_NON_EXAMPLES) and gains boundaries against its nearest siblings (merge/siblings.py) until
        it names two of them (or all there are); micro-level non-examples name micro-clusters, not
        capabilities, so they go."""
        names = [c.name for c in proposal]
        sim = capability_similarity(proposal, self.micro, self.centroids)
        siblings = choose_siblings(sim, capability_co_counts(proposal, self.micro, self.co_micro))
        dropped, added = 0, []
        for i, cap in enumerate(proposal):
            kept = [t for t in cap.non_examples if len(set(named_siblings(t, names)) - {cap.name}) == 1][
                :MAX_NON_EXAMPLES
            ]
            dropped += len(cap.non_examples) - len(kept)
            near = [names[j] for j in siblings[i]]
            named = {s for t in kept for s in named_siblings(t, names)}
            want = min(2, len(near))
            for j in siblings[i]:
                if len(named & set(near)) >= want or len(kept) >= MAX_NON_EXAMPLES:
                    break
                if names[j] not in named:
                    kept.append(boundary_sentence(proposal[j]))
                    named.add(names[j])
                    added.append(f"`{cap.name}` -> `{names[j]}`")
            cap.non_examples = kept
        if dropped:
            self.repairs.append(
                f"dropped {dropped} non-example(s) that name no single capability of the final taxonomy"
            )
        if added:
            shown = ", ".join(added[:4]) + (f" and {len(added) - 4} more" if len(added) > 4 else "")
            self.repairs.append(f"added {len(added)} boundary sentence(s) against nearest siblings: {shown}")


def boundary_sentence(other: MergedCapability) -> str:
    gist = other.description.strip().split(". ")[0].rstrip(".").strip()
    words = gist.split()
    gist = " ".join(words[:25]) if words else other.name.replace("_", " ")
    gist = gist[:1].lower() + gist[1:]
    return f"if the criterion is about {gist}, prefer `{other.name}`."


def _variant_words():
    yield from ("further", "other", "related", "additional", "secondary", "remaining")
    for n in itertools.count(1):
        for letters in itertools.product(string.ascii_lowercase, repeat=n):
            yield "variant" + "".join(letters)


def unique_valid_name(candidates: list[str], used: set[str], rules: LabelRules) -> str:
    """The first valid unused candidate (largest member first); else a valid one made distinct by a word."""
    for name in candidates:
        if name not in used and not label_problems(name, rules):
            return name
    base = next((n for n in candidates if not label_problems(n, rules)), f"inspect_grouped_criteria{rules.suffix}")
    stem = base[: -len(rules.suffix)] if base.endswith(rules.suffix) else base
    for word in _variant_words():
        for s in (stem, stem.rsplit("_", 1)[0]):  # drop a word when the extra one breaks the word limit
            name = f"{s}_{word}{rules.suffix}"
            if name not in used and not label_problems(name, rules):
                return name
    raise AssertionError("unreachable")


def solve_merge(
    micro: list[MicroCapability],
    centroids: np.ndarray,
    cfg: MergeConfig,
    rules: LabelRules,
    start: list[MergedCapability] | None = None,
    co_micro: np.ndarray | None = None,
    boundaries: bool = True,
) -> tuple[list[MergedCapability], list[str]]:
    """Deterministically repair `start` (or build from scratch) into a proposal that passes
    `check_merge`; returns it with the repair actions taken, in order. With `boundaries=False` the
    cards keep the non-examples they came with (a caller that draws boundaries itself). When the constraints
    cannot all hold (fewer micro-clusters than min_caps, one micro-cluster above max_share),
    it returns the best proposal and says so in lines starting "infeasible:" or "could not";
    callers re-check with `check_merge` for the exact residual violations."""
    if not micro:
        return [], ["infeasible: no micro-capabilities to merge"]
    solver = Solver(micro, centroids, cfg, rules, co_micro)
    groups = solver.from_start(start) if start else []
    if not groups:
        groups = solver.from_scratch()
    groups = solver.repair(groups)
    proposal = solver.cards(groups)
    if boundaries:
        solver.add_boundaries(proposal)
    return proposal, solver.repairs
