"""Stage 2b: one call per micro-cluster names the skill its labels share."""
from __future__ import annotations

from collections import Counter
from functools import partial

import polars as pl

from taxonomy.config import LabelRules, PipelineConfig
from taxonomy.llm.runner import Job, Runner
from taxonomy.prompts import render
from taxonomy.schemas import CapabilityCard, MicroCapability
from taxonomy.validate import Violation, label_problems

MAX_NON_EXAMPLES = 3


def card_problems(card: CapabilityCard, rules: LabelRules) -> list[Violation]:
    out = [Violation(None, p) for p in label_problems(card.name, rules)]
    for field in ("description", "diagnostic_signal", "example_pattern"):
        if not getattr(card, field).strip():
            out.append(Violation(None, f"`{field}` must not be empty"))
    if len(card.non_examples) > MAX_NON_EXAMPLES:
        out.append(Violation(None, f"give at most {MAX_NON_EXAMPLES} non_examples"))
    return out


def cluster_inputs(clusters: pl.DataFrame, criterion_clusters: pl.DataFrame, criteria: pl.DataFrame, cfg: PipelineConfig) -> list[dict]:
    """Per cluster: members ranked by frequency, and example criteria chosen deterministically (distinct tasks first, in corpus order)."""
    joined = criterion_clusters.join(criteria.select("criterion_id", "task_id", "text", "category"), on="criterion_id", how="left")
    examples_by_cluster: dict[int, list[dict]] = {}
    for cid, group in joined.group_by("dominant_cluster", maintain_order=True):
        rows = group.to_dicts()
        seen_tasks, first, rest = set(), [], []
        for r in rows:
            (rest if r["task_id"] in seen_tasks else first).append(r)
            seen_tasks.add(r["task_id"])
        examples_by_cluster[int(cid[0])] = (first + rest)[: cfg.canonicalize.examples]
    n_by_cluster = Counter(criterion_clusters["dominant_cluster"].to_list())
    out = []
    for (cid,), group in clusters.sort(["cluster_id", "frequency", "label"], descending=[False, True, False]).group_by("cluster_id", maintain_order=True):
        members = group.select("label", "frequency").to_dicts()
        out.append({
            "cluster_id": int(cid), "members": members[: cfg.canonicalize.max_members], "all_labels": [m["label"] for m in members],
            "examples": examples_by_cluster.get(int(cid), []), "n_criteria": n_by_cluster.get(int(cid), 0),
        })
    return out


def canonicalize(
    clusters: pl.DataFrame, criterion_clusters: pl.DataFrame, criteria: pl.DataFrame, cfg: PipelineConfig, runner: Runner | None
) -> tuple[list[MicroCapability], list[str]]:
    """Returns the named micro-capabilities and the notes of any fallback taken."""
    inputs = cluster_inputs(clusters, criterion_clusters, criteria, cfg)
    total = max(criterion_clusters.height, 1)
    cards, notes = _name_all(inputs, cfg, runner)
    micro = [
        MicroCapability(
            **card.model_dump(), cluster_id=inp["cluster_id"], n_criteria=inp["n_criteria"],
            share=inp["n_criteria"] / total, member_labels=inp["all_labels"],
        )
        for inp, card in zip(inputs, cards)
    ]
    return micro, notes


def _name_all(inputs: list[dict], cfg: PipelineConfig, runner: Runner | None) -> tuple[list[CapabilityCard], list[str]]:
    from taxonomy.offline.canonicalize import name_cluster_offline

    def offline(inp: dict, taken: set[str]) -> CapabilityCard:
        members = [(m["label"], m["frequency"]) for m in inp["members"]]
        return name_cluster_offline(inp["cluster_id"], members, [e["text"] for e in inp["examples"]], cfg.labels, taken)

    if runner is None:
        taken: set[str] = set()
        cards = []
        for inp in inputs:
            cards.append(offline(inp, taken))
            taken.add(cards[-1].name)
        return cards, []

    notes: list[str] = []
    answers = runner.run("canonicalize", [_job(inp, cfg, []) for inp in inputs], "Stage 2 canonicalize")
    cards: list[CapabilityCard | None] = [a.value if a.ok else None for a in answers]
    # A name given to two clusters is re-asked for all but the biggest, with the taken names listed.
    for round_ in range(cfg.llm.reask_attempts + 1):
        clashes = _clashing(cards, inputs)
        if not clashes:
            break
        taken = sorted({c.name for i, c in enumerate(cards) if c is not None and i not in clashes})
        redo = runner.run("canonicalize", [_job(inputs[i], cfg, taken) for i in clashes], f"re-naming {len(clashes)} clashes")
        for i, answer in zip(clashes, redo):
            cards[i] = answer.value if answer.ok else None
    taken = set()
    for i, card in enumerate(cards):
        if card is None or card.name in taken:
            cards[i] = offline(inputs[i], taken)
            notes.append(f"cluster {inputs[i]['cluster_id']}: no valid unique name from the model; named offline `{cards[i].name}`")
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


def _job(inp: dict, cfg: PipelineConfig, taken: list[str]) -> Job[CapabilityCard]:
    prompt = render(
        "stage2_canonicalize.j2", rules=cfg.labels, cluster_id=inp["cluster_id"], members=inp["members"],
        examples=inp["examples"], taken=taken,
    )
    return Job(prompt=prompt, schema=CapabilityCard, validate=partial(card_problems, rules=cfg.labels))
