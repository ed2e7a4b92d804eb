"""`taxonomy estimate PIPELINE` and `taxonomy run --dry-run`: per stage, the calls, tokens and cost
the run would pay, before anything is paid.

Stage 1's prompts are exact: the discovery stage itself builds them, over the real corpus, and a
dry runner records them instead of sending them. Later stages depend on earlier answers, so their
prompts are built by the same stage code over stand-ins sized from the config (k micro-clusters,
capabilities, batch sizes, label lengths), and answers are sized the same way. Tokens are counted
at 4 characters each; re-asks and retries are not included (each re-ask resends its conversation).

Cached tokens: the part of each stage's prompts that every call shares (its instructions, and in
Stage 3 the taxonomy) is counted as served from a context cache after the first call, where it is
long enough for Gemini to cache (`llm.context_cache.min_tokens`): by an explicit cache where one
pays (context_cache.pays, whose writing is counted too), else by implicit caching, which Gemini
applies on a best-effort basis. Cached tokens are priced at `llm.prices.cached_input`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import polars as pl

from taxonomy.config import PipelineConfig, Prices
from taxonomy.corpus import load_corpus
from taxonomy.llm.context_cache import tokens  # one token count for the estimate and the run's caching decision
# Answer sizes in characters: a capability card's description, diagnostic signal and example pattern
# (name and boundaries aside), and JSON punctuation per item.
CARD_TEXT_CHARS = 150 + 120 + 120
# Boundaries (non-examples): a micro-capability names two neighbours; a final capability names every
# sibling, as the merge prompt's boundary rule asks at its fullest.
MICRO_BOUNDARIES = 2
ITEM_OVERHEAD_CHARS = 50
RATIONALE_WORDS = 14
WORD_CHARS = 7  # an average word and its underscore or space
# Share of Stage 1 labels that are unique across the corpus (a model rarely repeats a label verbatim).
UNIQUE_LABEL_SHARE = 0.7


@dataclass
class StageEstimate:
    stage: str
    calls: int
    prompt_tokens: int  # all of them, the cached ones included
    output_tokens: int
    basis: str
    embed_calls: int = 0
    embed_tokens: int = 0
    cached_prompt_tokens: int = 0
    cache_tokens: int = 0  # written into explicit context caches (online only)

    def cost(self, prices: Prices, batch: bool = False) -> float:
        """Online price, or the Batch API's (llm.prices.batch_*, half the online price unless set);
        cached prompt tokens at the cached price (Prices.cost)."""
        usage = {"prompt_tokens": self.prompt_tokens, "output_tokens": self.output_tokens, "embed_tokens": self.embed_tokens,
                 "cached_prompt_tokens": self.cached_prompt_tokens}
        if batch:  # no explicit caches in batch mode: the shared prefix is served by implicit caching or not at all
            usage.update(batch_prompt_tokens=self.prompt_tokens, batch_output_tokens=self.output_tokens,
                         batch_cached_prompt_tokens=self.cached_prompt_tokens)
        else:
            usage["cache_tokens"] = self.cache_tokens
        return prices.cost(usage)


@dataclass
class Estimate:
    stages: list[StageEstimate]
    prices: Prices
    n_criteria: int
    notes: list[str]

    @property
    def total_cost(self) -> float:
        return sum(s.cost(self.prices) for s in self.stages)

    @property
    def total_batch_cost(self) -> float:
        return sum(s.cost(self.prices, batch=True) for s in self.stages)

    def as_dict(self, backend: str, mode: str) -> dict[str, Any]:
        """The table's figures for programs (`taxonomy estimate --json`), per stage and in total, at both
        prices; `cost_usd_in_mode` is what the configured mode (online or batch) would pay."""
        def figures(items: list[StageEstimate]) -> dict[str, Any]:
            d: dict[str, Any] = {key: sum(getattr(s, key) for s in items)
                                 for key in ("calls", "prompt_tokens", "cached_prompt_tokens", "output_tokens", "embed_calls", "embed_tokens",
                                             "cache_tokens")}
            d["cost_usd"] = sum(s.cost(self.prices) for s in items)
            d["batch_cost_usd"] = sum(s.cost(self.prices, batch=True) for s in items)
            d["cost_usd_in_mode"] = d["batch_cost_usd" if mode == "batch" else "cost_usd"]
            return d

        batch_input, batch_output = self.prices.batch()
        return {"backend": backend, "mode": mode, "n_criteria": self.n_criteria,
                "prices_per_million_tokens": {"input": self.prices.input, "output": self.prices.output, "embedding": self.prices.embedding,
                                              "batch_input": batch_input, "batch_output": batch_output, "cached_input": self.prices.cached()},
                "stages": {s.stage: {**figures([s]), "basis": s.basis} for s in self.stages},
                "total": figures(self.stages), "notes": self.notes}

    def markdown(self) -> str:
        # Both modes side by side: batch mode trades hours of latency for the lower price.
        lines = ["| stage | calls | prompt tokens | output tokens | embedding calls | cost USD | batch cost USD | cached prompt tokens | basis |",
                 "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        for s in self.stages:
            lines.append(f"| {s.stage} | {s.calls} | {s.prompt_tokens} | {s.output_tokens} | {s.embed_calls} | {s.cost(self.prices):.4f} | "
                         f"{s.cost(self.prices, batch=True):.4f} | {s.cached_prompt_tokens} | {s.basis} |")
        total = lambda key: sum(getattr(s, key) for s in self.stages)  # noqa: E731
        lines.append(f"| total | {total('calls')} | {total('prompt_tokens')} | {total('output_tokens')} | {total('embed_calls')} | "
                     f"{self.total_cost:.4f} | {self.total_batch_cost:.4f} | {total('cached_prompt_tokens')} | |")
        return "\n".join(lines + [""] + [f"- {n}" for n in self.notes]) + "\n"


class _Captured(Exception):
    def __init__(self, jobs: list) -> None:
        self.jobs = jobs


class _DryRunner:
    """Stands where the runner would: records the stage's jobs, then stops the stage before any call."""

    def run(self, stage: str, jobs, description: str = "") -> list:
        raise _Captured(list(jobs))


def _capture(fn, *args: Any) -> list:
    try:
        fn(*args, _DryRunner())
    except _Captured as done:
        return done.jobs
    return []


def _label(cfg: PipelineConfig, i: int) -> str:
    """A stand-in label of the configured average length, unique per i."""
    words = max(1, (cfg.labels.min_words + cfg.labels.max_words) // 2 - 1)
    letters = "".join(chr(ord("a") + int(d)) for d in str(i))
    return "_".join(["inspect"] + ["evidence"] * (words - 2) + [letters]) + cfg.labels.suffix


def _card(name: str, siblings: list[str]) -> dict[str, Any]:
    return {"name": name, "description": "d" * 150, "diagnostic_signal": "s" * 120, "example_pattern": "e" * 120,
            "non_examples": [_boundary(sibling) for sibling in siblings]}


def _no_embed() -> tuple[int, int]:
    return 0, 0


def _boundaries_job(capabilities: list, cfg: PipelineConfig):
    """The merge's boundary call over stand-in capabilities, each with its nearest siblings."""
    from taxonomy.llm.jobs import Job
    from taxonomy.prompts import render
    from taxonomy.schemas import BoundaryAnswer
    from taxonomy.siblings import MAX_NON_EXAMPLES, MIN_BOUNDARY_WORDS

    names = [c.name for c in capabilities]
    caps = [{"name": c.name, "description": c.description, "diagnostic_signal": c.diagnostic_signal, "previous": [], "violations": [],
             "siblings": [n for n in names if n != c.name][:MAX_NON_EXAMPLES]} for c in capabilities]
    prompt = render("stage2_merge.j2", ask="boundaries", rules=cfg.labels, capabilities=caps, context=[], violations=False,
                    max_non_examples=MAX_NON_EXAMPLES, min_boundary_words=MIN_BOUNDARY_WORDS)
    return Job(prompt=prompt, schema=BoundaryAnswer, validate=lambda a: [])


def _boundary(sibling: str) -> str:
    return f"if the criterion {'x' * 40}, prefer `{sibling}`"


def caching(jobs: list, cfg: PipelineConfig) -> tuple[int, int]:
    """(cached prompt tokens, tokens written into explicit caches) for a stage's jobs, as the runner
    and Gemini would serve their shared prefixes (see the module docstring)."""
    from collections import Counter

    from taxonomy.llm.context_cache import pays

    cached = written = 0
    for prefix, calls in Counter(getattr(j, "prefix", "") for j in jobs).items():
        size = tokens(prefix)
        if not prefix or size < cfg.llm.context_cache.min_tokens:
            continue
        if cfg.llm.context_cache.enabled and cfg.llm.mode == "online" and pays(size, calls, cfg.llm.prices, cfg.llm.context_cache.ttl_s,
                                                                              cfg.llm.context_cache.min_tokens):
            written += size
            cached += calls * size
        else:
            cached += (calls - 1) * size
    return cached, written


def estimate(cfg: PipelineConfig, backend: str, embedder: str) -> Estimate:
    from taxonomy.siblings import MAX_NON_EXAMPLES
    from taxonomy.schemas import MicroCapability, Taxonomy, TaxonomyCapability
    from taxonomy.stages.canonicalize import canonicalize
    from taxonomy.stages.discover import discover
    from taxonomy.stages.merge import merge
    from taxonomy.stages.tag import tag

    criteria = load_corpus(cfg.corpus, cfg.base_dir).frame
    n = criteria.height
    labels_per = (cfg.labels.min_labels + cfg.labels.max_labels) / 2
    label_chars = len(_label(cfg, 10)) + 4
    out: list[StageEstimate] = []

    jobs = _capture(discover, criteria, cfg)
    rationale = len(cfg.labels.rationale_prefix) + RATIONALE_WORDS * WORD_CHARS
    per_item = labels_per * label_chars + rationale + ITEM_OVERHEAD_CHARS
    out.append(StageEstimate("discover", len(jobs), sum(tokens(j.prompt) for j in jobs), tokens(n * per_item),
                             f"exact prompts for {n} criteria; answers ~{tokens(per_item)} tokens a criterion", *_no_embed(),
                             *caching(jobs, cfg)))

    unique = max(2, int(n * labels_per * UNIQUE_LABEL_SHARE))
    embed_calls = 0 if embedder == "local" else math.ceil(unique / cfg.embedding.batch_size)
    out.append(StageEstimate("cluster", 0, 0, 0, f"~{unique} unique labels embedded ({embedder})",
                             embed_calls=embed_calls, embed_tokens=0 if embedder == "local" else tokens(unique * label_chars)))

    k, k_note = cfg.cluster.k_for(unique)
    per_cluster = max(1, unique // k)
    labels = [_label(cfg, i) for i in range(k * per_cluster)]
    clusters = pl.DataFrame({"label": labels, "cluster_id": [i // per_cluster for i in range(len(labels))], "frequency": [1] * len(labels)})
    ids = criteria["criterion_id"].to_list()
    criterion_clusters = pl.DataFrame({"criterion_id": ids, "dominant_cluster": [i % k for i in range(n)]})
    # Stand-in label vectors, so each naming prompt lists its nearby clusters as the real one does.
    vectors = np.random.default_rng(0).normal(size=(len(labels), 8)).astype(np.float32)
    jobs = _capture(partial(canonicalize, label_embeddings=vectors / np.linalg.norm(vectors, axis=1, keepdims=True)),
                    clusters, criterion_clusters, criteria, cfg)
    boundary_chars = len(_boundary(_label(cfg, 10))) + 4
    card_chars = label_chars + CARD_TEXT_CHARS + ITEM_OVERHEAD_CHARS
    out.append(StageEstimate("canonicalize", len(jobs), sum(tokens(j.prompt) for j in jobs),
                             tokens(len(jobs) * (card_chars + MICRO_BOUNDARIES * boundary_chars)),
                             f"one call per micro-cluster ({k_note}; ~{per_cluster} labels each)", *_no_embed(),
                             *caching(jobs, cfg)))

    names = [_label(cfg, 1000 + i) for i in range(k)]
    micro = [MicroCapability(**_card(names[i], names[i + 1:i + 1 + MICRO_BOUNDARIES]), cluster_id=i, n_criteria=max(1, n // k),
                             n_labelled=max(1, n // k), share=1 / k, member_labels=labels[i * per_cluster:(i + 1) * per_cluster]) for i in range(k)]
    caps = min(k, (cfg.merge.min_caps + cfg.merge.max_caps) // 2)
    jobs = _capture(merge, micro, np.zeros((k, 8), dtype=np.float32), cfg)
    cap_names = [_label(cfg, 2000 + i) for i in range(caps)]
    capabilities = [TaxonomyCapability(**_card(name, [c for c in cap_names if c != name][:MAX_NON_EXAMPLES]), members=[m.name for m in micro[i::caps]])
                    for i, name in enumerate(cap_names)]
    if jobs:  # membership, then one call for the boundaries against each capability's nearest siblings
        jobs.append(_boundaries_job(capabilities, cfg))
    merged_chars = caps * card_chars + k * label_chars + caps * min(caps - 1, MICRO_BOUNDARIES) * boundary_chars
    out.append(StageEstimate("merge", len(jobs), sum(tokens(j.prompt) for j in jobs), tokens(merged_chars) if jobs else 0,
                             f"one call over {k} micro-capabilities into ~{caps} capabilities, one for their boundaries"))

    jobs = _capture(tag, criteria, Taxonomy(capabilities=capabilities), cfg)
    tags_per = (cfg.tag.min_tags + cfg.tag.max_tags) / 2
    per_item = tags_per * label_chars + ITEM_OVERHEAD_CHARS
    out.append(StageEstimate("tag", len(jobs), sum(tokens(j.prompt) for j in jobs), tokens(n * per_item),
                             f"exact batches; taxonomy of ~{caps} capabilities stood in", *_no_embed(), *caching(jobs, cfg)))
    notes = [
        f"{backend} backend, model {cfg.llm.model}; prices per million tokens: input {cfg.llm.prices.input}, output {cfg.llm.prices.output}, embedding {cfg.llm.prices.embedding}.",
        "Tokens are counted at 4 characters each; re-asks and retries are not included.",
        f"Cached prompt tokens (the instructions every call of a stage shares, once at least {cfg.llm.context_cache.min_tokens} tokens) are priced at "
        f"{cfg.llm.prices.cached()} per million; explicit caches' storage (llm.prices.cache_storage per million tokens per hour, for minutes) is not included.",
        "Stage 1 prompts are the exact ones; later stages are estimated from the config (micro-clusters, capabilities, batch sizes), since their prompts depend on earlier answers.",
    ]
    if backend == "offline":
        notes.insert(0, "The offline backend makes no LLM call: this is what the LLM pipeline would cost.")
    return Estimate(out, cfg.llm.prices, n, notes)
