"""The offline backend: every LLM stage's contract fulfilled with classical NLP.

Deterministic, fast, no downloads. Its outputs pass the same validators an LLM's do, and
its quality is measured (benchmarks/offline_probe.py), not assumed.

    discover_offline(frame, rules)                       -> criterion_id, labels, rationale
    name_cluster_offline(cluster_id, members, examples, rules, taken) -> CapabilityCard
    tag_offline(frame, labels, taxonomy, micro_labels, max_tags) -> criterion_id, tags, primary, score

`check_kind(label)` names the lexicon check kind behind a Stage-1 label (checks.KINDS).
"""
from taxonomy.offline.canonicalize import name_cluster_offline
from taxonomy.offline.checks import KINDS, detect, kind_of_label as check_kind
from taxonomy.offline.discover import discover_offline
from taxonomy.offline.tag import tag_offline

__all__ = ["KINDS", "check_kind", "detect", "discover_offline", "name_cluster_offline", "tag_offline"]
