"""The "devai" format: DevAI instances/*.json, one criterion per requirement."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from taxonomy.corpus.config import CorpusConfig, CorpusError, show_path
from taxonomy.corpus.jsonio import json_files, read_json
from taxonomy.corpus.records import Loaded, make_record, short_list

# Known upstream typos in DevAI categories (38_Object_Tracking has "Performence Metrics").
_DEVAI_CATEGORY_FIXES = {"Performence Metrics": "Performance Metrics"}


def load_devai(path: Path, cfg: CorpusConfig) -> Loaded:
    candidates = [path / "instances", path / "devai" / "instances", path]
    folder = next((c for c in candidates if c.is_dir() and any(c.glob("*.json*"))), None)
    if folder is None:
        raise CorpusError(
            show_path(path),
            "-",
            "no instances/ or devai/instances/ folder with JSON files here",
            "point path at the DevAI benchmark folder (it holds devai/instances/*.json)",
        )
    records, extras, fixed = [], [], []
    for name, f in json_files(folder):
        stem, show, rel = name.removesuffix(".json"), show_path(f), (f.parent / name).relative_to(path).as_posix()
        inst = read_json(f)
        reqs = inst.get("requirements") if isinstance(inst, dict) else None
        if not isinstance(reqs, list):
            raise CorpusError(
                show,
                "/requirements",
                "no requirements list",
                'a DevAI instance needs "requirements": [{"requirement_id", "criteria", "category"}, ...]',
            )
        brief = str(inst.get("query") or "")
        for i, req in enumerate(reqs):
            where = f"/requirements/{i}"
            if not isinstance(req, dict):
                raise CorpusError(
                    show,
                    where,
                    f"expected a requirement object, got {type(req).__name__}",
                    "make each requirement an object with requirement_id and criteria",
                )
            rid = req.get("requirement_id", i)
            if isinstance(rid, bool) or not isinstance(rid, int):
                raise CorpusError(
                    show,
                    where,
                    f"requirement_id {rid!r} is not an integer",
                    "number requirements 0, 1, 2, ...",
                )
            category = req.get("category")
            if category in _DEVAI_CATEGORY_FIXES:
                fixed.append(f"{rel}#{where}")
                category = _DEVAI_CATEGORY_FIXES[category]
            text = req.get("criteria")
            records.append(
                make_record(stem, f"{stem}/{rid}", text, 1.0, category, brief, "", show, where, f"{rel}#{where}")
            )
            prereq = req.get("prerequisites") or []
            prereq = [p for p in prereq if isinstance(p, int) and not isinstance(p, bool)]
            extras.append({"requirement_id": rid, "prerequisites": prereq})
    extra_frame = pl.DataFrame(extras, schema={"requirement_id": pl.Int64, "prerequisites": pl.List(pl.Int64)})
    warnings = []
    if fixed:
        spelled = ", ".join(f"{k!r} -> {v!r}" for k, v in _DEVAI_CATEGORY_FIXES.items())
        warnings.append(f"corrected {len(fixed)} misspelled DevAI categories ({spelled}): {short_list(fixed)}")
    return Loaded(records, extra_frame, warnings)
