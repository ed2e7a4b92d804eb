"""Stage 2c: merge the micro-capabilities into 8-10 canonical ones.

The model proposes; code checks every constraint (count, shares computed from the mapping,
coverage, names, boundaries between confusable pairs), re-asks with the violations, and as the
last resort repairs deterministically. The offline backend goes straight to the solver.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from taxonomy.config import PipelineConfig
from taxonomy.llm.runner import Job, Runner
from taxonomy.merge_rules import capability_similarity, check_merge, solve_merge, to_taxonomy_capabilities
from taxonomy.prompts import render
from taxonomy.schemas import MergeAnswer, MicroCapability, Taxonomy
from taxonomy.validate import Violation


def _violations(answer: MergeAnswer, micro, centroids, cfg: PipelineConfig) -> list[Violation]:
    similarity = capability_similarity(answer.capabilities, micro, centroids)
    return check_merge(answer.capabilities, micro, cfg.merge, cfg.labels, similarity)


def merge(micro: list[MicroCapability], centroids: np.ndarray, cfg: PipelineConfig, runner: Runner | None, corpus: str = "") -> Taxonomy:
    """`centroids[i]` is the label-embedding centroid of `micro[i]`."""
    repairs: list[str] = []
    proposal, start = None, None
    if runner is not None:
        total = sum(m.n_criteria for m in micro)
        prompt = render("stage2_merge.j2", rules=cfg.labels, merge=cfg.merge, candidates=micro, n_total=total)
        job = Job(prompt=prompt, schema=MergeAnswer, validate=partial(_violations, micro=micro, centroids=centroids, cfg=cfg))
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
        proposal, solver_notes = solve_merge(micro, centroids, cfg.merge, cfg.labels, start=start)
        repairs += solver_notes
    remaining = check_merge(proposal, micro, cfg.merge, cfg.labels, capability_similarity(proposal, micro, centroids))
    repairs += [f"unresolved: {v}" for v in remaining]
    taxonomy = Taxonomy(
        corpus=corpus, n_criteria=sum(m.n_criteria for m in micro),
        capabilities=to_taxonomy_capabilities(proposal, micro), repairs=repairs,
    )
    taxonomy.content_hash = taxonomy.compute_hash()
    return taxonomy
