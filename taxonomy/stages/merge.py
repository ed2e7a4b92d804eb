"""Stage 2c: merge the micro-capabilities into 8-10 canonical ones.

The model proposes; code checks every constraint (count, shares computed from the mapping,
coverage, names, 1-3 non-examples against nearest siblings, P2/P3 with reasons), re-asks with the
violations, and as the last resort repairs deterministically. The offline backend goes straight to
the solver, starting from a weighted k-means of the micro-capability centroids.
"""
from __future__ import annotations

import re
from functools import partial

import numpy as np

from taxonomy.config import PipelineConfig
from taxonomy.llm.runner import Job, Runner
from taxonomy.merge_rules import capability_similarity, check_merge, hard_violations, solve_merge, to_taxonomy_capabilities
from taxonomy.run import RunError
from taxonomy.prompts import render
from taxonomy.schemas import DesignPrinciples, MergeAnswer, MergedCapability, MicroCapability, Taxonomy
from taxonomy.siblings import capability_co_counts, choose_siblings
from taxonomy.validate import Violation


def _violations(answer: MergeAnswer, micro, centroids, cfg: PipelineConfig, co_micro=None) -> list[Violation]:
    similarity = capability_similarity(answer.capabilities, micro, centroids)
    co = capability_co_counts(answer.capabilities, micro, co_micro)
    out = check_merge(answer.capabilities, micro, cfg.merge, cfg.labels, similarity, co_counts=co)
    return out + [Violation(None, p) for cap in answer.capabilities for p in principle_problems(cap)]


_SENTENCE_END = re.compile(r"[.!?。！？](?:\s+|$)")
MAX_REASON_WORDS = 45


def principle_problems(cap: DesignPrinciples, name: str | None = None) -> list[str]:
    """P2 and P3 are decided (true or false) with a one-sentence reason each."""
    name = name or getattr(cap, "name", "capability")
    out = []
    for field, what in (("needs_native_inspection", "P2: does checking it depend on artifact properties lost when the deliverable is flattened to text or rendered"),
                        ("needs_domain_conventions", "P3: does it depend on conventions absent from the criterion text")):
        value, reason = getattr(cap, field), getattr(cap, f"{field}_reason").strip()
        if value is None:
            out.append(f"`{name}`: set `{field}` to true or false ({what}?)")
        ends = len(_SENTENCE_END.findall(reason))
        if not reason or ends > 1 or len(reason.split()) > MAX_REASON_WORDS:
            out.append(f"`{name}`: `{field}_reason` must be one sentence of at most {MAX_REASON_WORDS} words saying why "
                       f"({'it is empty' if not reason else f'it has {ends} sentences and {len(reason.split())} words'})")
    return out


def _offline_start(micro: list[MicroCapability], centroids: np.ndarray, cfg: PipelineConfig) -> list[MergedCapability] | None:
    """Offline start: Ward over the micro-capability centroids, with k the middle of the allowed
    count; the solver then repairs count and shares as for any start. Ward, like the offline
    Stage 1 tree it mirrors, needs no seed: with weighted k-means here the same corpus gave
    capabilities that moved 22% of PaperBench's criteria between seeds (benchmarks/stability.py)."""
    from sklearn.cluster import AgglomerativeClustering
    from threadpoolctl import threadpool_limits

    k = (cfg.merge.min_caps + cfg.merge.max_caps) // 2
    weights = np.array([max(m.n_criteria, 0) for m in micro], dtype=float)
    if len(micro) <= k or weights.sum() <= 0:
        return None
    with threadpool_limits(1):  # tiny problem: BLAS/OpenMP threads only contend
        groups = AgglomerativeClustering(n_clusters=k, linkage="ward").fit_predict(centroids)
    start = []
    for g in sorted(set(groups.tolist())):
        members = [m for m, gi in zip(micro, groups) if gi == g]
        lead = max(members, key=lambda m: (m.n_criteria, m.name))
        start.append(MergedCapability(**lead.model_dump(include={"name", "description", "diagnostic_signal", "example_pattern", "non_examples"}),
                                      member_input_names=[m.name for m in members]))
    return start


def _distinguish(capabilities: list, suffix: str) -> list:
    """Two capabilities cut from one group (a repair split) inherit the same card text; a reader
    and a Stage 3 tagger must still tell them apart, so each names what it covers."""
    from collections import Counter

    def gist(text: str) -> str:  # the offline cards differ only in a parenthesised name
        return re.sub(r"\s*\([^)]*\)", "", text).strip().lower()

    seen = Counter(gist(c.description) for c in capabilities)
    for cap in capabilities:
        if seen[gist(cap.description)] > 1:
            covers = ", ".join(m.removesuffix(suffix).replace("_", " ") for m in cap.members[:6])
            cap.description = f"{cap.description} It covers: {covers}."
    return capabilities


OFFLINE_UNKNOWN = "Unknown: the offline backend has no domain-free signal to decide it; set it by hand or run the LLM merge."


def merge(micro: list[MicroCapability], centroids: np.ndarray, cfg: PipelineConfig, runner: Runner | None, corpus: str = "",
          co_micro: np.ndarray | None = None) -> Taxonomy:
    """`centroids[i]` is the label-embedding centroid of `micro[i]`; `co_micro[i, j]` (optional) counts
    criteria whose Stage 1 labels fall in both micro-clusters, for choosing each capability's siblings."""
    repairs: list[str] = []
    proposal, start = None, None
    if runner is not None:
        total = sum(m.n_criteria for m in micro)
        sim = np.asarray(centroids, dtype=np.float64) @ np.asarray(centroids, dtype=np.float64).T
        near = [", ".join(f"`{micro[j].name}`" for j in row) for row in choose_siblings(sim, co_micro, k=2)]
        prompt = render("stage2_merge.j2", rules=cfg.labels, merge=cfg.merge, candidates=micro, n_total=total, near=near)
        job = Job(prompt=prompt, schema=MergeAnswer, validate=partial(_violations, micro=micro, centroids=centroids, cfg=cfg, co_micro=co_micro))
        (answer,) = runner.run("merge", [job], "Stage 2 merge")
        if answer.ok:
            proposal = answer.value.capabilities
        else:
            start = answer.value.capabilities if answer.value else None
            repairs.append(
                f"the model's merge still broke {len(answer.violations)} rule(s) after {answer.attempts} attempt(s): "
                + "; ".join(str(v) for v in answer.violations[:5])
            )
    if proposal is None:
        if runner is None:
            start = _offline_start(micro, centroids, cfg)
        proposal, solver_notes = solve_merge(micro, centroids, cfg.merge, cfg.labels, start=start, co_micro=co_micro)
        repairs += solver_notes
    remaining = check_merge(proposal, micro, cfg.merge, cfg.labels, capability_similarity(proposal, micro, centroids),
                            co_counts=capability_co_counts(proposal, micro, co_micro))
    repairs += [f"unresolved: {v}" for v in remaining]
    violations = hard_violations(proposal, micro, cfg.merge)
    if remaining and not violations:  # a name or boundary rule the solver could not mend
        violations = [f"merge rule: {v}" for v in remaining]
    capabilities = _distinguish(to_taxonomy_capabilities(proposal, micro), cfg.labels.suffix)
    for cap, card in zip(capabilities, proposal):
        for field in DesignPrinciples.model_fields:
            setattr(cap, field, getattr(card, field))
        for field in ("needs_native_inspection", "needs_domain_conventions"):
            if getattr(cap, field) is None and not getattr(cap, f"{field}_reason"):
                setattr(cap, f"{field}_reason", OFFLINE_UNKNOWN if runner is None else
                        "Unknown: this capability was formed by the repair solver, not decided by the model.")
    labels_of = {m.name: m.member_labels for m in micro}
    for cap in capabilities:
        cap.labels = sorted({label for member in cap.members for label in labels_of.get(member, [])})
    taxonomy = Taxonomy(corpus=corpus, n_criteria=sum(m.n_criteria for m in micro), capabilities=capabilities,
                        repairs=repairs, violations=violations)
    taxonomy.content_hash = taxonomy.compute_hash()
    return taxonomy


class ConstraintError(RunError):
    """The merged taxonomy breaks a hard constraint and the run did not accept violations."""


def constraint_failure(taxonomy: Taxonomy, where: str) -> ConstraintError:
    """One line: the first broken constraint, how many more, where the rejected taxonomy is, the fix."""
    more = f" (and {len(taxonomy.violations) - 1} more)" if len(taxonomy.violations) > 1 else ""
    return ConstraintError(
        f"{where}: the merged taxonomy breaks a hard constraint: {taxonomy.violations[0]}{more}; "
        "fix: adjust merge.min_caps, max_caps, min_share, max_share or cluster.k in the pipeline config, "
        "or pass --accept-violations to keep it with the violations listed"
    )
