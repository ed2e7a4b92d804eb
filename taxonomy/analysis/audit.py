"""Coverage audit: a new rubric corpus, tagged against a frozen taxonomy.

Each finder below is a small function over polars frames, so the report and the
notebooks can call one alone. `audit_coverage` runs them all and bundles the result.

Inputs: criteria [criterion_id, task_id, text, ...] and Stage-3 tags
[criterion_id, tags, primary, score?, scores?]. `score` (how well the primary tag
fits) exists only for scored taggers; `scores` (one per tag, aligned with `tags`)
is optional. Finders that need a missing column return an empty frame.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import polars as pl
from sklearn.feature_extraction.text import TfidfVectorizer

from taxonomy.analysis.breakdown import to_markdown
from taxonomy.schemas import Taxonomy

UNTAGGED = "(untagged)"


@dataclass
class AuditResult:
    shares: pl.DataFrame  # capability, n, share, reference_share, diff
    task_matrix: pl.DataFrame  # task_id, one count column per capability
    missing: pl.DataFrame  # task_id, capability, prevalence
    unmapped: pl.DataFrame  # criterion_id, task_id, primary, score, reason, text
    duplicates: pl.DataFrame  # task_id, criterion_a, criterion_b, similarity, text_a, text_b
    bundled: pl.DataFrame  # criterion_id, task_id, n_checks, reason, text
    # What "fits no capability" means here and how it was calibrated, printed above the unmapped list.
    unmapped_note: str = ""

    FRAMES = ("shares", "task_matrix", "missing", "unmapped", "duplicates", "bundled")

    def summary(self, n_criteria: int) -> str:
        """One line: how many audited criteria fit no capability."""
        n = self.unmapped.height
        pct = 100 * n / n_criteria if n_criteria else 0.0
        return f"Fit no capability: {n} of {n_criteria} criteria ({pct:.1f}%)"

    def to_markdown(self, max_rows: int = 50) -> str:
        titles = {
            "shares": "Capability shares (primary tag) vs reference",
            "task_matrix": "Criteria per task and capability",
            "missing": "Tasks missing a capability most tasks have",
            "unmapped": "Criteria that fit no capability",
            "duplicates": "Near-duplicate criteria within a task",
            "bundled": "Criteria that bundle several checks",
        }
        parts = [
            "# Coverage audit",
            "",
            "Shares, reference shares, differences and prevalence are in percent, as in `taxonomy breakdown`.",
            "",
            self.summary(int(self.shares["n"].sum())) + " (listed below).",
        ]
        for name in self.FRAMES:
            parts.append(f"\n## {titles[name]}\n")
            if name == "unmapped" and self.unmapped_note:
                parts.append(self.unmapped_note + "\n")
            parts.append(frame_to_markdown(getattr(self, name), max_rows))
        return "\n".join(parts) + "\n"


def audit_coverage(
    criteria: pl.DataFrame,
    tags: pl.DataFrame,
    taxonomy: Taxonomy,
    reference_shares: dict[str, float] | None = None,
    *,
    none_threshold: float,
    novelty_threshold: float | None = None,
    unmapped_note: str = "",
    missing_share: float = 0.5,
    dup_threshold: float = 0.9,
    close_margin: float = 0.1,
) -> AuditResult:
    names = taxonomy.names()
    if reference_shares is None:
        reference_shares = {c.name: c.share for c in taxonomy.capabilities}
    joined = join_tags(criteria, tags)
    matrix = task_capability_matrix(joined, names)
    return AuditResult(
        shares=capability_shares(joined, names, reference_shares),
        task_matrix=matrix,
        missing=missing_capabilities(matrix, missing_share),
        unmapped=low_fit_criteria(joined, none_threshold, novelty_threshold),
        duplicates=near_duplicates(criteria, dup_threshold),
        bundled=bundled_criteria(joined, close_margin=close_margin, min_score=none_threshold),
        unmapped_note=unmapped_note,
    )


def join_tags(criteria: pl.DataFrame, tags: pl.DataFrame) -> pl.DataFrame:
    """Criteria with their tags; untagged criteria (failed or absent) keep a null primary."""
    keep = [
        c
        for c in ("criterion_id", "tags", "primary", "score", "scores", "wording_rank", "none_reason")
        if c in tags.columns
    ]
    base = criteria.select("criterion_id", "task_id", "text")
    return base.join(tags.select(keep), on="criterion_id", how="left")


# ---- shares and the task matrix -----------------------------------------------------
def capability_shares(
    joined: pl.DataFrame, names: list[str], reference_shares: dict[str, float] | None = None
) -> pl.DataFrame:
    """Share of all criteria whose primary tag is each capability.

    The denominator is every criterion, so an "(untagged)" row appears when some
    criteria have no primary and the shares still sum to one.
    """
    total = max(joined.height, 1)
    counts = dict(joined.group_by("primary").len().iter_rows())
    rows = [(n, int(counts.get(n, 0))) for n in names]
    untagged = int(counts.get(None, 0)) + sum(int(v) for k, v in counts.items() if k is not None and k not in names)
    if untagged:
        rows.append((UNTAGGED, untagged))
    ref = reference_shares or {}
    out = pl.DataFrame(
        {
            "capability": [r[0] for r in rows],
            "n": [r[1] for r in rows],
            "share": [r[1] / total for r in rows],
            "reference_share": [ref.get(r[0]) for r in rows],
        },
        schema={"capability": pl.Utf8, "n": pl.Int64, "share": pl.Float64, "reference_share": pl.Float64},
    )
    return out.with_columns(diff=pl.col("share") - pl.col("reference_share"))


def task_capability_matrix(joined: pl.DataFrame, names: list[str]) -> pl.DataFrame:
    """Criteria per task (rows, in corpus order) and primary capability (columns)."""
    tasks = joined.select("task_id").unique(maintain_order=True)
    counts = joined.filter(pl.col("primary").is_in(names)).group_by("task_id", "primary").len()
    data = {"task_id": tasks["task_id"].to_list()}
    lookup = {(t, p): n for t, p, n in counts.iter_rows()}
    for name in names:
        data[name] = [int(lookup.get((t, name), 0)) for t in data["task_id"]]
    schema = {"task_id": joined.schema["task_id"], **{n: pl.Int64 for n in names}}
    return pl.DataFrame(data, schema=schema)


def missing_capabilities(matrix: pl.DataFrame, missing_share: float = 0.5) -> pl.DataFrame:
    """(task, capability) where the task has none of a capability that ≥ missing_share of tasks have."""
    caps = [c for c in matrix.columns if c != "task_id"]
    n_tasks = matrix.height
    rows = []
    for cap in caps:
        present = matrix[cap] > 0
        prevalence = float(present.sum()) / n_tasks if n_tasks else 0.0
        if prevalence < missing_share:
            continue
        for task in matrix.filter(~present)["task_id"].to_list():
            rows.append((task, cap, prevalence))
    return pl.DataFrame(
        rows,
        schema={"task_id": matrix.schema["task_id"], "capability": pl.Utf8, "prevalence": pl.Float64},
        orient="row",
    ).sort("task_id", "capability")


# ---- criteria that fit nothing ------------------------------------------------------
def low_fit_criteria(
    joined: pl.DataFrame, none_threshold: float, novelty_threshold: float | None = None
) -> pl.DataFrame:
    """Criteria that fit no capability: untagged; a model's answer that none fits (`none_reason`); wording the run's
    corpus mostly lacks (`wording_rank` below `novelty_threshold`, see offline/novelty.py); or a primary that fits
    worse than none_threshold. Least covered first."""
    cols = {"score": pl.Float64, "wording_rank": pl.Float64, "none_reason": pl.Utf8}
    frame = joined.with_columns(
        (pl.col(c) if c in joined.columns else pl.lit(None)).cast(t).alias(c) for c, t in cols.items()
    )
    cut = float("-inf") if novelty_threshold is None else novelty_threshold
    reason = (
        pl.when(pl.col("primary").is_null() & pl.col("none_reason").is_null())
        .then(pl.lit("untagged"))
        .when(pl.col("none_reason").is_not_null())
        .then(pl.format("the model: {}", pl.col("none_reason")))
        .when(pl.col("wording_rank") < cut)
        .then(pl.format("wording rank {} < {}", pl.col("wording_rank").round(3), pl.lit(round(cut, 3))))
        .when(pl.col("score") < none_threshold)
        .then(pl.lit(f"score < {none_threshold:g}"))
    )
    return (
        frame.with_columns(reason=reason)
        .filter(pl.col("reason").is_not_null())
        .select("criterion_id", "task_id", "primary", "score", "wording_rank", "reason", "text")
        .sort("wording_rank", "score", nulls_last=False)
    )


# ---- near duplicates ----------------------------------------------------------------
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*(?:[eE][-+]?\d+)?")


def near_duplicates(criteria: pl.DataFrame, dup_threshold: float = 0.9, *, same_numbers: bool = True) -> pl.DataFrame:
    """Pairs of criteria in the same task whose TF-IDF cosine is ≥ dup_threshold.

    IDF is fitted on the whole corpus so that boilerplate shared by every task
    ("Code has been executed such that ...") weighs little. Templated rubrics
    (PaperBench repeats one sentence per learning rate and layer width) give pairs
    that differ only in a number; those are separate checks, not duplicates, so with
    same_numbers a pair must also mention the same numbers. In tree rubrics the same
    sentence recurs under different parents ("... for the Convection problem > ...");
    so when a `context` column is present, only criteria with the same context pair up.
    """
    schema = {
        "task_id": criteria.schema["task_id"],
        "criterion_a": criteria.schema["criterion_id"],
        "criterion_b": criteria.schema["criterion_id"],
        "similarity": pl.Float64,
        "text_a": pl.Utf8,
        "text_b": pl.Utf8,
    }
    texts = criteria["text"].fill_null("").to_list()
    if criteria.height < 2 or not any(t.strip() for t in texts):
        return pl.DataFrame(schema=schema)
    try:
        # Unigrams without stop words: rewording ("in the file X" vs "in X") should barely move the score.
        matrix = TfidfVectorizer(sublinear_tf=True, stop_words="english").fit_transform(texts)
    except ValueError:  # only stop words / no tokens anywhere
        return pl.DataFrame(schema=schema)
    ids, tasks = criteria["criterion_id"].to_list(), criteria["task_id"].to_list()
    numbers = [sorted(_NUMBER.findall(t)) for t in texts]
    contexts = criteria["context"].fill_null("").to_list() if "context" in criteria.columns else [""] * len(texts)
    groups: dict[tuple, list[int]] = {}
    for i, key in enumerate(zip(tasks, contexts)):
        groups.setdefault(key, []).append(i)
    rows = []
    for (task, _), idx in groups.items():
        if len(idx) < 2:
            continue
        sims = (matrix[idx] @ matrix[idx].T).toarray()  # rows are L2-normalised: this is cosine
        for a, b in zip(*np.triu_indices(len(idx), k=1)):
            i, j = idx[a], idx[b]
            if sims[a, b] >= dup_threshold and (not same_numbers or numbers[i] == numbers[j]):
                rows.append((task, ids[i], ids[j], min(float(sims[a, b]), 1.0), texts[i], texts[j]))
    return pl.DataFrame(rows, schema=schema, orient="row").sort("similarity", descending=True)


# ---- bundled criteria ---------------------------------------------------------------
# A criterion "bundles" checks when a verifier must confirm two or more independent
# facts to pass it. The text rule counts the checks:
#   1 + one per ";" between clauses
#     + one per extra sentence (". " followed by a capital; "e.g." / "i.e." do not count)
#     + one per coordinated predicate: "and"/"as well as"/"then" followed by a verb
#       (an auxiliary, a common rubric verb, or a word of 5+ letters ending in "-ed")
#     + (items - 1) for an enumeration "(1) .. (2) .." / "(a) .. (b) .." or a list
#       of three or more comma-separated items closed by "and" / "or".
# and flags n_checks ≥ 2. Coordinated nouns ("query and value matrices") do not count.
# The tag rule flags criteria whose two best distinct tags score within close_margin
# of each other, the second still at least min_score (needs a per-tag `scores`
# column aligned with `tags`; a single `score` cannot show it).
_AUX = "is|are|was|were|has|have|had|does|do|did|should|must|can|will|may|also|then"
_VERBS = (
    "includes|include|contains|contain|returns|return|reports|report|uses|use|mentions|mention|"
    "states|state|provides|provide|explains|explain|lists|list|cites|cite|describes|describe|"
    "shows|show|saves|save|computes|compute|prints|print|displays|display|outputs|output|"
    "produces|produce|runs|run|handles|handle|avoids|avoid|supports|support|implements|implement|"
    "defines|define|loads|load|writes|write|records|record|identifies|identify|gives|give|notes|note"
)
_COORD = re.compile(rf"\b(?:and|as well as|then)\s+(?:(?:{_AUX}|{_VERBS})\b|[a-z]{{3,}}ed\b)", re.I)
_SENTENCE = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)\.\s+(?=[A-Z])")
_ENUM = re.compile(r"(?:^|\s)\(?(?:\d{1,2}|[a-h]|i{1,3}|iv|v)\)\s", re.I)
_LIST = re.compile(r"\b[\w-]+(?:\s[\w-]+)?(?:,\s[\w-]+(?:\s[\w-]+)?){1,},?\s(?:and|or)\s[\w-]+")


def count_checks(text: str) -> tuple[int, list[str]]:
    """Number of separate checks in a criterion and the cues that raised it."""
    text = (text or "").strip()
    cues: list[str] = []
    n = 1
    semis = len([s for s in text.split(";") if s.strip()]) - 1
    if semis > 0:
        n += semis
        cues.append(f"{semis}×';'")
    sentences = len(_SENTENCE.findall(text.rstrip(".")))
    if sentences:
        n += sentences
        cues.append(f"{sentences + 1} sentences")
    coords = len(_COORD.findall(text))
    if coords:
        n += coords
        cues.append(f"{coords}×coordinated verb")
    enum = len(_ENUM.findall(text))
    if enum >= 2:
        n += enum - 1
        cues.append(f"enumeration of {enum}")
    else:
        items = max((_list_items(m.group(0)) for m in _LIST.finditer(text)), default=0)
        if items >= 3:
            n += items - 1
            cues.append(f"list of {items}")
    return n, cues


def _list_items(match: str) -> int:
    """'a, b and c' and 'a, b, and c' both hold three items (with or without the Oxford comma)."""
    commas = match.count(",")
    return commas + 1 if re.search(r",\s(?:and|or)\s", match) else commas + 2


def bundled_criteria(
    joined: pl.DataFrame, *, close_margin: float = 0.1, min_score: float = 0.0, min_checks: int = 2
) -> pl.DataFrame:
    """Criteria flagged by the text rule or the close-scores rule (see the comment above)."""
    has_scores = "scores" in joined.columns and "tags" in joined.columns
    rows = []
    for rec in joined.iter_rows(named=True):
        n, cues = count_checks(rec["text"])
        reasons = cues if n >= min_checks else []
        if has_scores:
            close = _close_tags(rec.get("tags"), rec.get("scores"), close_margin, min_score)
            if close:
                reasons.append(f"close scores: {close}")
        if reasons:
            rows.append((rec["criterion_id"], rec["task_id"], n, "; ".join(reasons), rec["text"]))
    schema = {
        "criterion_id": joined.schema["criterion_id"],
        "task_id": joined.schema["task_id"],
        "n_checks": pl.Int64,
        "reason": pl.Utf8,
        "text": pl.Utf8,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def _close_tags(tags, scores, margin: float, min_score: float) -> str:
    if not tags or not scores or len(tags) != len(scores):
        return ""
    best: dict[str, float] = {}
    for t, s in zip(tags, scores):
        if s is not None:
            best[t] = max(best.get(t, float("-inf")), float(s))
    ranked = sorted(best.items(), key=lambda kv: -kv[1])
    if len(ranked) < 2 or ranked[1][1] < min_score or ranked[0][1] - ranked[1][1] > margin:
        return ""
    return f"{ranked[0][0]} {ranked[0][1]:.2f} vs {ranked[1][0]} {ranked[1][1]:.2f}"


# ---- markdown -----------------------------------------------------------------------
# Shares print as percentages in the same format as `taxonomy breakdown` (one formatter for both).
PCT_COLUMNS = ("share", "reference_share", "diff", "prevalence")


def frame_to_markdown(df: pl.DataFrame, max_rows: int = 50) -> str:
    """A GitHub-style table; long frames are cut with a note, pipes and newlines escaped."""
    if df.height == 0:
        return "_none_\n"
    clean = df.with_columns(pl.col(c).str.replace_all("\n", " ") for c, t in df.schema.items() if t == pl.Utf8)
    note = f"\n_{df.height - max_rows} more rows not shown_\n" if df.height > max_rows else ""
    return to_markdown(clean.head(max_rows), pct_cols=[c for c in PCT_COLUMNS if c in df.columns]) + note
