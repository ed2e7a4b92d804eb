"""The "paperbench" format: papers/<paper>/rubric.json trees, one criterion per leaf."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import polars as pl

from taxonomy.corpus.config import CorpusConfig, CorpusError, show_path
from taxonomy.corpus.jsonio import existing_file, read_json
from taxonomy.corpus.records import Loaded, make_record, parse_weight, short_list, str_or_none

_LFS_POINTER = "version https://git-lfs.github.com/spec/"


def _simple_yaml(path: Path) -> dict[str, str]:
    """Top-level `key: value` lines of a flat YAML file (quotes stripped)."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^([A-Za-z_][\w-]*)\s*:\s*(.*?)\s*$", line)
        if not m:
            continue
        key, value = m.groups()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                value = value[1:-1]
        elif len(value) >= 2 and value[0] == value[-1] == "'":
            value = value[1:-1].replace("''", "'")
        out[key] = value
    return out


def _paper_brief(paper_dir: Path, lfs: list[str]) -> str:
    config = paper_dir / "config.yaml"
    title = _simple_yaml(config).get("title", "") if config.is_file() else ""
    addendum = paper_dir / "addendum.md"
    text = addendum.read_text(encoding="utf-8").strip() if addendum.is_file() else ""
    if text.startswith(_LFS_POINTER):  # a Git LFS pointer, not the addendum itself
        lfs.append(paper_dir.name)
        text = ""
    return "\n\n".join(part for part in (title, text) if part)


def _walk_tree(node: Any, pointer: str, ancestors: list[str], weight: float, out: list[tuple], file: str) -> None:
    """Append (pointer, leaf node, effective weight, ancestor texts) for every leaf under `node`."""
    if not isinstance(node, dict):
        raise CorpusError(
            file,
            pointer or "/",
            f"expected a rubric node object, got {type(node).__name__}",
            "each node needs id, requirements, weight and sub_tasks",
        )
    children = node.get("sub_tasks") or []
    if not isinstance(children, list):
        raise CorpusError(
            file,
            pointer or "/",
            "sub_tasks is not a list",
            "make sub_tasks a list of nodes ([] for a leaf)",
        )
    if not children:
        out.append((pointer or "/", node, weight, ancestors))
        return
    sibling_weights = []
    for i, child in enumerate(children):
        where = f"{pointer}/sub_tasks/{i}"
        w = parse_weight(child.get("weight") if isinstance(child, dict) else None, file, where)
        if w < 0:
            raise CorpusError(
                file,
                where,
                f"negative weight {w:g} in a rubric tree",
                "tree weights are relative shares among siblings; use 0 or a positive number",
            )
        sibling_weights.append(w)
    total = sum(sibling_weights)
    if total <= 0:
        raise CorpusError(
            file,
            pointer or "/",
            "the sub_tasks' weights sum to 0",
            "give at least one sub_task a positive weight",
        )
    path = ancestors + [str(node.get("requirements") or "").strip()]
    for i, (child, w) in enumerate(zip(children, sibling_weights)):
        _walk_tree(child, f"{pointer}/sub_tasks/{i}", path, weight * w / total, out, file)


def load_paperbench(path: Path, cfg: CorpusConfig) -> Loaded:
    papers_dir = path / "papers"
    if not papers_dir.is_dir():
        raise CorpusError(
            show_path(path),
            "-",
            "no papers/ folder here",
            "point path at the PaperBench data folder that holds papers/<paper>/rubric.json",
        )
    available = sorted(p.name for p in papers_dir.iterdir() if p.is_dir() and existing_file(p / "rubric.json"))
    chosen = available if cfg.papers is None else cfg.papers
    unknown = [p for p in chosen if p not in available]
    if unknown:
        raise CorpusError(
            show_path(papers_dir),
            "-",
            f"unknown paper(s) {', '.join(unknown)}",
            f"choose papers among: {', '.join(available)}",
        )
    records, extras, lfs, dup_ids = [], [], [], []
    for paper in chosen:
        paper_dir = papers_dir / paper
        rubric_path = existing_file(paper_dir / "rubric.json")
        file, rel = show_path(rubric_path), f"papers/{paper}/rubric.json"  # source names the logical file (.gz or not)
        brief = _paper_brief(paper_dir, lfs)
        leaves: list[tuple] = []
        _walk_tree(read_json(rubric_path), "", [], 1.0, leaves, file)
        seen: dict[str, int] = defaultdict(int)
        for pointer, node, weight, ancestors in leaves:
            node_id = str(node.get("id") or pointer)
            seen[node_id] += 1
            criterion_id = f"{paper}/{node_id}" + (f"#{seen[node_id]}" if seen[node_id] > 1 else "")
            if seen[node_id] > 1:
                dup_ids.append(f"{rel}#{pointer}")
            text = node.get("requirements")
            context = " > ".join(ancestors)
            category = node.get("task_category")
            records.append(
                make_record(
                    paper, criterion_id, text, weight, category, brief, context, file, pointer, f"{rel}#{pointer}"
                )
            )
            finegrained = str_or_none(node.get("finegrained_task_category"))
            extras.append({"finegrained_category": finegrained, "node_id": node_id})
    warnings = []
    if lfs:
        warnings.append(
            f"{len(lfs)} addendum.md files are Git LFS pointers, not text; their briefs use the paper title only"
            f" ({short_list(lfs)})"
        )
    if dup_ids:
        warnings.append(
            f"{len(dup_ids)} leaves reuse a node id already used in their paper; their criterion_id gets a"
            f" '#<n>' suffix ({short_list(dup_ids)})"
        )
    extra_frame = pl.DataFrame(extras, schema={"finegrained_category": pl.Utf8, "node_id": pl.Utf8})
    return Loaded(records, extra_frame, warnings)
