"""`taxonomy estimate PIPELINE` and `taxonomy run --dry-run`: per stage, the calls, tokens and cost
the run would pay, before anything is paid.

Stage 1's prompts are exact: the discovery stage itself builds them, over the real corpus, and a
dry runner records them instead of sending them. Later stages depend on earlier answers, so their
prompts are built by the same stage code over stand-ins sized from the config (k micro-clusters,
capabilities, batch sizes, label lengths). Answers, and the stand-in cards later prompts quote, are
sized from what a capable model writes into every field of each schema, not from the short answers
of the test server. Tokens are counted at 4 characters each. Re-asks are counted at REASK_RATE of a
stage's calls, each resending its conversation and paying another answer.

The figures are one central estimate and a range around it: LOW without re-asks and with answers
ANSWER_SPREAD shorter, HIGH with twice the re-asks and answers ANSWER_SPREAD longer.

Cached tokens: the part of each stage's prompts that every call shares (its instructions, and in
Stage 3 the taxonomy) is counted as served from a context cache after the first call, where it is
long enough for Gemini to cache (`llm.context_cache.min_tokens`): by an explicit cache where one
pays (context_cache.pays, whose writing is counted too), else by implicit caching, which Gemini
applies on a best-effort basis. Cached tokens are priced at `llm.prices.cached_input`.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable

import numpy as np
import polars as pl

from taxonomy.config import PipelineConfig, Prices
from taxonomy.corpus import load_corpus
from taxonomy.llm.context_cache import pays, tokens  # one token count for the estimate and the run's caching decision
from taxonomy.llm.jobs import Job
from taxonomy.merge.siblings import MAX_NON_EXAMPLES
from taxonomy.run import STAGES
from taxonomy.schemas import BoundaryAnswer, MicroCapability, Taxonomy, TaxonomyCapability
from taxonomy.stages.canonicalize import canonicalize
from taxonomy.stages.discover import discover
from taxonomy.stages.merge import boundaries_prompt, merge
from taxonomy.stages.tag import tag

# What a capable model writes into each field the prompts ask for, in characters: a description of 1-2
# sentences, a one-sentence diagnostic signal, an example of 1-2 sentences, a boundary that says where
# the line lies in about 25 words, a one-sentence P2/P3 reason. Models fill what they are allowed.
DESCRIPTION_CHARS = 330
SIGNAL_CHARS = 230
EXAMPLE_CHARS = 330
CARD_TEXT_CHARS = DESCRIPTION_CHARS + SIGNAL_CHARS + EXAMPLE_CHARS
BOUNDARY_CHARS = 190
REASON_CHARS = 150
# Boundaries (non-examples): a micro-capability draws one against each of its nearby clusters shown
# (2-3); a final capability one against each of its nearest siblings, as the boundary rule allows.
MICRO_BOUNDARIES = 2.5
ITEM_OVERHEAD_CHARS = 50  # JSON keys and punctuation of one answer item or card
# A rationale of 1-2 sentences carrying its verbatim quote of the criterion.
RATIONALE_WORDS = 26
WORD_CHARS = 7  # an average word and its underscore or space
# Unique Stage 1 labels per criterion: a model gives criteria of one kind of check the same label, so
# fewer are new than the labels it gives each criterion.
UNIQUE_LABELS_PER_CRITERION = 0.9
# Re-asks per call: each resends its conversation (the prompt, the answer, the violations) and pays an
# answer. Stage 1's batches meet the most rules (label form, quoting, distinct labels, coverage); naming,
# merge and tagging answers are seldom sent back.
REASK_RATE = {"discover": 0.08}
OTHER_REASK_RATE = 0.02
REASK_FEEDBACK_TOKENS = 150  # the violations a re-ask lists
ANSWER_SPREAD = 0.25


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
    # The part of prompt_tokens and output_tokens that the expected re-asks pay (REASK_RATE).
    reask_prompt_tokens: int = 0
    reask_output_tokens: int = 0
    reask_cached_tokens: int = 0  # a re-ask's conversation opens with the same prefix, served from the cache alike

    def cost(self, prices: Prices, batch: bool = False, bound: str = "central") -> float:
        """Online price, or the Batch API's (llm.prices.batch_*, half the online price unless set);
        cached prompt tokens at the cached price (Prices.cost). `bound`: "low" (no re-asks, shorter
        answers), "central" or "high" (twice the re-asks, longer answers)."""
        reasks, answers = {"low": (0, 1 - ANSWER_SPREAD), "central": (1, 1.0), "high": (2, 1 + ANSWER_SPREAD)}[bound]
        prompt = self.prompt_tokens + (reasks - 1) * self.reask_prompt_tokens
        output = (self.output_tokens + (reasks - 1) * self.reask_output_tokens) * answers
        usage = {
            "prompt_tokens": prompt,
            "output_tokens": output,
            "embed_tokens": self.embed_tokens,
            "cached_prompt_tokens": self.cached_prompt_tokens + (reasks - 1) * self.reask_cached_tokens,
        }
        if batch:  # no explicit caches in batch mode: the shared prefix is served by implicit caching or not at all
            usage.update(
                batch_prompt_tokens=prompt,
                batch_output_tokens=output,
                batch_cached_prompt_tokens=usage["cached_prompt_tokens"],
            )
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

    def cost_range(self, batch: bool = False) -> tuple[float, float]:
        return tuple(sum(s.cost(self.prices, batch=batch, bound=b) for s in self.stages) for b in ("low", "high"))

    def as_dict(self, backend: str, mode: str) -> dict[str, Any]:
        """The table's figures for programs (`taxonomy estimate --json`), per stage and in total, at both
        prices; `cost_usd_in_mode` is what the configured mode (online or batch) would pay."""

        def figures(items: list[StageEstimate]) -> dict[str, Any]:
            d: dict[str, Any] = {
                key: sum(getattr(s, key) for s in items)
                for key in (
                    "calls",
                    "prompt_tokens",
                    "cached_prompt_tokens",
                    "output_tokens",
                    "embed_calls",
                    "embed_tokens",
                    "cache_tokens",
                )
            }
            for name, batch in (("cost_usd", False), ("batch_cost_usd", True)):
                for bound, suffix in (("central", ""), ("low", "_low"), ("high", "_high")):
                    d[name + suffix] = sum(s.cost(self.prices, batch=batch, bound=bound) for s in items)
            for suffix in ("", "_low", "_high"):
                d["cost_usd_in_mode" + suffix] = d[("batch_cost_usd" if mode == "batch" else "cost_usd") + suffix]
            return d

        batch_input, batch_output = self.prices.batch()
        return {
            "backend": backend,
            "mode": mode,
            "n_criteria": self.n_criteria,
            "prices_per_million_tokens": {
                "input": self.prices.input,
                "output": self.prices.output,
                "embedding": self.prices.embedding,
                "batch_input": batch_input,
                "batch_output": batch_output,
                "cached_input": self.prices.cached(),
            },
            "stages": {s.stage: {**figures([s]), "basis": s.basis} for s in self.stages},
            "total": figures(self.stages),
            "notes": self.notes,
        }

    def markdown(self) -> str:
        # Both modes side by side: batch mode trades hours of latency for the lower price.
        lines = [
            "| stage | calls | prompt tokens | output tokens | embedding calls "
            "| cost USD | batch cost USD | cached prompt tokens | basis |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for s in self.stages:
            lines.append(
                f"| {s.stage} | {s.calls} | {s.prompt_tokens} | {s.output_tokens} "
                f"| {s.embed_calls} | {s.cost(self.prices):.4f} | "
                f"{s.cost(self.prices, batch=True):.4f} | {s.cached_prompt_tokens} | {s.basis} |"
            )
        total = lambda key: sum(getattr(s, key) for s in self.stages)  # noqa: E731
        lines.append(
            f"| total | {total('calls')} | {total('prompt_tokens')} "
            f"| {total('output_tokens')} | {total('embed_calls')} | "
            f"{self.total_cost:.4f} | {self.total_batch_cost:.4f} | {total('cached_prompt_tokens')} | |"
        )
        (low, high), (batch_low, batch_high) = self.cost_range(), self.cost_range(batch=True)
        summary = (
            f"Expected cost: {self.total_cost:.4f} USD online, between {low:.4f} and {high:.4f}; "
            f"{self.total_batch_cost:.4f} USD in batch mode, between {batch_low:.4f} and {batch_high:.4f}."
        )
        return "\n".join(lines + ["", summary, ""] + [f"- {n}" for n in self.notes]) + "\n"


class _Captured(Exception):
    def __init__(self, jobs: list) -> None:
        self.jobs = jobs


class _DryRunner:
    """Stands where the runner would: records the stage's jobs, then stops the stage before any call."""

    def run(self, stage: str, jobs, description: str = "") -> list:
        raise _Captured(list(jobs))


def capture_jobs(stage: Callable[..., Any], *args: Any) -> list:
    """The jobs `stage(*args, runner)` would hand its runner (each has a `.prompt`), none sent; [] when it sends
    none. The estimate prices these; the token benchmarks size them."""
    try:
        stage(*args, _DryRunner())
    except _Captured as done:
        return done.jobs
    return []


def _label(cfg: PipelineConfig, i: int) -> str:
    """A stand-in label of the configured average length, unique per i."""
    words = max(1, (cfg.labels.min_words + cfg.labels.max_words) // 2 - 1)
    letters = "".join(chr(ord("a") + int(d)) for d in str(i))
    return "_".join(["inspect"] + ["evidence"] * (words - 2) + [letters]) + cfg.labels.suffix


def _card(name: str, siblings: list[str]) -> dict[str, Any]:
    """A stand-in card with every field at the length a model writes it, so the prompts that quote cards are sized
    right."""
    return {
        "name": name,
        "description": "d" * DESCRIPTION_CHARS,
        "diagnostic_signal": "s" * SIGNAL_CHARS,
        "example_pattern": "e" * EXAMPLE_CHARS,
        "non_examples": [_boundary(sibling) for sibling in siblings],
    }


def _principles() -> dict[str, Any]:
    return {
        "needs_native_inspection": False,
        "needs_native_inspection_reason": "r" * REASON_CHARS,
        "needs_domain_conventions": False,
        "needs_domain_conventions_reason": "r" * REASON_CHARS,
    }


def _boundaries_job(capabilities: list, cfg: PipelineConfig):
    """The merge's first boundary call over stand-in capabilities, each with its nearest siblings: the prompt the
    stage itself builds (stages/merge.py)."""
    names = [c.name for c in capabilities]
    siblings = {n: [other for other in names if other != n][:MAX_NON_EXAMPLES] for n in names}
    prompt = boundaries_prompt(cfg, names, {c.name: c for c in capabilities}, siblings, {}, 0)
    return Job(prompt=prompt, schema=BoundaryAnswer, validate=lambda a: [])


def _boundary(sibling: str) -> str:
    return f"if the criterion {'x' * max(1, BOUNDARY_CHARS - 30 - len(sibling))}, prefer `{sibling}`"


def _stage(
    name: str, jobs: list, output_chars: float, basis: str, cfg: PipelineConfig, cached: bool = True
) -> StageEstimate:
    """A stage's figures from its jobs' prompts and its answers' size; the expected re-asks each resend the
    conversation (prompt, answer, violations), its prefix served from the cache as the first call's was,
    and pay another answer."""
    n = max(1, len(jobs))
    prompt, output = sum(tokens(j.prompt) for j in jobs), tokens(output_chars)
    cached_tokens, written = caching(jobs, cfg) if cached else (0, 0)
    reasks = REASK_RATE.get(name, OTHER_REASK_RATE) * len(jobs)
    reask_prompt = int(reasks * (prompt / n + output / n + REASK_FEEDBACK_TOKENS))
    reask_output, reask_cached = int(reasks * output / n), int(reasks * cached_tokens / n)
    return StageEstimate(
        name,
        len(jobs),
        prompt + reask_prompt,
        output + reask_output,
        basis,
        cached_prompt_tokens=cached_tokens + reask_cached,
        cache_tokens=written,
        reask_prompt_tokens=reask_prompt,
        reask_output_tokens=reask_output,
        reask_cached_tokens=reask_cached,
    )


def caching(jobs: list, cfg: PipelineConfig) -> tuple[int, int]:
    """(cached prompt tokens, tokens written into explicit caches) for a stage's jobs, as the runner
    and Gemini would serve their shared prefixes (see the module docstring)."""

    cached = written = 0
    for prefix, calls in Counter(getattr(j, "prefix", "") for j in jobs).items():
        size = tokens(prefix)
        if not prefix or size < cfg.llm.context_cache.min_tokens:
            continue
        if (
            cfg.llm.context_cache.enabled
            and cfg.llm.mode == "online"
            and pays(size, calls, cfg.llm.prices, cfg.llm.context_cache.ttl_s, cfg.llm.context_cache.min_tokens)
        ):
            written += size
            cached += calls * size
        else:
            cached += (calls - 1) * size
    return cached, written


@dataclass
class _Plan:
    """What the estimators share: the corpus and config, and the stand-ins each stage leaves for the next."""

    criteria: pl.DataFrame
    cfg: PipelineConfig
    embedder: str
    labels_per: float
    label_chars: int
    unique: int
    micro: list = field(default_factory=list)  # canonicalize's stand-in micro-capabilities
    capabilities: list = field(default_factory=list)  # merge's stand-in capabilities


def estimate(cfg: PipelineConfig, backend: str, embedder: str) -> Estimate:
    criteria = load_corpus(cfg.corpus, cfg.base_dir).frame
    plan = _Plan(
        criteria,
        cfg,
        embedder,
        labels_per=(cfg.labels.min_labels + cfg.labels.max_labels) / 2,
        label_chars=len(_label(cfg, 10)) + 4,
        unique=max(2, round(criteria.height * UNIQUE_LABELS_PER_CRITERION)),
    )
    out = [ESTIMATORS[stage](plan) for stage in STAGES]
    return Estimate(out, cfg.llm.prices, criteria.height, _notes(cfg, backend))


def _cluster_stage(p: _Plan) -> StageEstimate:
    # cluster.unit = "criteria" embeds each criterion's text beside the labels, in the same requests.
    texts = p.criteria.height if p.cfg.cluster.unit == "criteria" else 0
    text_chars = sum(len(t or "") for t in p.criteria["text"].to_list()) if texts else 0
    embed_calls = 0 if p.embedder == "local" else math.ceil((p.unique + texts) / p.cfg.embedding.batch_size)
    return StageEstimate(
        "cluster",
        0,
        0,
        0,
        f"~{p.unique} unique labels" + (f" and {texts} criteria" if texts else "") + f" embedded ({p.embedder})",
        embed_calls=embed_calls,
        embed_tokens=0 if p.embedder == "local" else tokens(p.unique * p.label_chars + text_chars),
    )


def _discover_stage(p: _Plan) -> StageEstimate:
    criteria, cfg, labels_per, label_chars = p.criteria, p.cfg, p.labels_per, p.label_chars
    jobs = capture_jobs(discover, criteria, cfg)
    per_item = (
        labels_per * label_chars + len(cfg.labels.rationale_prefix) + RATIONALE_WORDS * WORD_CHARS + ITEM_OVERHEAD_CHARS
    )
    return _stage(
        "discover",
        jobs,
        criteria.height * per_item,
        f"exact prompts for {criteria.height} criteria; answers ~{tokens(per_item)} tokens a criterion",
        cfg,
    )


def _canonicalize_stage(p: _Plan) -> StageEstimate:
    """The naming calls over stand-in clusters of the k the run would use, and the micro-capabilities they give."""
    criteria, cfg, unique, label_chars = p.criteria, p.cfg, p.unique, p.label_chars
    n, (k, k_note) = criteria.height, cfg.cluster.k_for(unique)
    per_cluster = max(1, unique // k)
    labels = [_label(cfg, i) for i in range(k * per_cluster)]
    clusters = pl.DataFrame(
        {"label": labels, "cluster_id": [i // per_cluster for i in range(len(labels))], "frequency": [1] * len(labels)}
    )
    criterion_clusters = pl.DataFrame(
        {"criterion_id": criteria["criterion_id"].to_list(), "dominant_cluster": [i % k for i in range(n)]}
    )
    # Stand-in label vectors, so each naming prompt lists its nearby clusters as the real one does.
    vectors = np.random.default_rng(0).normal(size=(len(labels), 8)).astype(np.float32)
    jobs = capture_jobs(
        partial(canonicalize, label_embeddings=vectors / np.linalg.norm(vectors, axis=1, keepdims=True)),
        clusters,
        criterion_clusters,
        criteria,
        cfg,
    )
    card_chars = label_chars + CARD_TEXT_CHARS + MICRO_BOUNDARIES * (BOUNDARY_CHARS + 4) + ITEM_OVERHEAD_CHARS
    names = [_label(cfg, 1000 + i) for i in range(k)]
    p.micro = [
        MicroCapability(
            **_card(names[i], names[i + 1 : i + 1 + round(MICRO_BOUNDARIES)]),
            cluster_id=i,
            n_criteria=max(1, n // k),
            n_labelled=max(1, n // k),
            share=1 / k,
            member_labels=labels[i * per_cluster : (i + 1) * per_cluster],
        )
        for i in range(k)
    ]
    return _stage(
        "canonicalize",
        jobs,
        len(jobs) * card_chars,
        f"one call per micro-cluster ({k_note}; ~{per_cluster} labels each)",
        cfg,
    )


def _merge_stage(p: _Plan) -> StageEstimate:
    """Membership over the micro-capabilities, then one call for the boundaries against each capability's nearest
    siblings."""
    micro, cfg, label_chars = p.micro, p.cfg, p.label_chars
    k = len(micro)
    caps = min(k, (cfg.merge.min_caps + cfg.merge.max_caps) // 2)
    jobs = capture_jobs(merge, micro, np.zeros((k, 8), dtype=np.float32), cfg)
    cap_names = [_label(cfg, 2000 + i) for i in range(caps)]
    p.capabilities = capabilities = [
        TaxonomyCapability(
            **_card(name, [c for c in cap_names if c != name][:MAX_NON_EXAMPLES]),
            **_principles(),
            members=[m.name for m in micro[i::caps]],
        )
        for i, name in enumerate(cap_names)
    ]
    if jobs:
        jobs.append(_boundaries_job(capabilities, cfg))
    membership = caps * (label_chars + CARD_TEXT_CHARS + 2 * REASON_CHARS + 2 * ITEM_OVERHEAD_CHARS) + k * label_chars
    boundaries = caps * (label_chars + min(caps - 1, MAX_NON_EXAMPLES) * (BOUNDARY_CHARS + 4) + ITEM_OVERHEAD_CHARS)
    return _stage(
        "merge",
        jobs,
        (membership + boundaries) if jobs else 0,
        f"one call over {k} micro-capabilities into ~{caps} capabilities, one for their boundaries",
        cfg,
        cached=False,
    )


def _tag_stage(p: _Plan) -> StageEstimate:
    criteria, capabilities, cfg, label_chars = p.criteria, p.capabilities, p.cfg, p.label_chars
    jobs = capture_jobs(tag, criteria, Taxonomy(capabilities=capabilities), cfg)
    per_item = (cfg.tag.min_tags + cfg.tag.max_tags) / 2 * label_chars + ITEM_OVERHEAD_CHARS
    return _stage(
        "tag",
        jobs,
        criteria.height * per_item,
        f"exact batches; taxonomy of ~{len(capabilities)} capabilities stood in",
        cfg,
    )


# Each declared stage's estimator (stagedefs.py), keyed by its name and run in the stage order.
ESTIMATORS: dict[str, Callable[[_Plan], StageEstimate]] = {
    "discover": _discover_stage,
    "cluster": _cluster_stage,
    "canonicalize": _canonicalize_stage,
    "merge": _merge_stage,
    "tag": _tag_stage,
}


def _notes(cfg: PipelineConfig, backend: str) -> list[str]:
    notes = [
        f"{backend} backend, model {cfg.llm.model}; prices per million tokens: input "
        f"{cfg.llm.prices.input}, output {cfg.llm.prices.output}, embedding {cfg.llm.prices.embedding}.",
        "Tokens are counted at 4 characters each; answers are sized as a model writes every "
        f"field; re-asks are counted at {REASK_RATE['discover']:.0%} of Stage 1's calls "
        f"and {OTHER_REASK_RATE:.0%} of the others', each resending its conversation. The range "
        f"goes from no re-asks and answers {ANSWER_SPREAD:.0%} shorter to twice the re-asks "
        f"and answers {ANSWER_SPREAD:.0%} longer; retries after network or quota errors are not included.",
        "Cached prompt tokens (the instructions every call of a stage shares, "
        f"once at least {cfg.llm.context_cache.min_tokens} tokens) are priced at "
        f"{cfg.llm.prices.cached()} per million, the tokens written "
        "into explicit caches at the input price; their storage "
        "(llm.prices.cache_storage per million tokens per hour, for minutes) is not included.",
        "Stage 1 prompts are the exact ones; later stages are estimated from the config "
        "(micro-clusters, capabilities, batch sizes), since their prompts depend on earlier answers.",
    ]
    if backend == "offline":
        notes.insert(0, "The offline backend makes no LLM call: this is what the LLM pipeline would cost.")
    return notes
