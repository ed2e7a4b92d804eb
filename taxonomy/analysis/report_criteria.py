"""Criterion-level pieces of the report: how well each criterion fits each capability,
the most central and the borderline criteria per capability, the searchable table's data,
the criteria the run is least sure of, and the constraint status.

Fit is measured in the run's own label-embedding space, so it works for every backend:
a criterion's vector is the mean of its Stage-1 label embeddings, a capability's the
frequency-weighted mean of the labels its micro-clusters hold. Without embeddings the
Stage-3 score (offline tagger) or the tag order stands in.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import polars as pl

from taxonomy.config import AuditConfig, MergeConfig
from taxonomy.merge.bounds import recorded_bounds
from taxonomy.schemas import Taxonomy

N_CENTRAL = 5
N_BORDERLINE = 3
N_LOW_CONFIDENCE = 40
MAX_LISTED = 200  # failures and "none of the above" rows listed in full up to this many


def label_capabilities(
    cluster_ids: list[int], micro: list[dict], taxonomy: Taxonomy, unmapped: str
) -> tuple[list[str], list[str]]:
    """Per label (clusters.parquet row): its micro-capability name and the capability holding it."""
    cap_of_member = {m: c.name for c in taxonomy.capabilities for m in c.members}
    micro_of_cluster = {m.get("cluster_id"): m.get("name", "") for m in micro}
    micros = [micro_of_cluster.get(cid, f"cluster {cid}") for cid in cluster_ids]
    return micros, [cap_of_member.get(m, unmapped) for m in micros]


def fit_matrix(
    criteria: pl.DataFrame,
    stage1: pl.DataFrame | None,
    clusters: pl.DataFrame | None,
    embeddings: np.ndarray | None,
    label_caps: list[str] | None,
    names: list[str],
) -> np.ndarray | None:
    """criteria × capabilities cosine similarity; a row is NaN where a criterion has no embedded label."""
    if stage1 is None or clusters is None or embeddings is None or label_caps is None or not names:
        return None
    if embeddings.ndim != 2 or embeddings.shape[0] != clusters.height:
        return None
    unit = embeddings / np.maximum(np.linalg.norm(embeddings, axis=1, keepdims=True), 1e-12)
    freq = clusters["frequency"].to_numpy().astype(float) if "frequency" in clusters.columns else np.ones(len(unit))
    col = {n: j for j, n in enumerate(names)}
    centroids = np.zeros((len(names), unit.shape[1]))
    for i, cap in enumerate(label_caps):
        if cap in col:
            centroids[col[cap]] += max(freq[i], 1.0) * unit[i]
    centroids /= np.maximum(np.linalg.norm(centroids, axis=1, keepdims=True), 1e-12)
    row_of_label = {label: i for i, label in enumerate(clusters["label"].to_list())}
    labels_of = dict(zip(stage1["criterion_id"].to_list(), stage1["labels"].to_list()))
    vectors = np.full((criteria.height, unit.shape[1]), np.nan)
    for r, cid in enumerate(criteria["criterion_id"].to_list()):
        rows = [row_of_label[lab] for lab in (labels_of.get(cid) or []) if lab in row_of_label]
        if rows:
            v = unit[rows].mean(axis=0)
            vectors[r] = v / max(np.linalg.norm(v), 1e-12)
    return vectors @ centroids.T


def tagged(criteria: pl.DataFrame, tags: pl.DataFrame | None) -> pl.DataFrame:
    """Criteria in corpus order with tags (empty list when untagged), primary, score and status."""
    base = criteria.select("criterion_id", "task_id", "text", *(["weight"] if "weight" in criteria.columns else []))
    if "weight" not in base.columns:
        base = base.with_columns(weight=pl.lit(None, dtype=pl.Float64))
    if tags is None:
        return base.with_columns(
            tags=pl.lit([], dtype=pl.List(pl.Utf8)),
            primary=pl.lit(None, dtype=pl.Utf8),
            score=pl.lit(None, dtype=pl.Float64),
            status=pl.lit("absent"),
        )
    keep = tags.select(
        "criterion_id",
        "tags",
        "primary",
        pl.col("score").cast(pl.Float64) if "score" in tags.columns else pl.lit(None, dtype=pl.Float64).alias("score"),
        pl.col("status") if "status" in tags.columns else pl.lit("ok").alias("status"),
    )
    out = base.join(keep, on="criterion_id", how="left", maintain_order="left")
    return out.with_columns(
        pl.col("tags").fill_null(pl.lit([], dtype=pl.List(pl.Utf8))), pl.col("status").fill_null("absent")
    )


def _row(r: dict, rank: int | None, other: str | None = None) -> dict[str, Any]:
    return {
        "criterion_id": r["criterion_id"],
        "text": r["text"],
        "task": r["task_id"],
        "weight": r["weight"],
        "rank": rank,
        "other": other,
    }


def _varied(order: list, rows: list[dict], n: int, key=lambda o: o) -> list:
    """The first n of `order`, preferring tasks and texts not shown yet: templated rubrics repeat
    one sentence many times, and ties in fit otherwise all come from the first task."""
    picked, tasks, texts = [], set(), set()
    for strict in (True, False):
        for o in order:
            if len(picked) == n:
                return picked
            r = rows[key(o)]
            gist = " ".join((r["text"] or "").lower().split()[:8])
            if o in picked or gist in texts or (strict and r["task_id"] in tasks):
                continue
            picked.append(o)
            tasks.add(r["task_id"])
            texts.add(gist)
    return picked


def capability_examples(table: pl.DataFrame, fit: np.ndarray | None, names: list[str]) -> dict[str, dict[str, Any]]:
    """Per capability: its most central criteria (primary tag, nearest its centroid) and borderline
    ones (tagged with it at any rank, almost as near another capability)."""
    rows = table.to_dicts()
    out = {}
    for j, name in enumerate(names):
        holders = [(i, r["tags"].index(name) + 1) for i, r in enumerate(rows) if name in r["tags"]]
        primary = [i for i, rank in holders if rank == 1]
        if fit is not None:

            def closeness(i: int) -> float:
                v = fit[i, j]
                return -np.inf if np.isnan(v) else float(v)

            central = _varied(sorted(primary, key=lambda i: (-closeness(i), i)), rows, N_CENTRAL)
            border = []
            for i, rank in holders:
                if i in central or np.isnan(fit[i]).all():
                    continue
                others = [(fit[i, k], names[k]) for k in range(len(names)) if k != j]
                best_other = max(others) if others else (-np.inf, None)
                border.append((abs(fit[i, j] - best_other[0]), i, rank, best_other[1]))
            border.sort(key=lambda b: (b[0], b[1]))
            how = "nearest the capability's centroid in label-embedding space"
        else:
            score = lambda i: rows[i]["score"] if rows[i]["score"] is not None else 0.0  # noqa: E731
            central = _varied(sorted(primary, key=lambda i: (-score(i), i)), rows, N_CENTRAL)
            border = sorted(
                ((score(i) if rank == 1 else 1 + rank, i, rank, None) for i, rank in holders if i not in central),
                key=lambda b: (-b[2], b[0], b[1]),
            )
            how = (
                "highest Stage-3 score"
                if table["score"].drop_nulls().len()
                else "first in corpus order (no embeddings or scores)"
            )
        rank_of = dict(holders)
        out[name] = {
            "n_primary": len(primary),
            "n_tagged": len(holders),
            "how": how,
            "central": [_row(rows[i], rank_of[i]) for i in central],
            "borderline": [
                _row(rows[i], rank, other)
                for _, i, rank, other in _varied(border, rows, N_BORDERLINE, key=lambda b: b[1])
            ],
        }
    return out


def criteria_blob(table: pl.DataFrame, names: list[str]) -> dict[str, Any]:
    """The searchable table's data, compact: tasks and capabilities by index."""
    tasks = table["task_id"].unique(maintain_order=True).to_list()
    task_idx = {t: i for i, t in enumerate(tasks)}
    cap_idx = {n: i for i, n in enumerate(names)}
    rows = []
    for r in table.iter_rows(named=True):
        w = r["weight"]
        rows.append(
            [
                r["criterion_id"],
                task_idx[r["task_id"]],
                r["text"] or "",
                None if w is None else float(f"{w:.4g}"),
                [cap_idx[t] for t in r["tags"] if t in cap_idx],
                None if r["score"] is None else round(r["score"], 3),
            ]
        )
    return {"caps": names, "tasks": [str(t) for t in tasks], "rows": rows}


def json_for_script(value: Any) -> str:
    """JSON safe inside <script type="application/json">: no `<`, `>` or `&` can end the element."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def low_confidence(
    table: pl.DataFrame, fit: np.ndarray | None, names: list[str], none_threshold: float
) -> dict[str, Any]:
    """ "None of the above": untagged, or the primary tag's score below the threshold.
    Low confidence: the tagged rest the run is least sure of (lowest score, else the smallest
    embedding margin between the primary tag and the next capability)."""
    col = {n: j for j, n in enumerate(names)}
    rows = table.to_dicts()
    none_rows, scored = [], []
    for i, r in enumerate(rows):
        if r["primary"] is None:
            none_rows.append(
                {
                    **_row(r, None),
                    "why": "no tag (Stage 3 " + ("failed" if r["status"] == "failed" else "has no row") + ")",
                }
            )
        elif r["score"] is not None and r["score"] < none_threshold:
            none_rows.append(
                {**_row(r, 1), "why": f"score {r['score']:.2f} < {none_threshold:g}", "primary": r["primary"]}
            )
        elif r["score"] is not None:
            scored.append((r["score"], i, f"score {r['score']:.2f}"))
        elif fit is not None and r["primary"] in col and not np.isnan(fit[i]).all():
            j = col[r["primary"]]
            others = [fit[i, k] for k in range(len(names)) if k != j]
            margin = float(fit[i, j] - max(others)) if others else 1.0
            scored.append((margin, i, f"margin {margin:+.2f}"))
    scored.sort()
    low = [{**_row(rows[i], 1), "why": why, "primary": rows[i]["primary"]} for _, i, why in scored[:N_LOW_CONFIDENCE]]
    for r in none_rows:
        r.setdefault("primary", None)
    basis = (
        "Stage-3 score"
        if table["score"].drop_nulls().len()
        else "margin between the primary tag and the next capability in label-embedding space"
        if fit is not None
        else None
    )
    return {
        "none": none_rows[:MAX_LISTED],
        "n_none": len(none_rows),
        "low": low,
        "basis": basis,
        "threshold": none_threshold,
    }


def stage1_failures(stage1: pl.DataFrame | None, criteria: pl.DataFrame) -> dict[str, Any]:
    if stage1 is None:
        return {"missing": "no stage1_labels.parquet in this run", "rows": [], "n": 0}
    failed = stage1.filter(pl.col("status") != "ok") if "status" in stage1.columns else stage1.clear()
    text = dict(zip(criteria["criterion_id"].to_list(), criteria["text"].to_list()))
    task = dict(zip(criteria["criterion_id"].to_list(), criteria["task_id"].to_list()))
    rows = [
        {
            "criterion_id": r["criterion_id"],
            "task": task.get(r["criterion_id"], ""),
            "text": text.get(r["criterion_id"], ""),
            "attempts": r.get("attempts"),
            "problems": "; ".join(r.get("problems") or []) or "—",
        }
        for r in failed.head(MAX_LISTED).iter_rows(named=True)
    ]
    return {"missing": None, "rows": rows, "n": failed.height}


def constraint_status(
    taxonomy: Taxonomy, raw: dict, manifest: dict, primary_shares: dict[str, float]
) -> dict[str, Any]:
    """The merge constraints checked against this taxonomy, plus what the run itself recorded
    (repairs, and violations where the merge stage writes them)."""
    settings = (manifest.get("settings") or {}).get("merge") or {}
    cfg = recorded_bounds(manifest, MergeConfig.model_validate(settings) if settings else MergeConfig())
    n = len(taxonomy.capabilities)
    checks = [
        {
            "rule": f"{cfg.min_caps}-{cfg.max_caps} capabilities",
            "value": str(n),
            "ok": cfg.min_caps <= n <= cfg.max_caps,
        }
    ]
    for c in taxonomy.capabilities:
        ok = cfg.min_share - 1e-9 <= c.share <= cfg.max_share + 1e-9
        prim = primary_shares.get(c.name)
        checks.append(
            {
                "rule": f"`{c.name}` share in {100 * cfg.min_share:g}%-{100 * cfg.max_share:g}%",
                "value": f"{100 * c.share:.1f}%" + (f" (primary tag {100 * prim:.1f}%)" if prim is not None else ""),
                "ok": ok,
            }
        )
    members = [m for c in taxonomy.capabilities for m in c.members]
    repeated = sorted({m for m in members if members.count(m) > 1})
    checks.append(
        {
            "rule": "every micro-cluster in exactly one capability",
            "value": f"{len(set(members))} micro-clusters" + (f"; repeated: {', '.join(repeated)}" if repeated else ""),
            "ok": not repeated,
        }
    )
    recorded = _recorded_violations(raw)
    unresolved = [r for r in taxonomy.repairs if r.startswith("unresolved")]
    ok = all(c["ok"] for c in checks) and not recorded and not unresolved
    return {
        "ok": ok,
        "checks": checks,
        "recorded": recorded,
        "unresolved": unresolved,
        "repairs": [r for r in taxonomy.repairs if not r.startswith("unresolved")],
    }


def _recorded_violations(raw: dict) -> list[str]:
    """Violations the merge stage wrote into taxonomy.json, under whichever key holds them."""
    found = []
    for key, value in raw.items():
        if "violation" in key.lower() and value:
            for v in value if isinstance(value, list) else [value]:
                found.append(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False))
    return found


def none_threshold(manifest: dict) -> float:
    audit = (manifest.get("settings") or {}).get("audit") or {}
    return float(audit.get("none_threshold", AuditConfig().none_threshold))
