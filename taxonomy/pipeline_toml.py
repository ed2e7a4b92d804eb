"""The pipeline TOML for a bare corpus file: what `taxonomy init FILE` writes, and what `taxonomy run FILE`
leaves in its run directory, so the run can be repeated and tuned.

The corpus section is written out; every other setting follows as a comment with its default, taken
from the config models themselves, so the file is the one place that shows every key."""

from __future__ import annotations

import json
import math
import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from taxonomy.config import ConfigError, MergeConfig, PipelineConfig
from taxonomy.corpus.config import ColumnMap, corpus_stem
from taxonomy.corpus.detect import Detected, detect

# The [merge] keys pipeline.toml writes out for a corpus too small for the paper's bounds (8-10 capabilities of
# 2-40% each): `small_merge` gives their values.
SMALL_MERGE = ("min_caps", "max_caps", "min_share", "max_share")


def feasible(n: int, merge: MergeConfig) -> bool:
    """Whether n criteria can make min_caps..max_caps capabilities, each holding its bounded share."""
    lo = max(1, math.ceil(merge.min_share * n - 1e-9))
    hi = math.floor(merge.max_share * n + 1e-9)
    return any(k <= n and k * lo <= n <= k * hi for k in range(merge.min_caps, merge.max_caps + 1))


def small_merge(n: int, merge: MergeConfig | None = None) -> tuple[dict | None, str | None]:
    """(bounds, why) for a corpus whose n criteria cannot meet the merge bounds; (None, None) when they can.
    The bounds are the nearest that can be met: as many capabilities as there are criteria, up to max_caps,
    and a largest share that many can hold."""
    merge = merge or MergeConfig()
    if n < 1 or feasible(n, merge):
        return None, None
    caps = max(1, min(merge.max_caps, n))
    bounds = {
        "min_caps": min(merge.min_caps, caps),
        "max_caps": merge.max_caps,
        "min_share": 0.0,
        "max_share": max(merge.max_share, math.ceil(n / caps) / n),
    }
    why = (
        f"{n} {'criterion' if n == 1 else 'criteria'} cannot make {merge.min_caps}-{merge.max_caps} capabilities of "
        f"{merge.min_share:.0%}-{merge.max_share:.0%} each (each capability needs at least one criterion), so this "
        f"run allows {bounds['min_caps']}-{bounds['max_caps']} capabilities of up to {bounds['max_share']:.0%}"
    )
    return bounds, why


def small_corpus_note(n: int | None) -> str | None:
    """The one line a run over a corpus too small for the merge bounds prints, saying why."""
    why = small_merge(n)[1] if n is not None else None
    return f"note: {why}" if why else None


def pipeline_name(corpus: Path) -> str:
    """A folder-safe pipeline name from the file name ("my rubric (v2).csv" -> "my_rubric_v2")."""
    return corpus_stem(corpus)


def corpus_config(found: Detected, n_criteria: int | None = None) -> PipelineConfig:
    """The config a run over a bare corpus uses (paths absolute, so it does not depend on the TOML's place)."""
    raw: dict[str, Any] = {
        "name": pipeline_name(found.path),
        "corpus": {"path": str(found.path.resolve()), "format": found.format},
    }
    if found.format == "table":
        raw["corpus"]["columns"] = found.columns.model_dump()
    bounds = small_merge(n_criteria)[0] if n_criteria is not None else None
    if bounds:
        raw["merge"] = bounds
    return PipelineConfig.model_validate(raw)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # a JSON string is a valid TOML basic string
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(f"no TOML form for {v!r}")


def _commented(section: str, model: BaseModel) -> list[str]:
    """`# [section]` and `# key = default` for every field, nested sections after their parent's keys."""
    lines = [f"# [{section}]"]
    nested = []
    for key, field in type(model).model_fields.items():
        value = getattr(model, key)
        if isinstance(value, BaseModel):
            nested.append((f"{section}.{key}", value))
        elif value is None:
            lines.append(f"# {key} =   (unset)")
        else:
            lines.append(f"# {key} = {_value(value)}")
    for sub, value in nested:
        lines += [""] + _commented(sub, value)
    return lines


def _relative(path: str, folder: Path) -> str:
    """`path` as seen from the TOML's folder, so the TOML and what it names move together (a run folder
    carried off with its corpus keeps working); absolute only where no relative path exists."""
    try:
        return Path(os.path.relpath(Path(path).resolve(), folder)).as_posix()
    except ValueError:  # another drive (Windows)
        return str(path)


def render(
    cfg: PipelineConfig, found: Detected, toml_path: Path, n_criteria: int | None = None, pin_output: bool = False
) -> str:
    """The TOML text for `cfg`; the corpus path is relative to the TOML's folder when the file lies under it.
    `pin_output`: write [output] dir, so the TOML resumes the same run from any folder (a run's own copy)."""
    folder = toml_path.parent.resolve()
    path = _relative(cfg.corpus.path, folder)
    lines = [
        f"# Pipeline for {found.path.name}, written by rubric-taxonomy. Run it with `taxonomy run {toml_path.name}`.",
        "# Only [corpus] is needed; every other key is shown commented out with its default.",
        f"name = {_value(cfg.name)}",
        "",
        "[corpus]",
        f"path = {_value(path)}",
        f"format = {_value(cfg.corpus.format)}",
    ]
    if cfg.corpus.format == "table":
        lines += ["", "[corpus.columns]   # the file's column for each field"]
        for key in ColumnMap.model_fields:
            if key in found.used:
                lines.append(f"{key} = {_value(found.used[key])}")
            else:
                lines.append(f"# {key} = {_value(getattr(ColumnMap(), key))}   (no such column found)")
    skip = {"name", "corpus", "base_dir"}
    if cfg.merge.model_dump() != type(cfg.merge)().model_dump():
        skip.add("merge")
        lines += [
            "",
            "[merge]",
            f"# {small_merge(n_criteria or 0)[1] or 'bounds set for this corpus'}.",
            "# Delete them once the corpus can meet the defaults.",
            *(f"{k} = {_value(getattr(cfg.merge, k))}" for k in SMALL_MERGE),
        ]
    skip.add("output")
    if pin_output:
        lines += ["", "[output]", f"dir = {_value(_relative(cfg.output.dir, folder))}"]
    else:
        lines += ["", "# [output]", '# dir = "outputs"   (unset: ./outputs of the folder the command runs in)']
    for section in PipelineConfig.model_fields:
        if section not in skip:
            lines += [""] + _commented(section, getattr(cfg, section))
    text = "\n".join(lines) + "\n"
    tomllib.loads(text)  # what is written must read back
    return text


def config_for_corpus(found: Detected) -> tuple[PipelineConfig, int]:
    """A bare corpus's config and its number of criteria, loaded once (bad input stops here): a small
    corpus gets the relaxed merge bounds."""
    from taxonomy.corpus import load_corpus

    n = load_corpus(corpus_config(found).corpus, Path.cwd()).frame.height
    return corpus_config(found, n), n


def init_pipeline(corpus: Path, toml_path: Path | None = None, force: bool = False) -> tuple[Path, Detected, int]:
    """`taxonomy init FILE`: detect, load once (bad input stops here), write the TOML; nothing is run."""
    found = detect(corpus)
    toml_path = toml_path or Path(f"{pipeline_name(corpus)}.toml")
    if toml_path.exists() and not force:
        raise ConfigError(f"{toml_path}: already exists; fix: pass --out OTHER.toml, or --force to replace it")
    cfg, n = config_for_corpus(found)
    toml_path.write_text(render(cfg, found, toml_path, n), encoding="utf-8")
    return toml_path, found, n
