"""The key-less backend behind the same interface as the LLM one (taxonomy/backend.py).

No model reads the criteria: every step is corpus statistics, deterministic, on a laptop CPU. Its
outputs pass the validators an LLM's answers do; what fails is marked failed, never kept.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from taxonomy.config import PipelineConfig
from taxonomy.merge.check import share_violations
from taxonomy.merge.siblings import merge_siblings
from taxonomy import provenance
from taxonomy.stages.common import criterion_batches
from taxonomy.stages.discover import SCHEMA as LABELS_SCHEMA
from taxonomy.stages.tag import SCHEMA as TAGS_SCHEMA
from taxonomy.stages.tag import tag_problems
from taxonomy.validate import check_distinct_in_batch, check_label_count, check_rationale_prefix, label_problems

# lazy: the key-less stages (offline/), the merge solver and Stages 2b and 2c load scikit-learn (about 1.2 s); each
# method imports the ones it runs, so a key-less session that only reads a run (guidance, export) starts without it.

NOTICE = (
    "Backend: offline (no LLM: criteria grouped by classical NLP statistics; no model read them, so names are their "
    "characteristic phrases). For meaning set GEMINI_API_KEY, or pass --provider gemini | vertex | openai."
)
UNKNOWN = (
    "Unknown: the offline backend reads no meaning, so it cannot decide this; set it by hand or run the LLM merge."
)


class OfflineBackend:
    name = "offline"
    model = "none"
    cache = None
    scales_k = False  # its Stage 1 labels are already its fine kinds, one cluster each
    labels_are_kinds = True  # ...so Stage 2a clusters them, not the criteria again (cluster.unit)
    tag_source = "offline"

    def __init__(self) -> None:
        self.usage: dict = {}  # no paid calls
        self.fitted = None  # the merge's tagger fit (offline/tag.py's Fit), which Stage 3 rebinds rather than refits

    def notice(self, cfg: PipelineConfig) -> str:
        return NOTICE

    def identity(self, cfg: PipelineConfig) -> dict[str, Any]:
        # Where no model runs, the code is the model: a run built by another version is not current.
        # ... and so are its knobs: a run built with other [offline] settings is not current either.
        return {"backend": "offline", "code": provenance.code_hash(), "offline": cfg.offline.model_dump()}

    def ask(self, stage, jobs, title) -> None:
        return None

    def fitted_tagger(self, folder):
        """The tagger Stage 3 fitted and saved in the run `folder`, or None where none was saved."""
        from taxonomy.offline.model import Tagger  # lazy: scikit-learn, see above

        return Tagger.load(folder)

    def brief_notes(self, criteria, cfg) -> list[str]:
        return []  # no prompt carries the briefs, so none is cut

    def discover(self, criteria: pl.DataFrame, cfg: PipelineConfig) -> pl.DataFrame:
        """Labels that pass the same validators an LLM's answer would; anything that fails is marked failed.
        Each distinct label is checked once (there are about `fine_kinds`), and the batch paraphrase check runs
        as on the LLM path; the rationale quotes its criterion, so it is grounded by construction."""
        from taxonomy.offline.discover import discover_offline  # lazy: scikit-learn, see above

        rules = cfg.labels
        found = discover_offline(criteria, rules, cfg.offline)
        labels_of = dict(zip(found["criterion_id"].to_list(), found["labels"].to_list()))
        problems: dict[str, list[str]] = {}
        for batch in criterion_batches(criteria, cfg.discover.batch_size, 0):
            ids = [r["criterion_id"] for r in batch.rows]
            for v in check_distinct_in_batch(
                {i: labels_of.get(cid) or [] for i, cid in enumerate(ids)}, rules, batch.category
            ):
                problems.setdefault(ids[v.item], []).append(v.message)
        of_label = {label: label_problems(label, rules) for labels in labels_of.values() for label in labels}
        rows = []
        for cid, labels, rationale in found.iter_rows():
            wrong = check_label_count(labels, rules) + [p for label in labels for p in of_label[label]]
            wrong += check_rationale_prefix(rationale, rules) + problems.get(cid, [])
            rows.append(
                {
                    "criterion_id": cid,
                    "labels": [] if wrong else labels,
                    "rationale": rationale,
                    "attempts": 0,
                    "status": "failed" if wrong else "ok",
                    "problems": wrong,
                }
            )
        return pl.DataFrame(rows, schema=LABELS_SCHEMA)

    def label_embedder(self, criteria, stage1, cfg: PipelineConfig, default):
        if cfg.embedding.provider not in ("auto", "local"):
            return default
        from taxonomy.offline.cluster import CriterionLabelEmbedder  # lazy: scikit-learn, see above

        return CriterionLabelEmbedder(criteria, stage1, cfg.offline)

    def canonicalize(self, clusters, criterion_clusters, criteria, cfg, stage1, label_embeddings):
        from taxonomy.stages.canonicalize import cluster_inputs, micro_capabilities, name_offline  # lazy: see above

        inputs = cluster_inputs(clusters, criterion_clusters, criteria, cfg)  # the dominant criteria only
        taken: set[str] = set()
        cards = []
        for inp in inputs:
            cards.append(name_offline(inp, cfg, taken))
            taken.add(cards[-1].name)
        return micro_capabilities(inputs, cards, criterion_clusters.height), []

    def merge(self, micro, centroids, cfg, pipeline_name, co_micro, criteria, stage1, owners=None):
        """`owners` (criteria x micro, offline/start.py): which micro-clusters each criterion belongs to; by
        default those its Stage 1 labels fall in, which are its fine kinds."""
        # lazy: scikit-learn, see above
        from taxonomy.merge.solver import solve_merge
        from taxonomy.offline.merge import describe_offline
        from taxonomy.offline.start import merge_start
        from taxonomy.offline.tag import Fit, fit_tagger
        from taxonomy.stages.merge import assemble

        proposal, notes = solve_merge(
            micro,
            centroids,
            cfg.merge,
            cfg.labels,
            start=merge_start(micro, centroids, criteria, stage1, cfg, owners),
            co_micro=co_micro,
            boundaries=True,
        )
        taxonomy = assemble(proposal, micro, centroids, cfg, pipeline_name, co_micro, notes, UNKNOWN)
        if taxonomy.violations:
            return taxonomy
        # Stage 3's tagger, fitted here so that each capability is shown by the criteria it will be tagged with.
        tagger = fit_tagger(criteria, stage1, taxonomy, None, cfg.offline, cfg.merge)
        self.fitted = Fit(tagger, criteria, stage1, cfg.merge)
        primary = tagger.scores([t or "" for t in criteria["text"].to_list()]).argmax(axis=1)
        # No model names the offline capabilities: their criteria's own phrases do.
        taxonomy = describe_offline(
            taxonomy, criteria, primary, cfg, merge_siblings(taxonomy, micro, centroids, co_micro)
        )
        taxonomy.violations = share_violations(taxonomy.names(), [c.share for c in taxonomy.capabilities], cfg.merge)
        return taxonomy

    def tag(self, criteria, taxonomy, cfg, stage1, micro_labels, folder=None) -> pl.DataFrame:
        """Stage 3 through the tagger fitted on the corpus of the run that holds the taxonomy (`folder`), saved
        there: each criterion tagged by its own text, never by statistics of the criteria tagged with it. A
        taxonomy with no run's corpus beside it (a bare taxonomy.json) is tagged by its cards and labels."""
        # lazy: scikit-learn, see above
        from taxonomy.offline.discover import discover_offline
        from taxonomy.offline.tag import tag_offline, tag_with, tagger_for

        tagger = tagger_for(folder, taxonomy, micro_labels, cfg.offline, cfg.merge, self.fitted)
        if tagger is not None:
            found = tag_with(tagger, criteria, cfg.tag.max_tags)
        else:
            if stage1 is None:  # a new corpus against a bare taxonomy: derive its labels first
                stage1 = discover_offline(criteria, cfg.labels, cfg.offline)
            found = tag_offline(
                criteria,
                stage1.select("criterion_id", "labels"),
                taxonomy,
                micro_labels,
                cfg.tag.max_tags,
                cfg.offline,
                cfg.merge,
            )
        return checked(found, taxonomy.names(), cfg.tag)


def checked(found: pl.DataFrame, names: list[str], rules) -> pl.DataFrame:
    """Stage 3's table: the tagger's tags through the validators an LLM's answer passes (`rules`: cfg.tag). A
    tagger gives few distinct tag lists, so each is checked once."""
    tags = found["tags"].to_list()
    of_tags: dict[tuple, list[str]] = {}
    for t in tags:
        if tuple(t) not in of_tags:
            of_tags[tuple(t)] = tag_problems(t, names, rules)
    problems = [of_tags[tuple(t)] for t in tags]
    return pl.DataFrame(
        {
            "criterion_id": found["criterion_id"].to_list(),
            "tags": [[] if p else t for t, p in zip(tags, problems)],
            "primary": [None if p else x for x, p in zip(found["primary"].to_list(), problems)],
            "score": found["score"].to_list(),
            "attempts": [0] * len(tags),
            "status": ["failed" if p else "ok" for p in problems],
            "problems": problems,
        },
        schema=TAGS_SCHEMA,
    )
