"""Per-capability verifier error breakdown (the paper's Appendix D and G, Tables A3 and A6).

Conventions, as in the paper. A verdict is True when the criterion is judged met. An
error is a disagreement with the reference (human) verdict, and its two kinds are named
from the point of view of a verifier hunting for UNMET criteria:

* FP: a met criterion the verifier rejected (over-rejection);
* FN: an unmet criterion the verifier passed (a deficient output slips through).

That is the unmet-as-positive reading, the same class the paper's F1 is computed on
("F1 on the unmet class, the minority class"). Rates are shares of ALL n criteria in the
row, not of the met or unmet criteria alone, so fp_rate + fn_rate = error_rate. Table A6
confirms it: Archipelago's FP + FN equals its Table A3 error rate on every row within
rounding (visual presentation 10.5 + 16.1 = 26.6 vs 26.5; data linkage 7.5 + 12.8 =
20.3 vs 20.3; temporal integrity 12.1 + 5.6 = 17.7 vs 17.8), which would not hold for
rates over the met or unmet subsets.

Confidence intervals resample tasks, not criteria: criteria of one task share a rollout,
a rubric author and often one root cause, so their errors are not independent and a
criterion bootstrap would understate the uncertainty.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import polars as pl

from taxonomy.analysis.verdicts import VerdictError
from taxonomy.run import apply_umask

ALL = "ALL"
KEY = ["criterion_id", "system"]
RATES = ["error_rate", "fp_rate", "fn_rate", "accuracy"]


# ---- joining verdicts to capabilities ------------------------------------------------
@dataclass
class JoinReport:
    """What a join kept and dropped; `str()` is the one line to print."""

    reference: str
    n_verdicts: int  # verdicts by verifiers other than the reference
    n_joined: int
    no_reference: int  # no reference verdict on the same criterion and system
    no_tag: int  # criterion has no capability tag
    examples: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.no_reference == 0 and self.no_tag == 0

    def __str__(self) -> str:
        line = (
            f"joined {self.n_joined} of {self.n_verdicts} verifier verdicts to `{self.reference}` and capabilities; "
            f"{self.no_reference} had no `{self.reference}` verdict, {self.no_tag} had no capability tag"
        )
        return line + (f" (e.g. {', '.join(self.examples)})" if self.examples else "")


def capability_frame(tags: pl.DataFrame, criteria: pl.DataFrame | None = None) -> pl.DataFrame:
    """stage3_tags (+ criteria) -> criterion_id, task_id, weight, primary, tags (+ extras).

    Without criteria.parquet the task is the id's prefix (`<task>/<criterion>` for both
    DevAI and PaperBench ids) and every weight is 1.
    """
    if "criterion_id" not in tags.columns or "primary" not in tags.columns:
        raise ValueError(
            f"tags frame has columns {tags.columns}; fix: pass stage3_tags.parquet (criterion_id, tags, primary)"
        )
    frame = tags
    if criteria is not None:
        extra = [c for c in criteria.columns if c not in frame.columns or c == "criterion_id"]
        frame = frame.join(criteria.select(extra), on="criterion_id", how="left")
    if "task_id" not in frame.columns:
        frame = frame.with_columns(task_id=pl.col("criterion_id").str.replace(r"/[^/]*$", ""))
    if "weight" not in frame.columns:
        frame = frame.with_columns(weight=pl.lit(1.0))
    if "tags" not in frame.columns:
        frame = frame.with_columns(tags=pl.concat_list("primary"))
    return frame.with_columns(
        pl.col("task_id").fill_null(pl.col("criterion_id").str.replace(r"/[^/]*$", "")),
        pl.col("weight").cast(pl.Float64).fill_null(1.0),
    )


def join_report(
    tags: pl.DataFrame, verdicts: pl.DataFrame, reference: str = "human", criteria: pl.DataFrame | None = None
) -> JoinReport:
    return _join(tags, verdicts, reference, criteria)[1]


def join_verdicts(
    tags: pl.DataFrame,
    verdicts: pl.DataFrame,
    reference: str = "human",
    criteria: pl.DataFrame | None = None,
    on_missing: str = "warn",
) -> pl.DataFrame:
    """One row per (criterion, system, verifier != reference).

    Columns: criterion_id, task_id, system, verifier, primary, tags, weight, human (the
    reference verdict), verdict (the verifier's), plus any extra columns of `tags` and
    `criteria`. Verdicts lacking a tag or a reference verdict are dropped; `on_missing`
    says whether that is a warning ("warn"), an error ("raise") or silent ("ignore").
    `join_report` gives the counts as data.
    """
    joined, report = _join(tags, verdicts, reference, criteria)
    if not report.complete and on_missing == "raise":
        raise VerdictError(f"{report}; fix: tag every judged criterion and give each a `{reference}` verdict")
    if not report.complete and on_missing == "warn":
        warnings.warn(str(report), stacklevel=2)
    return joined


def _join(tags, verdicts, reference, criteria) -> tuple[pl.DataFrame, JoinReport]:
    dup = ~verdicts.select(pl.struct("criterion_id", "verifier", "system").is_first_distinct()).to_series()
    if dup.any():
        row = verdicts.row(int(dup.arg_max()), named=True)
        raise VerdictError(
            f"--verdicts: a second verdict for {row['criterion_id']} "
            f"by {row['verifier']} on {row['system']}; fix: keep one "
            "verdict per criterion, verifier and system (when two --verdicts sources hold it, drop it from one)"
        )
    verifiers = sorted(set(verdicts["verifier"].unique()))
    if reference not in verifiers or len(verifiers) < 2:
        raise VerdictError(
            f"--verdicts: the verdicts are by {', '.join(f'`{v}`' for v in verifiers) or 'nobody'}; a breakdown needs "
            f"`{reference}` (the reference) and at least one other verifier; fix: repeat --verdicts with the other "
            f"verifier's file (e.g. --verdicts judge=judge.csv), or name the reference with --reference"
        )
    caps = capability_frame(tags, criteria)
    ref = verdicts.filter(pl.col("verifier") == reference).select(*KEY, human="verdict")
    others = verdicts.filter(pl.col("verifier") != reference)
    no_ref = others.join(ref, on=KEY, how="anti")
    no_tag = others.join(caps, on="criterion_id", how="anti")
    joined = others.join(ref, on=KEY).join(caps, on="criterion_id")
    first = ["criterion_id", "task_id", "system", "verifier", "primary", "tags", "weight", "human", "verdict"]
    joined = joined.select(*first, *[c for c in joined.columns if c not in first]).sort(
        "verifier", "system", "criterion_id"
    )
    examples = pl.concat([no_ref["criterion_id"], no_tag["criterion_id"]]).unique(maintain_order=True).head(3).to_list()
    return joined, JoinReport(reference, others.height, joined.height, no_ref.height, no_tag.height, examples)


# ---- metrics ---------------------------------------------------------------------------
def _with_w(frame: pl.DataFrame, weighted: bool) -> pl.DataFrame:
    return frame.with_columns(_w=pl.col("weight").abs() if weighted else pl.lit(1.0))


def _metric_exprs() -> list[pl.Expr]:
    w = pl.col("_w")
    met, passed = pl.col("human"), pl.col("verdict")
    fp, fn, tp = (met & ~passed), (~met & passed), (~met & ~passed)  # tp: unmet caught
    total = w.sum()
    wfp, wfn, wtp = (w * fp).sum(), (w * fn).sum(), (w * tp).sum()
    f1_den = 2 * wtp + wfp + wfn
    return [
        pl.len().alias("n"),
        (~met).sum().alias("n_unmet"),
        fp.sum().alias("fp"),
        fn.sum().alias("fn"),
        total.alias("weight"),
        ((wfp + wfn) / total).alias("error_rate"),
        (wfp / total).alias("fp_rate"),
        (wfn / total).alias("fn_rate"),
        (1 - (wfp + wfn) / total).alias("accuracy"),
        pl.when(f1_den > 0).then(2 * wtp / f1_den).otherwise(None).alias("f1_unmet"),
    ]


def _with_capability(joined: pl.DataFrame, by: str) -> pl.DataFrame:
    if by == "primary":
        return joined.with_columns(capability=pl.col("primary"))
    if by == "any":  # a criterion counts once under each of its tags
        return joined.with_columns(capability=pl.col("tags")).explode("capability")
    if by in joined.columns:  # any per-criterion label, e.g. DevAI's `category`
        return joined.with_columns(capability=pl.col(by).cast(pl.String).fill_null("(none)"))
    raise ValueError(
        f"by={by!r}; fix: use 'primary', 'any' or a column of the joined frame ({', '.join(joined.columns)})"
    )


def capability_breakdown(
    joined: pl.DataFrame,
    by: str = "primary",
    weighted: bool = False,
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
    groups: Sequence[str] = ("verifier",),
    cluster: str = "task_id",
) -> pl.DataFrame:
    """Per (groups..., capability): n, n_unmet, fp, fn (counts), weight, error_rate, fp_rate,
    fn_rate, accuracy, f1_unmet, ci_lo, ci_hi; plus one `ALL` row per group.

    `weighted` weighs each criterion by |weight| (counts stay unweighted). The CI is a
    percentile bootstrap over `cluster` units (tasks by default) drawn with replacement
    within each group; `n_boot=0`, or a capability seen in only one task, leaves it null.
    With by="any" the capability rows overlap, while the ALL row counts each criterion once.
    """
    groups = list(groups)
    joined = _with_w(joined, weighted)
    rows = _with_capability(joined, by)
    per_cap = rows.group_by(*groups, "capability").agg(_metric_exprs())
    overall = _agg(joined, groups, _metric_exprs()).with_columns(capability=pl.lit(ALL))
    out = pl.concat([per_cap, overall.select(per_cap.columns)])
    out = out.join(_bootstrap(rows, joined, groups, n_boot, seed, ci, cluster), on=[*groups, "capability"], how="left")
    return out.sort(
        [*groups, pl.col("capability") == ALL, "n", "capability"],
        descending=[*[False] * len(groups), False, True, False],
    )


def _agg(frame: pl.DataFrame, keys: list[str], exprs: list[pl.Expr]) -> pl.DataFrame:
    return frame.group_by(keys).agg(exprs) if keys else frame.select(exprs)


def _bootstrap(rows, joined, groups, n_boot, seed, ci, cluster) -> pl.DataFrame:
    schema = {
        **{g: joined.schema[g] for g in groups},
        "capability": pl.String,
        "ci_lo": pl.Float64,
        "ci_hi": pl.Float64,
    }
    if n_boot <= 0:
        return pl.DataFrame(schema=schema)
    w = pl.col("_w")
    err = w * (pl.col("human") != pl.col("verdict")).cast(pl.Float64)
    cells = (
        pl.concat(
            [
                rows.select(*groups, "capability", cluster, w=w, e=err),
                joined.select(*groups, pl.lit(ALL).alias("capability"), cluster, w=w, e=err),
            ]
        )
        .group_by(*groups, "capability", cluster)
        .agg(pl.col("w").sum(), pl.col("e").sum())
    )
    lo_q, hi_q = 50 * (1 - ci), 50 * (1 + ci)
    out = []
    for key, part in cells.group_by(groups, maintain_order=True) if groups else [((), cells)]:
        units = part[cluster].unique().sort().to_list()
        caps = part["capability"].unique().sort().to_list()
        col, row = {u: i for i, u in enumerate(units)}, {c: i for i, c in enumerate(caps)}
        W, E = np.zeros((len(caps), len(units))), np.zeros((len(caps), len(units)))
        for c, u, wv, ev in part.select("capability", cluster, "w", "e").iter_rows():
            W[row[c], col[u]], E[row[c], col[u]] = wv, ev
        # A fresh generator per group: verifiers judged on the same tasks get the same draws.
        draws = np.random.default_rng(seed).integers(0, len(units), size=(n_boot, len(units)))
        mult = np.zeros((n_boot, len(units)))
        np.add.at(mult, (np.arange(n_boot)[:, None], draws), 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            rates = (mult @ E.T) / (mult @ W.T)  # a capability absent from a draw gives NaN
        with warnings.catch_warnings():  # all-NaN columns (zero total weight) become NaN quietly
            warnings.simplefilter("ignore", RuntimeWarning)
            lo, hi = np.nanpercentile(rates, [lo_q, hi_q], axis=0)
        lonely = (W > 0).sum(axis=1) < 2  # one task cannot show its own variability: no CI
        lo[lonely], hi[lonely] = np.nan, np.nan
        key = key if isinstance(key, tuple) else (key,)
        out += [
            (*key, c, None if np.isnan(lo[i]) else float(lo[i]), None if np.isnan(hi[i]) else float(hi[i]))
            for c, i in row.items()
        ]
    return pl.DataFrame(out, schema=schema, orient="row")


# ---- paper-style tables ------------------------------------------------------------------
def _extra_groups(breakdown: pl.DataFrame) -> list[str]:
    first_metric = breakdown.columns.index("n")
    return [c for c in breakdown.columns[:first_metric] if c not in ("verifier", "capability")]


def side_by_side(breakdown: pl.DataFrame, metric: str = "error_rate") -> pl.DataFrame:
    """Table A3: capabilities x verifiers of `metric`; `best` names the lowest (ties joined)."""
    keys = [*_extra_groups(breakdown), "capability"]
    verifiers = breakdown["verifier"].unique(maintain_order=True).to_list()
    wide = breakdown.pivot(on="verifier", index=keys, values=metric)
    n = breakdown.group_by(keys).agg(pl.col("n").max())
    best = (
        breakdown.filter(pl.col(metric) <= pl.col(metric).min().over(keys) + 1e-12)
        .group_by(keys)
        .agg(best=pl.col("verifier").sort().str.join(", "))
    )
    out = n.join(wide, on=keys).join(best, on=keys, how="left").select(*keys, "n", *verifiers, "best")
    return out.sort(
        [*keys[:-1], pl.col("capability") == ALL, "n", "capability"],
        descending=[*[False] * (len(keys) - 1), False, True, False],
    )


P2_GROUPS = {True: "native inspection required (P2)", False: "judgment on rendered content", None: "P2 unknown"}


def gap_table(
    breakdown: pl.DataFrame,
    verifier: str,
    include_all: bool = False,
    native_inspection: dict[str, bool | None] | None = None,
) -> pl.DataFrame:
    """Table A6: one verifier's FP and FN rates per capability, FN - FP and FN/FP, sorted by FN - FP,
    largest first. With `native_inspection` (capability -> the taxonomy's P2 attribute) rows are grouped
    as in the paper: capabilities needing native inspection first, then judgment on rendered content,
    then those whose P2 is unknown. FN/FP is empty when FP is zero."""
    if verifier not in breakdown["verifier"].to_list():
        raise ValueError(
            f"no verifier {verifier!r} in the breakdown; fix: use one of {sorted(set(breakdown['verifier']))}"
        )
    rows = breakdown.filter(pl.col("verifier") == verifier)
    if not include_all:
        rows = rows.filter(pl.col("capability") != ALL)
    extra = _extra_groups(breakdown)
    rows = rows.with_columns(
        fn_minus_fp=pl.col("fn_rate") - pl.col("fp_rate"),
        fn_over_fp=pl.when(pl.col("fp_rate") > 0).then(pl.col("fn_rate") / pl.col("fp_rate")).otherwise(None),
    )
    keys = list(extra)
    if native_inspection is not None:
        order = list(P2_GROUPS.values())
        group = [P2_GROUPS[native_inspection.get(c)] for c in rows["capability"].to_list()]
        rows = rows.with_columns(
            p2_group=pl.Series(group, dtype=pl.Utf8), _g=pl.Series([order.index(g) for g in group], dtype=pl.Int64)
        )
        keys = [*extra, "_g"]
    out = rows.sort([*keys, "fn_minus_fp"], descending=[*[False] * len(keys), True], nulls_last=True)
    first = ["p2_group"] if native_inspection is not None else []
    return out.select(*extra, *first, "capability", "n", "fp_rate", "fn_rate", "fn_minus_fp", "fn_over_fp")


def two_corpora(
    a: pl.DataFrame | None,
    b: pl.DataFrame | None,
    names: list[str],
    label_a: str,
    label_b: str,
    metric: str = "error_rate",
    counts: tuple[dict[str, int], dict[str, int]] | None = None,
) -> pl.DataFrame:
    """Tables A3/A5: one row per capability of the shared taxonomy (then ALL), a block of columns per
    corpus: criteria (primary tags, from `counts`), n judged, then `metric` per verifier. A capability
    absent from a corpus has empty cells there; a corpus without verifier verdicts (None) has only
    its criteria column."""
    rows = pl.DataFrame({"capability": [*names, ALL]})
    out = rows
    for i, (frame, label) in enumerate(((a, label_a), (b, label_b))):
        if counts is not None:
            n = counts[i]
            total = sum(n.values())
            crit = pl.DataFrame(
                {"capability": [*names, ALL], f"{label}: criteria": [n.get(c) or None for c in names] + [total]},
                schema={"capability": pl.Utf8, f"{label}: criteria": pl.Int64},
            )
            out = out.join(crit, on="capability", how="left")
        if frame is not None:
            wide = side_by_side(frame, metric).drop("best").rename({"n": "judged"})
            wide = wide.rename({c: f"{label}: {c}" for c in wide.columns if c != "capability"})
            out = out.join(wide.with_columns(pl.col(f"{label}: judged").cast(pl.Int64)), on="capability", how="left")
    return out


def paired_test(joined: pl.DataFrame, a: str, b: str, by: str = "primary") -> pl.DataFrame:
    """Exact McNemar test of verifiers `a` and `b` on the criteria (and systems) both judged.

    Per capability and ALL: n pairs, each verifier's errors and error rate, the discordant
    counts (only_a_wrong, only_b_wrong), the two-sided exact p-value (binomial test on the
    discordant pairs), and a Holm-adjusted p over the capability rows.
    """
    for v in (a, b):
        if v not in joined["verifier"].to_list():
            raise ValueError(
                f"no verifier {v!r} in the joined verdicts; fix: use one of {sorted(set(joined['verifier']))}"
            )
    right = joined.filter(pl.col("verifier") == b).select(*KEY, verdict_b="verdict")
    pairs = joined.filter(pl.col("verifier") == a).join(right, on=KEY)
    a_wrong, b_wrong = pl.col("verdict") != pl.col("human"), pl.col("verdict_b") != pl.col("human")
    agg = [
        pl.len().alias("n"),
        a_wrong.sum().alias("a_errors"),
        b_wrong.sum().alias("b_errors"),
        a_wrong.mean().alias("a_error_rate"),
        b_wrong.mean().alias("b_error_rate"),
        (a_wrong & ~b_wrong).sum().alias("only_a_wrong"),
        (~a_wrong & b_wrong).sum().alias("only_b_wrong"),
    ]
    per_cap = (
        _with_capability(pairs, by).group_by("capability").agg(agg).sort("n", "capability", descending=[True, False])
    )
    out = pl.concat([per_cap, pairs.select(pl.lit(ALL).alias("capability"), *agg)])
    p = [_mcnemar(x, y) for x, y in out.select("only_a_wrong", "only_b_wrong").iter_rows()]
    holm = _holm(p[:-1]) + [None]
    return out.with_columns(pl.Series("p_value", p), pl.Series("p_holm", holm, dtype=pl.Float64)).select(
        pl.lit(a).alias("a"), pl.lit(b).alias("b"), pl.all()
    )


def _mcnemar(only_a: int, only_b: int) -> float:
    from scipy.stats import binomtest  # lazy: scipy.stats takes 1-2 s to import; only a paired test needs it

    k = only_a + only_b
    return 1.0 if k == 0 else float(binomtest(only_a, k, 0.5).pvalue)


def _holm(p: list[float]) -> list[float]:
    order = np.argsort(p)
    adj, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))  # step-down, kept monotone
        adj[i] = running
    return adj


# ---- output ------------------------------------------------------------------------------
_NOT_PCT = ("f1", "p_", "weight", "fn_over_fp")


def to_markdown(df: pl.DataFrame, pct_cols: Sequence[str] | None = None, digits: int = 1) -> str:
    """A GitHub table. `pct_cols` print as percentages with `digits` decimals (by default
    every float column but f1*, p_* and weight); gap columns (`*minus*`) carry a sign."""
    if pct_cols is None:
        pct_cols = [c for c, t in df.schema.items() if t.is_float() and not c.startswith(_NOT_PCT)]
    pct = set(pct_cols)

    def cell(col: str, v) -> str:
        if v is None or (isinstance(v, float) and np.isnan(v)):
            return "–"
        if isinstance(v, list):
            return ", ".join(map(str, v))
        if col in pct:
            return f"{100 * v:+.{digits}f}" if "minus" in col else f"{100 * v:.{digits}f}"
        if isinstance(v, float):
            return f"{v:.3g}" if col.startswith("p_") else f"{v:.3f}"
        return str(v).replace("|", "\\|")

    lines = ["| " + " | ".join(df.columns) + " |", "|" + "|".join("---" for _ in df.columns) + "|"]
    lines += ["| " + " | ".join(cell(c, v) for c, v in zip(df.columns, row)) + " |" for row in df.iter_rows()]
    return "\n".join(lines) + "\n"


def write_csv(df: pl.DataFrame, path: str | Path) -> Path:
    """Write `df` as CSV atomically; list columns become `;`-joined strings."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lists = [c for c, t in df.schema.items() if isinstance(t, pl.List)]
    flat = df.with_columns(pl.col(c).cast(pl.List(pl.String)).list.join(";") for c in lists)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        flat.write_csv(tmp)
        apply_umask(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
