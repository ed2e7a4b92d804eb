"""Which capabilities a capability must draw a boundary against, and whether its non-examples do.

The paper gives every capability "non-examples contrasting it with its nearest siblings". A
sibling here is near in two ways, ranked together: the embedding centroids of the two capabilities
(what the labels say) and co-tagging (how often one criterion carries both: Stage 1 labels falling
in both capabilities' micro-clusters at merge time, Stage 3 tags after it). No fixed cosine cut-off:
every capability has siblings, however far apart a corpus's capabilities are.

Both paths use it: the LLM merge is checked with `non_example_problems` and re-asked; the offline
solver writes boundaries against `choose_siblings` itself.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np
import polars as pl

from taxonomy.merge.measures import capability_similarity
from taxonomy.schemas import MergedCapability

MIN_NON_EXAMPLES = 1
MAX_NON_EXAMPLES = 3
MIN_BOUNDARY_WORDS = 4  # beside the sibling's name: "if <pattern>, prefer `x`" says where the line is
_NAMED = re.compile(r"`([a-z_]+)`")


def _ranks(scores: np.ndarray) -> np.ndarray:
    """Per row, 0 for the highest score; ties share the order of their index (deterministic)."""
    order = np.argsort(-scores, axis=1, kind="stable")
    ranks = np.empty_like(order)
    rows = np.arange(scores.shape[0])[:, None]
    ranks[rows, order] = np.arange(scores.shape[1])[None, :]
    return ranks


def choose_siblings(
    similarity: np.ndarray, co_counts: np.ndarray | None = None, k: int = MAX_NON_EXAMPLES
) -> list[list[int]]:
    """Per capability, its k nearest siblings (indices), nearest first.

    Nearness is the mean of two ranks: by centroid cosine similarity and by co-tag count; without
    co-tag counts (or none shared) the embedding rank alone decides. Ties go to the higher cosine."""
    sim = np.asarray(similarity, dtype=np.float64)
    n = sim.shape[0]
    if n < 2:
        return [[] for _ in range(n)]
    masked = sim.copy()
    np.fill_diagonal(masked, -np.inf)
    score = _ranks(masked).astype(np.float64)
    if co_counts is not None and np.asarray(co_counts).sum() > 0:
        co = np.asarray(co_counts, dtype=np.float64).copy()
        np.fill_diagonal(co, -np.inf)
        score = (score + _ranks(co)) / 2
    out = []
    for i in range(n):
        others = [j for j in range(n) if j != i]
        others.sort(key=lambda j: (score[i, j], -masked[i, j], j))
        out.append(others[:k])
    return out


def named_siblings(non_example: str, names: Sequence[str]) -> list[str]:
    return [m for m in _NAMED.findall(non_example) if m in names]


def non_example_problems(
    names: Sequence[str], non_examples: Sequence[Sequence[str]], siblings: list[list[int]]
) -> list[str]:
    """Every capability carries 1-3 non-examples; each names one other capability in backticks and
    says where the boundary lies; at least one names a sibling from `choose_siblings`. The one capability
    of a one-capability taxonomy has no sibling, so it needs no boundary (and can name none)."""
    out = []
    least = MIN_NON_EXAMPLES if len(names) > 1 else 0
    for i, (name, items) in enumerate(zip(names, non_examples)):
        near = [names[j] for j in siblings[i]] if i < len(siblings) else []
        hint = f'e.g. "if <what the criterion is about>, prefer `{near[0]}`"' if near else ""
        if not least <= len(items) <= MAX_NON_EXAMPLES:
            where = f" (nearest siblings: {', '.join(f'`{s}`' for s in near)}), {hint}" if near else ""
            out.append(
                f"`{name}` has {len(items)} non_examples; give "
                f"{MIN_NON_EXAMPLES}-{MAX_NON_EXAMPLES}, each naming a sibling "
                f"capability and the boundary against it{where}"
            )
            continue
        for text in items:
            named = [m for m in dict.fromkeys(named_siblings(text, names)) if m != name]
            words = len(re.sub(r"`[^`]*`", " ", text).split())
            if len(named) != 1:
                out.append(
                    f"`{name}` non_example {text!r} must name exactly "
                    "one other capability of the taxonomy in backticks "
                    f"(it names {len(named)}); {hint}"
                )
            elif words < MIN_BOUNDARY_WORDS:
                out.append(
                    f"`{name}` non_example {text!r} names `{named[0]}` but not "
                    f"the boundary; say which criteria belong there, {hint}"
                )
        if near and not any(s in near for text in items for s in named_siblings(text, names)):
            out.append(
                f"`{name}`'s non_examples name none of its nearest "
                f"siblings ({', '.join(f'`{s}`' for s in near)}, by label "
                f"embedding and co-tagging); draw the boundary against at least one of them, {hint}"
            )
    return out


def boundary_problems(
    name: str, non_examples: Sequence[str], siblings: Sequence[str], names: Sequence[str]
) -> list[str]:
    """The LLM boundary call's rule, stricter than `non_example_problems` so an answer that passes it
    passes the merge check too: 1-3 non-examples, each naming exactly one capability of the taxonomy,
    which is one of `siblings` (the ones the call listed), and saying where the line lies."""
    listed = ", ".join(f"`{s}`" for s in siblings)
    out = []
    if not MIN_NON_EXAMPLES <= len(non_examples) <= MAX_NON_EXAMPLES:
        out.append(
            f"give {MIN_NON_EXAMPLES}-{MAX_NON_EXAMPLES} non_examples, "
            f"not {len(non_examples)}, each against one of {listed}"
        )
    for text in non_examples[: MAX_NON_EXAMPLES + 1]:
        named = [m for m in dict.fromkeys(named_siblings(text, names)) if m != name]
        words = len(re.sub(r"`[^`]*`", " ", text).split())
        if len(named) != 1:
            out.append(f"{text!r} names {len(named)} other capabilities in backticks; name exactly one of {listed}")
        elif named[0] not in siblings:
            out.append(
                f"{text!r} names `{named[0]}`, which is not one of this "
                f"capability's nearest siblings; name one of {listed}"
            )
        elif words < MIN_BOUNDARY_WORDS:
            out.append(
                f"{text!r} names `{named[0]}` but not where the line lies; say which criteria belong there "
                f"(at least {MIN_BOUNDARY_WORDS} words besides the name)"
            )
    return out


def co_label_counts(
    stage1: pl.DataFrame, clusters: pl.DataFrame, member_of: dict[int, int], n_groups: int
) -> np.ndarray:
    """Criteria whose Stage 1 labels fall in both groups: `member_of` maps a cluster id to a group
    (a micro-capability's row, or a capability). Stage 1's view of what Stage 3 will co-tag."""
    cluster_of = dict(zip(clusters["label"].to_list(), clusters["cluster_id"].to_list()))
    label_lists = (
        stage1.filter(pl.col("status") == "ok")["labels"].to_list()
        if "status" in stage1.columns
        else stage1["labels"].to_list()
    )
    groups = [
        sorted({member_of[cluster_of[lab]] for lab in labels if lab in cluster_of and cluster_of[lab] in member_of})
        for labels in label_lists
    ]
    return pair_counts(groups, n_groups)


def capability_co_counts(proposal, micro: Sequence, co_micro: np.ndarray | None) -> np.ndarray | None:
    """Criteria whose Stage 1 labels fall in both capabilities (members counted where first mapped)."""
    if co_micro is None:
        return None
    index = {m.name: i for i, m in enumerate(micro)}
    taken: set[int] = set()
    member = np.zeros((len(micro), len(proposal)))
    for c, cap in enumerate(proposal):
        for name in cap.member_input_names:
            i = index.get(name)
            if i is not None and i not in taken:
                taken.add(i)
                member[i, c] = 1
    co = member.T @ np.asarray(co_micro, dtype=np.float64) @ member
    np.fill_diagonal(co, 0)
    return co


def co_tag_counts(tags: pl.DataFrame, names: Sequence[str]) -> np.ndarray:
    """Criteria tagged with both capabilities in Stage 3."""
    index = {n: i for i, n in enumerate(names)}
    ok = tags.filter(pl.col("status") == "ok") if "status" in tags.columns else tags
    groups = [sorted({index[t] for t in row if t in index}) for row in ok["tags"].to_list()]
    return pair_counts(groups, len(names))


def pair_counts(groups: list[list[int]], n: int) -> np.ndarray:
    """(n, n): how many groups hold both a and b (a criterion's clusters, micro-capabilities or tags)."""
    co = np.zeros((n, n), dtype=np.int64)
    for g in groups:
        for a in g:
            for b in g:
                if a != b:
                    co[a, b] += 1
    return co


def unbounded_cotagged(
    tags: pl.DataFrame, names: Sequence[str], non_examples: Sequence[Sequence[str]], min_share: float = 0.0
) -> list[str]:
    """After Stage 3: each capability's most co-tagged sibling, when neither names the other and the
    pair shares at least `min_share` of the tagged criteria."""
    co = co_tag_counts(tags, names)
    floor = max(
        1, min_share * (tags.filter(pl.col("status") == "ok").height if "status" in tags.columns else tags.height)
    )
    notes = []
    seen = set()
    for i, name in enumerate(names):
        if co[i].max() < floor:
            continue
        j = int(np.argmax(co[i]))
        pair = tuple(sorted((i, j)))
        if pair in seen:
            continue
        seen.add(pair)
        if names[j] in {m for t in non_examples[i] for m in named_siblings(t, names)} or name in {
            m for t in non_examples[j] for m in named_siblings(t, names)
        }:
            continue
        notes.append(
            f"`{name}` and `{names[j]}` are co-tagged on {int(co[i, j])} criteria but neither names the other in its "
            "non_examples; add a boundary (taxonomy.json, then `taxonomy tag` again)"
        )
    return notes


def merge_siblings(taxonomy, micro: Sequence, centroids: np.ndarray, co_micro: np.ndarray | None) -> list[list[int]]:
    """Each capability's nearest siblings exactly as the merge check ranks them (label-embedding
    centroids of its members, and co-labelling), for a taxonomy whose members are settled."""

    proposal = [
        MergedCapability(
            name=c.name,
            description="",
            diagnostic_signal="",
            example_pattern="",
            non_examples=[],
            member_input_names=list(c.members),
        )
        for c in taxonomy.capabilities
    ]
    return choose_siblings(
        capability_similarity(proposal, micro, centroids), capability_co_counts(proposal, micro, co_micro)
    )
