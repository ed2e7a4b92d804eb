"""One self-contained HTML page per run: tables, inline SVG charts, and the criteria themselves.

The page must open offline years from now, so nothing is linked: CSS and a little JS live in
the template, charts are inline <svg>, and the criteria table's data is inline JSON. The label
map is drawn here rather than by matplotlib so each point carries its own <title> (hover text).
Every artifact except criteria.parquet and taxonomy.json may be missing; its
section then says "not computed" instead of failing the whole report.
"""

from __future__ import annotations

import io
import json
import os
import re
import tempfile
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import jinja2
import matplotlib
import matplotlib.colors
import matplotlib.ticker
import numpy as np
import polars as pl
from markdown_it import MarkdownIt
from markupsafe import Markup
from matplotlib.figure import Figure
from sklearn.decomposition import PCA
from sklearn.manifold import MDS

from taxonomy.analysis import report_criteria as rc
from taxonomy.analysis.audit import capability_shares, join_tags, task_capability_matrix
from taxonomy.guidance.principles import WORD
from taxonomy.lint import report_section
from taxonomy.run import (
    CLUSTERS,
    CRITERIA,
    LABELS,
    LABEL_EMBEDDINGS,
    MANIFEST,
    MICRO,
    REPORT,
    STABILITY,
    TAGS,
    TAXONOMY,
    RunDir,
    apply_umask,
    stale_uses,
)
from taxonomy.schemas import DISSOLVED, STABLE, STATED, Taxonomy
from taxonomy.stages.stability import tags_partition_hash
from taxonomy.taxonomy_io import stability_note

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
MAX_HEATMAP_TASKS = 60
MDS_MAX_POINTS = 400  # up to this many labels the map is an MDS layout (under a second), beyond it PCA
MAX_MAP_POINTS = 4000  # the label map keeps the most frequent labels beyond this (one <circle> + <title> each)
UNMAPPED = "(unmapped)"
STAGE_FIELDS = ("seconds", "calls", "cache_hits", "prompt_tokens", "output_tokens", "cost_usd")
# the paper's P2/P3 (P1 applies to all)
PRINCIPLES = {"p2": "needs_native_inspection", "p3": "needs_domain_conventions"}


def render_report(run_dir: Path, out: Path | None = None, diff_markdown: str | None = None) -> Path:
    """`diff_markdown` (from `taxonomy diff`) adds a section comparing this run with another."""
    run_dir = Path(run_dir)
    out = Path(out) if out is not None else run_dir / REPORT
    context = build_context(run_dir)
    context["diff"] = _diff_section(diff_markdown)
    html = _environment().get_template("report.html.j2").render(**context)
    _write_atomic(out, html)
    return out


def build_context(run_dir: Path) -> dict[str, Any]:
    stale = stale_uses(RunDir(run_dir))  # sections made with another taxonomy are left out, never shown as current
    criteria = pl.read_parquet(run_dir / CRITERIA)
    raw_taxonomy = json.loads((run_dir / TAXONOMY).read_text(encoding="utf-8"))
    known = set(Taxonomy.model_fields)  # fields other stages add (e.g. recorded violations) are read raw
    taxonomy = Taxonomy.model_validate({k: v for k, v in raw_taxonomy.items() if k in known})
    manifest = _read_json(run_dir / MANIFEST) or {}
    tags = _read_parquet(run_dir / TAGS)
    joined = join_tags(criteria, tags) if tags is not None else None
    names = taxonomy.names()
    colors = _capability_colors(names)
    micro = _read_json(run_dir / MICRO) or []
    clusters = _read_parquet(run_dir / CLUSTERS)
    embeddings = np.load(run_dir / LABEL_EMBEDDINGS) if (run_dir / LABEL_EMBEDDINGS).is_file() else None
    stage1 = _read_parquet(run_dir / LABELS)
    label_micro, label_caps = (
        rc.label_capabilities(clusters["cluster_id"].to_list(), micro, taxonomy, UNMAPPED)
        if clusters is not None
        else (None, None)
    )
    table = rc.tagged(criteria, tags)
    fit = rc.fit_matrix(criteria, stage1, clusters, embeddings, label_caps, names)
    primary = _primary_shares(taxonomy, joined)
    return {
        "header": _header(manifest, taxonomy, criteria),
        "taxonomy_rows": _taxonomy_rows(taxonomy, joined),
        "stability": _stability(taxonomy, tags, _read_parquet(run_dir / STABILITY), criteria),
        "has_stage3": joined is not None,
        "shares_svg": _shares_chart(taxonomy, joined),
        "examples": rc.capability_examples(table, fit, names) if tags is not None else None,
        "colors": colors,
        "principles": _principles(taxonomy),
        "shared_reasons": _shared_reasons(taxonomy),
        "criteria_json": Markup(
            rc.json_for_script(
                {
                    **rc.criteria_blob(table, names),
                    "colors": [colors[n] for n in names],
                    **{k: [getattr(c, f) for c in taxonomy.capabilities] for k, f in PRINCIPLES.items()},
                }
            )
        ),
        "n_criteria": table.height,
        "tasks": table["task_id"].unique(maintain_order=True).cast(pl.Utf8).to_list(),
        "label_map": _label_map(clusters, embeddings, label_micro, label_caps, micro, colors),
        "hierarchy": _hierarchy(taxonomy, micro, primary),
        "confidence": rc.low_confidence(table, fit, names, rc.none_threshold(manifest)) if tags is not None else None,
        "stage1_failures": rc.stage1_failures(stage1, criteria),
        "constraints": rc.constraint_status(taxonomy, raw_taxonomy, manifest, primary),
        "heatmap": _heatmap(joined, names) if joined is not None else None,
        "breakdown": _absent(stale["breakdown"]) if "breakdown" in stale else _breakdown(run_dir),
        "cost": _cost(manifest),
        "failures": _failures(run_dir, criteria.height),
        "lint": report_section(criteria, tags),  # the rubric's own defects, beside the criteria they are about
        "diff": None,
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


# ---- reading artifacts --------------------------------------------------------------
def _read_parquet(path: Path) -> pl.DataFrame | None:
    return pl.read_parquet(path) if path.is_file() else None


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


# ---- sections -----------------------------------------------------------------------
def _header(manifest: dict, taxonomy: Taxonomy, criteria: pl.DataFrame) -> dict[str, Any]:
    return {
        "pipeline": manifest.get("pipeline") or taxonomy.corpus or "unknown pipeline",
        "backend": manifest.get("backend", "not recorded"),
        "model": manifest.get("model", "not recorded"),
        "created": _date(manifest.get("created")),
        "version": taxonomy.version,
        "content_hash": taxonomy.content_hash or "no hash",
        "corpus": taxonomy.corpus,
        "n_criteria": criteria.height,
        "n_tasks": criteria["task_id"].n_unique(),
        "n_capabilities": len(taxonomy.capabilities),
    }


def _date(value: str | None) -> str:
    if not value:
        return "not recorded"
    try:
        return datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return value


def _primary_shares(taxonomy: Taxonomy, joined: pl.DataFrame | None) -> dict[str, float]:
    if joined is None:
        return {}
    shares = capability_shares(joined, taxonomy.names())
    return dict(zip(shares["capability"], shares["share"]))


def _taxonomy_rows(taxonomy: Taxonomy, joined: pl.DataFrame | None) -> list[dict[str, Any]]:
    primary = _primary_shares(taxonomy, joined)
    return [
        {
            "name": c.name,
            "title": c.title,
            "checks": c.checks,
            "stated": STATED,
            "description": c.description,
            "signal": c.diagnostic_signal,
            "share": c.share,
            "primary_share": primary.get(c.name),
            "members": c.members,
            **{k: {"value": WORD[getattr(c, f)], "reason": getattr(c, f"{f}_reason")} for k, f in PRINCIPLES.items()},
        }
        # largest first, by the share the table shows (Stage 3's where tagged), as taxonomy.md and the summary
        for c in sorted(taxonomy.capabilities, key=lambda c: -(primary.get(c.name, 0.0) if primary else c.share))
    ]


def _stability(
    taxonomy: Taxonomy, tags: pl.DataFrame | None, agreement: pl.DataFrame | None, criteria: pl.DataFrame
) -> dict[str, Any] | None:
    """Each capability's stability figure, the note that says how to read it, and the criteria least sure of their
    primary tag; None unless the figures were computed for this taxonomy's membership and these tags (a figure of
    another taxonomy is never shown as this one's)."""
    figures = taxonomy.stability_figures()
    if figures is None or tags is None or taxonomy.stability.tags != tags_partition_hash(tags):
        return None
    words = {n: _stability_word(v) for n, v in figures.items()}
    out = {"note": stability_note(taxonomy), "figures": figures, "words": words, "unsure": [], "n_unsure": 0}
    if agreement is not None:
        placed = agreement.filter(pl.col("agreement").is_not_null())
        unsure = (
            placed.filter(pl.col("agreement") < 0.5)
            .join(tags.select("criterion_id", "primary"), on="criterion_id")
            .join(criteria.select("criterion_id", "task_id", "text"), on="criterion_id")
            .sort("agreement", "criterion_id")
        )
        out.update(n_placed=placed.height, n_unsure=unsure.height, unsure=unsure.head(10).to_dicts())
    return out


def _stability_word(value: float | None) -> str:
    return "" if value is None else "stable" if value >= STABLE else "dissolved" if value < DISSOLVED else "unsure"


def _principles(taxonomy: Taxonomy) -> dict[str, dict[str, list[str]]]:
    """P2/P3 → {"yes": [capabilities], "no": [...], "unknown": [...]}, for the section's summary line."""
    return {
        k: {w: [c.name for c in taxonomy.capabilities if WORD[getattr(c, f)] == w] for w in WORD.values()}
        for k, f in PRINCIPLES.items()
    }


def _shared_reasons(taxonomy: Taxonomy) -> dict[str, str | None]:
    """P2/P3 → the reason every capability gives alike (said once above the table, not in each row), else None."""
    out = {}
    for k, f in PRINCIPLES.items():
        reasons = {getattr(c, f"{f}_reason") for c in taxonomy.capabilities}
        out[k] = reasons.pop() if len(reasons) == 1 and len(taxonomy.capabilities) > 1 else None
    return out


def _label_map(
    clusters: pl.DataFrame | None,
    emb: np.ndarray | None,
    label_micro: list[str] | None,
    label_caps: list[str] | None,
    micro: list[dict],
    colors: dict[str, str],
) -> dict[str, Any]:
    if clusters is None or emb is None:
        return _absent("clusters.parquet or label_embeddings.npy is absent")
    if emb.ndim != 2 or emb.shape[0] != clusters.height or emb.shape[0] < 3:
        return _absent(f"label_embeddings.npy has shape {emb.shape}; clusters.parquet has {clusters.height} rows")
    freq = clusters["frequency"].to_numpy() if "frequency" in clusters.columns else np.ones(clusters.height)
    keep = np.argsort(-freq, kind="stable")[:MAX_MAP_POINTS]
    xy = _project_2d(emb)
    notes = [] if micro else ["micro_capabilities.json is absent, so no label is mapped to a capability."]
    if clusters.height > MAX_MAP_POINTS:
        notes.append(f"Showing the {MAX_MAP_POINTS:,} most frequent of {clusters.height:,} labels.")
    labels = clusters["label"].to_list()
    points = [(xy[i, 0], xy[i, 1], labels[i], label_micro[i], label_caps[i], int(freq[i])) for i in sorted(keep)]
    counts = {c: label_caps.count(c) for c in dict.fromkeys(label_caps)}
    legend = [{"name": c, "color": colors.get(c, colors[UNMAPPED]), "n": counts[c]} for c in colors if c in counts]
    method = "metric MDS" if len(emb) <= MDS_MAX_POINTS else "first two principal components"
    return {
        "missing": None,
        "svg": _label_map_svg(points, colors),
        "n": clusters.height,
        "note": " ".join(notes),
        "legend": legend,
        "method": method,
    }


def _label_map_svg(points: list[tuple], colors: dict[str, str]) -> Markup:
    """One <circle> per label with a <title> (label, micro-cluster, capability) the browser shows on hover."""
    w, h, pad = 880, 540, 24
    xs = np.array([p[0] for p in points])
    ys = np.array([p[1] for p in points])
    span = lambda v: (v.min(), max(v.max() - v.min(), 1e-9))  # noqa: E731
    (x0, dx), (y0, dy) = span(xs), span(ys)
    big = len(points) < 500
    parts = [
        '<svg xmlns="http://www.w3.org/2000/svg" role="img" '
        f'class="label-map" viewBox="0 0 {w} {h}" width="{w}" height="{h}">',
        f'<rect x="0" y="0" width="{w}" height="{h}" fill="#fbfbfd" stroke="#d1d9e0"/>',
    ]
    # Frequent labels first so the rare ones are drawn on top and stay reachable by the pointer.
    for x, y, label, micro, cap, f in sorted(points, key=lambda p: -p[5]):
        cx = pad + (x - x0) / dx * (w - 2 * pad)
        cy = h - pad - (y - y0) / dy * (h - 2 * pad)
        r = (4 if big else 2) * (1 + np.log10(max(f, 1)))
        times = "once" if f == 1 else f"{f:,} times"
        title = f"{label}\nmicro-cluster: {micro}\ncapability: {cap}\ngiven {times}"
        parts.append(
            f'<circle class="pt" cx="{cx:.1f}" cy="{cy:.1f}" r="{r:.1f}" fill="{colors.get(cap, colors[UNMAPPED])}">'
            f"<title>{Markup.escape(title)}</title></circle>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def _hierarchy(taxonomy: Taxonomy, micro: list[dict], primary: dict[str, float]) -> list[dict[str, Any]]:
    """capability → its micro-clusters → their labels, for the tree view."""
    by_name = {m.get("name"): m for m in micro}
    tree = []
    for c in taxonomy.capabilities:
        kids = []
        for name in c.members:
            m = by_name.get(name, {})
            kids.append(
                {
                    "name": name,
                    "n": m.get("n_criteria"),
                    "share": m.get("share"),
                    "description": m.get("description", ""),
                    "labels": m.get("member_labels") or [],
                }
            )
        kids.sort(key=lambda k: -(k["n"] or 0))
        tree.append({"name": c.name, "share": c.share, "primary": primary.get(c.name), "children": kids})
    return tree


def _diff_section(markdown: str | None) -> Markup | None:
    if not markdown:
        return None
    # The section has its own <h2>: the diff's title goes, its sections become <h3>.
    body = re.sub(
        r"^(#+) ", lambda m: "#" * (len(m.group(1)) + 1) + " ", re.sub(r"\A# [^\n]*\n", "", markdown), flags=re.M
    )
    # The diff is our own markdown, but it quotes criteria and names: no raw HTML passes.
    return Markup(MarkdownIt("commonmark", {"html": False}).enable("table").render(body))


def _project_2d(emb: np.ndarray) -> np.ndarray:
    """Two coordinates per label. A few hundred labels get metric MDS on the unit vectors, which
    keeps distinct labels apart (two principal components of sparse TF-IDF labels pile most of
    them on one spot); more labels get PCA, whose cost stays linear."""
    emb = np.asarray(emb, dtype=np.float64)
    if emb.shape[1] < 2:
        return np.column_stack([emb[:, 0], np.zeros(len(emb))])
    if len(emb) <= MDS_MAX_POINTS:
        unit = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
        # scikit-learn warns of changing MDS defaults, and that a square input is read as samples
        # (it is: n labels of n dimensions can happen); the layout is seeded either way.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return MDS(n_components=2, n_init=1, max_iter=300, random_state=0).fit_transform(unit)
    # PCA centres the cloud, which TruncatedSVD does not.
    return PCA(n_components=2, random_state=0).fit_transform(emb)


def _heatmap(joined: pl.DataFrame, names: list[str]) -> dict[str, Any]:
    matrix = task_capability_matrix(joined, names)
    n_tasks = matrix.height
    # Keep the tasks with the most tagged criteria: they carry most of the picture.
    totals = matrix.select(pl.sum_horizontal(names).alias("_total")) if names else None
    if n_tasks > MAX_HEATMAP_TASKS and totals is not None:
        order = np.argsort(-totals["_total"].to_numpy(), kind="stable")[:MAX_HEATMAP_TASKS]
        matrix = matrix[sorted(order.tolist())]
    note = (
        f"Showing the {MAX_HEATMAP_TASKS} tasks with the most criteria, of {n_tasks}."
        if n_tasks > MAX_HEATMAP_TASKS
        else ""
    )
    return {"svg": _heatmap_chart(matrix, names), "note": note, "n_tasks": n_tasks}


def _breakdown(run_dir: Path) -> dict[str, Any]:
    folder = run_dir / "breakdown"
    if not folder.is_dir():
        return _absent(
            "no verifier verdicts given yet. To see where each verifier errs, capability by capability, run "
            f"`taxonomy breakdown {run_dir} --verdicts FILE` with a CSV, JSONL or Parquet of criterion_id, verifier "
            "and verdict (human verdicts as verifier `human`), or `--verdicts devai:PATH` / `paperbench:PATH`, "
            "then `taxonomy report` again"
        )
    main = folder / "breakdown.csv"
    frame = pl.read_csv(main) if main.is_file() else None
    gaps = [
        {"verifier": p.stem.removeprefix("gap_"), "table": _table(pl.read_csv(p))}
        for p in sorted(folder.glob("gap_*.csv"))
    ]
    if frame is None and not gaps:
        return _absent("breakdown/ holds neither breakdown.csv nor gap_*.csv")
    has_rates = frame is not None and {"verifier", "capability", "fp_rate", "fn_rate"} <= set(frame.columns)
    return {
        "missing": None,
        "table": _table(frame) if frame is not None else None,
        "svg": _fp_fn_chart(frame) if has_rates and frame.height else None,
        "gaps": gaps,
    }


def _cost(manifest: dict) -> dict[str, Any]:
    stages = manifest.get("stages") or {}
    if not stages:
        return _absent("manifest.json is absent or records no stages")
    rows = [{"stage": name, **{f: (s or {}).get(f) for f in STAGE_FIELDS}} for name, s in stages.items()]
    total = {"stage": "total", **{f: sum(r[f] or 0 for r in rows) for f in STAGE_FIELDS}}
    return {"missing": None, "rows": rows, "total": total}


def _failures(run_dir: Path, n_criteria: int) -> list[dict[str, Any]]:
    out = []
    for stage, file in (("Stage 1 (discover)", LABELS), ("Stage 3 (tag)", TAGS)):
        df = _read_parquet(run_dir / file)
        if df is None:
            out.append({"stage": stage, "missing": True})
            continue
        failed = int((df["status"] != "ok").sum()) if "status" in df.columns else 0
        reasked = int((df["attempts"] > 1).sum()) if "attempts" in df.columns else None
        out.append(
            {
                "stage": stage,
                "missing": False,
                "rows": df.height,
                "failed": failed,
                "reasked": reasked,
                "absent": max(n_criteria - df.height, 0),
            }
        )
    return out


def _absent(reason: str) -> dict[str, Any]:
    """A section that could not be drawn; the template prints "not computed" and the reason."""
    return {
        "missing": reason,
        "svg": None,
        "note": "",
        "n": 0,
        "table": None,
        "gaps": [],
        "rows": [],
        "total": None,
        "legend": [],
        "method": "",
    }


def _table(df: pl.DataFrame) -> dict[str, Any]:
    """Columns and pre-formatted cells, so the template stays free of number logic."""
    numeric = [dt.is_numeric() for dt in df.dtypes]
    rows = [[(_fmt(v), num) for v, num in zip(row, numeric)] for row in df.iter_rows()]
    return {"columns": list(zip(df.columns, numeric)), "rows": rows}


def _fmt(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return "nan" if v != v else f"{v:.3f}"
    return str(v)


# ---- charts -------------------------------------------------------------------------
def _capability_colors(names: list[str]) -> dict[str, str]:
    cmap = matplotlib.colormaps["tab10" if len(names) <= 10 else "tab20"]
    colors = {n: matplotlib.colors.to_hex(cmap(i % cmap.N)) for i, n in enumerate(names)}
    colors[UNMAPPED] = "#b0b0b0"
    return colors


def _style() -> dict[str, Any]:
    # Text stays <text> (small, selectable) and never goes through mathtext, so a "$" in
    # a task id is printed as is.
    return {
        "svg.fonttype": "none",
        "text.parse_math": False,
        "font.size": 9,
        "axes.spines.top": False,
        "axes.spines.right": False,
    }


def _svg(fig: Figure, salt: str) -> Markup:
    """The figure as a bare <svg> element fit for inlining in HTML."""
    buf = io.StringIO()
    # A per-figure salt keeps clip-path / marker ids unique across the inline SVGs.
    with matplotlib.rc_context({**_style(), "svg.hashsalt": salt}):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    referenced = set(re.findall(r"#([\w.-]+)", text))
    # matplotlib names every group (figure_1, axes_1, ...); repeated across charts these
    # would be duplicate ids in one page. Keep only the ids something points to.
    text = re.sub(r'\sid="([^"]+)"', lambda m: m.group(0) if m.group(1) in referenced else "", text)
    text = text.replace("<svg ", '<svg role="img" ', 1)
    return Markup(text)


def _shares_chart(taxonomy: Taxonomy, joined: pl.DataFrame | None) -> Markup:
    names = taxonomy.names()
    primary = _primary_shares(taxonomy, joined)
    y = np.arange(len(names))
    with matplotlib.rc_context(_style()):
        fig = Figure(figsize=(8, 0.45 * len(names) + 1.2))
        ax = fig.add_subplot()
        h = 0.4 if primary else 0.7
        ax.barh(
            y - (h / 2 if primary else 0),
            [c.share for c in taxonomy.capabilities],
            h,
            label="share in taxonomy (dominant micro-cluster)",
            color="#4c72b0",
        )
        if primary:
            ax.barh(
                y + h / 2,
                [primary.get(n, 0.0) for n in names],
                h,
                label="share as primary tag (Stage 3)",
                color="#dd8452",
            )
        ax.set_yticks(y, names)
        ax.invert_yaxis()
        ax.xaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
        ax.set_xlabel("share of criteria")
        ax.legend(loc="lower right", frameon=False)
    return _svg(fig, "shares")


def _heatmap_chart(matrix: pl.DataFrame, names: list[str]) -> Markup:
    values = matrix.select(names).to_numpy() if names else np.zeros((matrix.height, 0))
    tasks = [_short(str(t), 48) for t in matrix["task_id"].to_list()]
    with matplotlib.rc_context(_style()):
        fig = Figure(figsize=(max(6, 0.55 * len(names) + 4), 0.22 * len(tasks) + 2.2))
        ax = fig.add_subplot()
        im = ax.imshow(values, aspect="auto", cmap="Blues", interpolation="nearest")
        ax.set_xticks(np.arange(len(names)), names, rotation=40, ha="right")
        ax.set_yticks(np.arange(len(tasks)), tasks, fontsize=7)
        if values.size <= 600:
            limit = values.max() * 0.6 if values.size else 0
            for (i, j), v in np.ndenumerate(values):
                if v:
                    ax.text(
                        j, i, str(int(v)), ha="center", va="center", fontsize=7, color="white" if v > limit else "#222"
                    )
        bar = fig.colorbar(im, ax=ax, label="criteria (primary tag)", shrink=0.6)
        bar.locator = matplotlib.ticker.MaxNLocator(integer=True)
        bar.update_ticks()
    return _svg(fig, "heatmap")


def _fp_fn_chart(frame: pl.DataFrame) -> Markup:
    # One panel per verifier, or per (verifier, extra group) when the breakdown was
    # grouped further: every column before the metrics except `capability` keys a panel.
    metrics_at = frame.columns.index("n") if "n" in frame.columns else len(frame.columns)
    keys = [c for c in frame.columns[:metrics_at] if c != "capability"] or ["verifier"]
    panels = frame.select(keys).unique(maintain_order=True).rows()
    caps = frame["capability"].unique(maintain_order=True).to_list()
    with matplotlib.rc_context(_style()):
        fig = Figure(figsize=(max(7, 0.7 * len(caps) + 2), 3.0 * len(panels)))
        axes = fig.subplots(len(panels), 1, squeeze=False, sharex=True)[:, 0]
        x = np.arange(len(caps))
        for ax, panel in zip(axes, panels):
            sub = frame.filter(pl.all_horizontal([pl.col(k).eq_missing(v) for k, v in zip(keys, panel)]))
            rates = {c: (fp, fn) for c, fp, fn in sub.select("capability", "fp_rate", "fn_rate").iter_rows()}
            fp = [_nz(rates.get(c, (None, None))[0]) for c in caps]
            fn = [_nz(rates.get(c, (None, None))[1]) for c in caps]
            ax.bar(x - 0.2, fp, 0.4, label="false positive rate", color="#c44e52")
            ax.bar(x + 0.2, fn, 0.4, label="false negative rate", color="#8172b3")
            ax.set_title(" · ".join(f"{k}: {v}" for k, v in zip(keys, panel)), loc="left", fontsize=9)
            ax.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
        axes[0].legend(loc="upper right", frameon=False, ncols=2)
        axes[-1].set_xticks(x, caps, rotation=40, ha="right")
    return _svg(fig, "breakdown")


def _nz(v: float | None) -> float:
    return 0.0 if v is None or v != v else float(v)


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


# ---- template -----------------------------------------------------------------------
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,  # every string from a corpus or an LLM is untrusted text
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["pct"] = lambda v, d=1: "—" if v is None else f"{100 * v:.{d}f}%"
    env.filters["num"] = lambda v: "—" if v is None else (f"{v:,.2f}" if isinstance(v, float) else f"{v:,}")
    env.filters["breakable"] = _breakable
    env.filters["ticks"] = _ticks
    env.filters["weight"] = lambda v: "—" if v is None else f"{v:.4g}"
    env.filters["usd"] = lambda v: "—" if v is None else f"${v:,.4f}"
    return env


def _breakable(name: str) -> Markup:
    """snake_case names may wrap after an underscore instead of mid-word."""
    return Markup("_<wbr>").join(Markup.escape(part) for part in str(name).split("_"))


def _ticks(text: str) -> Markup:
    """`name` in notes written for markdown becomes <code>name</code>; everything else is escaped."""
    return Markup(
        re.sub(r"`([^`]+)`", lambda m: f"<code>{'_<wbr>'.join(m[1].split('_'))}</code>", str(Markup.escape(text)))
    )


_GENERATED = re.compile(r"<footer>Generated [^<]* by ")


def _write_atomic(path: Path, text: str) -> None:
    if path.is_file() and _GENERATED.sub("", path.read_text("utf-8", "replace")) == _GENERATED.sub("", text):
        return  # the same page but its time: a finished run re-run in a folder the user cannot write must not fail
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        apply_umask(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
