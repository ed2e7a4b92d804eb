"""Stage 2b: one call per micro-cluster names the skill its labels share.

Each call carries the cluster's labels, criteria that carry any of them (the cluster's dominant
criteria first, so a cluster that is no criterion's dominant one still shows its criteria), and
its nearest clusters with their top labels; the non-examples draw the boundary against those,
naming one of a nearby cluster's labels. Once every cluster has its final name, a label so named
is replaced by the name of the cluster that holds it, so each micro-capability's boundaries name
a real sibling micro-capability.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import partial

import numpy as np
import polars as pl

from taxonomy.config import LabelRules, PipelineConfig
from taxonomy.llm.runner import Job, Runner
from taxonomy.prompts import render
from taxonomy.schemas import CapabilityCard, MicroCapability
from taxonomy.naming import name_cluster_offline
from taxonomy.merge.siblings import MAX_NON_EXAMPLES, MIN_BOUNDARY_WORDS, choose_siblings, pair_counts
from taxonomy.stages.cluster import cluster_centroids
from taxonomy.stages.common import shared_prefix
from taxonomy.validate import Violation, label_problems

NEARBY_CLUSTERS = 3
NEARBY_LABELS = 3  # top labels shown per nearby cluster
_TICKED = re.compile(r"`([^`]+)`")


def card_problems(card: CapabilityCard, rules: LabelRules, nearby: dict[str, int] | None = None) -> list[Violation]:
    """`nearby`: the labels shown for the nearby clusters (label -> cluster id); each non-example names one of them."""
    out = [Violation(None, p) for p in label_problems(card.name, rules)]
    for field in ("description", "diagnostic_signal", "example_pattern"):
        if not getattr(card, field).strip():
            out.append(Violation(None, f"`{field}` must not be empty"))
    low = 1 if nearby else 0
    if not low <= len(card.non_examples) <= MAX_NON_EXAMPLES:
        out.append(
            Violation(
                None,
                f"give {low}-{MAX_NON_EXAMPLES} non_examples, not {len(card.non_examples)}"
                + (", each against one nearby cluster" if nearby else ""),
            )
        )
    if nearby:
        shown = ", ".join(f"`{label}`" for label in nearby)
        for text in card.non_examples:
            named = [t for t in dict.fromkeys(_TICKED.findall(text))]
            words = len(_TICKED.sub(" ", text).split())
            if len(named) != 1 or named[0] not in nearby:
                out.append(
                    Violation(
                        None,
                        f"non_example {text!r} must name exactly one label of a nearby cluster in backticks, "
                        f"one of {shown}",
                    )
                )
            elif words < MIN_BOUNDARY_WORDS:
                out.append(
                    Violation(
                        None,
                        f"non_example {text!r} names `{named[0]}` but not "
                        "where the line lies; say which criteria belong there",
                    )
                )
    return out


def cluster_inputs(
    clusters: pl.DataFrame,
    criterion_clusters: pl.DataFrame,
    criteria: pl.DataFrame,
    cfg: PipelineConfig,
    stage1: pl.DataFrame | None = None,
    label_embeddings: np.ndarray | None = None,
) -> list[dict]:
    """Per cluster: members ranked by frequency; example criteria (those it dominates, then those carrying
    any of its labels; distinct tasks first, in corpus order); and with label embeddings, its nearest
    clusters (by centroid and by criteria labelled into both) with their top labels."""
    dominant = dict(zip(criterion_clusters["criterion_id"].to_list(), criterion_clusters["dominant_cluster"].to_list()))
    cluster_of = dict(zip(clusters["label"].to_list(), clusters["cluster_id"].to_list()))
    carried: dict[str, set[int]] = {cid: {c} for cid, c in dominant.items()}
    if stage1 is not None:
        ok = stage1.filter(pl.col("status") == "ok") if "status" in stage1.columns else stage1
        for cid, labels in zip(ok["criterion_id"].to_list(), ok["labels"].to_list()):
            carried.setdefault(cid, set()).update(cluster_of[lab] for lab in (labels or []) if lab in cluster_of)
    rows_by_cluster: dict[int, tuple[list[dict], list[dict]]] = {}
    for r in criteria.select("criterion_id", "task_id", "text", "category", "direction").iter_rows(named=True):
        for c in sorted(carried.get(r["criterion_id"], ())):
            rows_by_cluster.setdefault(int(c), ([], []))[0 if dominant.get(r["criterion_id"]) == c else 1].append(r)
    examples_by_cluster: dict[int, list[dict]] = {}
    for cid, (own, other) in rows_by_cluster.items():
        seen_tasks, first, rest = set(), [], []
        for r in own + other:
            (rest if r["task_id"] in seen_tasks else first).append(r)
            seen_tasks.add(r["task_id"])
        examples_by_cluster[cid] = (first + rest)[: cfg.canonicalize.examples]
    n_by_cluster = Counter(criterion_clusters["dominant_cluster"].to_list())
    out = []
    for (cid,), group in clusters.sort(["cluster_id", "frequency", "label"], descending=[False, True, False]).group_by(
        "cluster_id", maintain_order=True
    ):
        members = group.select("label", "frequency").to_dicts()
        out.append(
            {
                "cluster_id": int(cid),
                "members": members[: cfg.canonicalize.max_members],
                "all_labels": [m["label"] for m in members],
                "examples": examples_by_cluster.get(int(cid), []),
                "n_criteria": n_by_cluster.get(int(cid), 0),
                "nearby": [],
                "n_labelled": sum(map(len, rows_by_cluster.get(int(cid), ((), ())))),
            }
        )
    if label_embeddings is not None and len(out) > 1:
        _add_nearby(out, clusters, label_embeddings, carried)
    return out


def _add_nearby(
    inputs: list[dict], clusters: pl.DataFrame, embeddings: np.ndarray, carried: dict[str, set[int]]
) -> None:
    centroids = cluster_centroids(np.asarray(embeddings), clusters["cluster_id"].to_numpy())
    ids = [inp["cluster_id"] for inp in inputs]
    rows = centroids[ids]
    index = {c: i for i, c in enumerate(ids)}
    co = pair_counts([[index[c] for c in held if c in index] for held in carried.values()], len(ids))
    for inp, near in zip(inputs, choose_siblings(rows @ rows.T, co, k=NEARBY_CLUSTERS)):
        inp["nearby"] = [{"cluster_id": ids[j], "labels": inputs[j]["all_labels"][:NEARBY_LABELS]} for j in near]


def canonicalize(
    clusters: pl.DataFrame,
    criterion_clusters: pl.DataFrame,
    criteria: pl.DataFrame,
    cfg: PipelineConfig,
    runner: Runner,
    stage1: pl.DataFrame | None = None,
    label_embeddings: np.ndarray | None = None,
) -> tuple[list[MicroCapability], list[str]]:
    """The model names every micro-cluster. Returns the micro-capabilities and the notes of any fallback taken.
    `stage1` (the Stage 1 labels) widens each cluster's examples to every criterion carrying one of its labels;
    `label_embeddings` (rows of `clusters`) gives each naming call its nearest clusters."""
    inputs = cluster_inputs(clusters, criterion_clusters, criteria, cfg, stage1, label_embeddings)
    cards, notes = _name_all(inputs, cfg, runner)
    _point_boundaries_at_names(cards, inputs)
    return micro_capabilities(inputs, cards, criterion_clusters.height), notes


def micro_capabilities(inputs: list[dict], cards: list[CapabilityCard], n_criteria: int) -> list[MicroCapability]:
    """Each named cluster as a micro-capability with its size and share of the corpus."""
    total = max(n_criteria, 1)
    return [
        MicroCapability(
            **card.model_dump(),
            cluster_id=inp["cluster_id"],
            n_criteria=inp["n_criteria"],
            share=inp["n_criteria"] / total,
            member_labels=inp["all_labels"],
            n_labelled=inp["n_labelled"],
        )
        for inp, card in zip(inputs, cards)
    ]


def name_offline(inp: dict, cfg: PipelineConfig, taken: set[str]) -> CapabilityCard:
    """A cluster named from its labels and criteria by the offline namer (no model)."""
    members = [(m["label"], m["frequency"]) for m in inp["members"]]
    return name_cluster_offline(inp["cluster_id"], members, [e["text"] for e in inp["examples"]], cfg.labels, taken)


def _name_all(inputs: list[dict], cfg: PipelineConfig, runner: Runner) -> tuple[list[CapabilityCard], list[str]]:
    notes: list[str] = []
    answers = runner.run("canonicalize", [_job(inp, cfg, []) for inp in inputs], "Stage 2 canonicalize")
    cards: list[CapabilityCard | None] = [a.value if a.ok else None for a in answers]
    # A name given to two clusters is re-asked for all but the biggest, with the taken names listed.
    for round_ in range(cfg.llm.reask_attempts + 1):
        clashes = _clashing(cards, inputs)
        if not clashes:
            break
        taken = sorted({c.name for i, c in enumerate(cards) if c is not None and i not in clashes})
        redo = runner.run(
            "canonicalize", [_job(inputs[i], cfg, taken) for i in clashes], f"re-naming {len(clashes)} clashes"
        )
        for i, answer in zip(clashes, redo):
            cards[i] = answer.value if answer.ok else None
    taken = set()
    for i, card in enumerate(cards):
        if card is None or card.name in taken:
            cards[i] = name_offline(inputs[i], cfg, taken)
            notes.append(
                f"cluster {inputs[i]['cluster_id']}: no valid unique "
                f"name from the model; named offline `{cards[i].name}`"
            )
        taken.add(cards[i].name)
    return cards, notes


def _clashing(cards: list[CapabilityCard | None], inputs: list[dict]) -> list[int]:
    owner: dict[str, int] = {}
    clashes = []
    for i in sorted(range(len(cards)), key=lambda i: -inputs[i]["n_criteria"]):
        card = cards[i]
        if card is None:
            continue
        if card.name in owner:
            clashes.append(i)
        else:
            owner[card.name] = i
    return sorted(clashes)


def _point_boundaries_at_names(cards: list[CapabilityCard], inputs: list[dict]) -> None:
    """A non-example names a nearby cluster by one of its labels (the name was not known yet); it now
    names that cluster's micro-capability. A card named offline has no nearby labels to replace."""
    name_of = {inp["cluster_id"]: card.name for inp, card in zip(inputs, cards)}
    for inp, card in zip(inputs, cards):
        label_to_cluster = {label: n["cluster_id"] for n in inp["nearby"] for label in n["labels"]}
        card.non_examples = [
            _TICKED.sub(lambda m: f"`{name_of[label_to_cluster[m[1]]]}`" if m[1] in label_to_cluster else m[0], text)
            for text in card.non_examples
        ]


def _job(inp: dict, cfg: PipelineConfig, taken: list[str]) -> Job[CapabilityCard]:
    prompt = render(
        "stage2_canonicalize.j2",
        rules=cfg.labels,
        cluster_id=inp["cluster_id"],
        members=inp["members"],
        examples=inp["examples"],
        nearby=inp["nearby"],
        taken=taken,
        max_non_examples=MAX_NON_EXAMPLES,
    )
    nearby = {label: n["cluster_id"] for n in inp["nearby"] for label in n["labels"]}
    # The instructions, up to the cluster itself, are the same in every naming call.
    prefix = shared_prefix(prompt, f"\nCluster {inp['cluster_id']}; member labels")
    return Job(
        prompt=prompt,
        schema=CapabilityCard,
        validate=partial(card_problems, rules=cfg.labels, nearby=nearby),
        prefix=prefix,
    )
