"""The offline backend: every LLM stage's contract fulfilled with classical NLP.

Deterministic, fast, no downloads, and no domain vocabulary: the kinds of check are induced
from the corpus (features.py: token spread across tasks, predicate positions, task-mean
subtraction; discover.py: one Ward tree cut into broad and fine kinds). Its outputs pass the
same validators an LLM's do, and its quality is measured (benchmarks/quality.py), not assumed.

    discover_offline(frame, rules)                       -> criterion_id, labels, rationale
    CriterionLabelEmbedder(criteria, stage1).embed(labels) -> label vectors for Stage 2a
    name_cluster_offline(cluster_id, members, examples, rules, taken) -> CapabilityCard
    tag_offline(frame, labels, taxonomy, micro_labels, max_tags) -> criterion_id, tags, primary, score
"""
from taxonomy.offline.canonicalize import name_cluster_offline
from taxonomy.offline.discover import discover_offline
from taxonomy.offline.tag import tag_offline

__all__ = ["discover_offline", "name_cluster_offline", "tag_offline"]
