"""Each stage, declared once: its name, the stages whose outputs it reads, the files it writes, the config it reads,
its prompt template and its one-line help. Everything else about the stages is derived from DECLARED: the stage
order (run.STAGES), the files a stage must have on disk (run.STAGE_FILES), the prompt hashes (run.PROMPTS), what a
fingerprint covers (provenance.STAGE_CONFIG, STAGE_INPUTS), the `--force` choices and the single-stage commands.

This module is pure data at the bottom of the import layers, so the run directory and provenance can read it.
The code that runs a stage is keyed by its name where that code lives: its step in pipeline.STEPS (which asks the
session's backend, LLM or key-less), its estimator in estimate.ESTIMATORS; tests/test_stages.py fails when a
declared stage lacks either."""

from __future__ import annotations

from dataclasses import dataclass

# The files the stages write, named once; run.py holds the rest of the run's catalog.
LABELS = "stage1_labels.parquet"
CLUSTERS = "clusters.parquet"
CRITERION_CLUSTERS = "criterion_clusters.parquet"
LABEL_EMBEDDINGS = "label_embeddings.npy"
MICRO = "micro_capabilities.json"
TAXONOMY = "taxonomy.json"
TAXONOMY_MD = "taxonomy.md"
TAGS = "stage3_tags.parquet"


@dataclass(frozen=True)
class StageDef:
    name: str
    summary: str  # the first line of the stage's command help
    inputs: tuple[str, ...]  # the stages whose outputs it reads: rebuilt, they make it stale
    files: tuple[str, ...]  # what it writes; a stage with any of them missing is not done
    config: tuple[str, ...]  # the config it reads, "section" or "section.key": changed, it is stale
    prompt: str | None = None  # its prompt template under prompts/, hashed into its fingerprint


# In run order: a stage reads only stages declared before it.
DECLARED = (
    StageDef(
        "discover",
        "Stage 1: tag every criterion with 1-3 validated free-text capability labels.",
        inputs=(),
        files=(LABELS,),
        config=("labels", "discover"),
        prompt="stage1_discovery.j2",
    ),
    StageDef(
        "cluster",
        "Stage 2a: embed the unique labels and cluster them into micro-clusters.",
        inputs=("discover",),
        files=(CLUSTERS, CRITERION_CLUSTERS, LABEL_EMBEDDINGS),
        config=("cluster", "embedding"),
    ),
    StageDef(
        "canonicalize",
        "Stage 2b: name each micro-cluster (name, description, signal, example, non-examples).",
        inputs=("cluster",),
        files=(MICRO,),
        config=("labels", "canonicalize"),
        prompt="stage2_canonicalize.j2",
    ),
    StageDef(
        "merge",
        "Stage 2c: merge micro-capabilities into the final taxonomy, constraints checked and repaired in code.",
        inputs=("canonicalize",),
        files=(TAXONOMY, TAXONOMY_MD),
        config=("labels", "merge"),
        prompt="stage2_merge.j2",
    ),
    StageDef(
        "tag",
        "Stage 3: tag every criterion with 1-3 taxonomy capabilities, most confident first.",
        inputs=("discover", "merge"),
        files=(TAGS,),
        config=("labels", "tag", "discover.brief_max_chars"),
        prompt="stage3_tagging.j2",
    ),
)
STAGE = {d.name: d for d in DECLARED}
