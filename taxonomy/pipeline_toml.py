"""The pipeline TOML for a bare corpus file: what `taxonomy init FILE` writes, and what `taxonomy run FILE`
leaves in its run directory, so the run can be repeated and tuned.

The corpus section is written out; every other setting follows as a comment with its default, taken
from the config models themselves, so the file is the one place that shows every key."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from taxonomy.config import ConfigError, MergeConfig, PipelineConfig
from taxonomy.corpus import load_corpus
from taxonomy.corpus.config import ColumnMap, corpus_stem
from taxonomy.corpus.detect import Detected, detect
from taxonomy.merge.bounds import BOUND_KEYS


def pipeline_name(corpus: Path) -> str:
    """A folder-safe pipeline name from the file name ("my rubric (v2).csv" -> "my_rubric_v2")."""
    return corpus_stem(corpus)


def corpus_config(found: Detected) -> PipelineConfig:
    """The config a run over a bare corpus uses (paths absolute, so it does not depend on the TOML's place). Its
    merge bounds are set when a session reads the corpus (pipeline.py), from the criteria it holds then."""
    raw: dict[str, Any] = {
        "name": pipeline_name(found.path),
        "corpus": {"path": str(found.path.resolve()), "format": found.format},
    }
    if found.format == "table":
        raw["corpus"]["columns"] = found.columns.model_dump()
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


def render(cfg: PipelineConfig, found: Detected, toml_path: Path, pin_output: bool = False) -> str:
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
    # The configured bounds, not those this corpus took: a run sets them again from the criteria it reads
    # (merge/bounds.py), so a grown corpus gets the defaults back.
    default = MergeConfig()
    cfg = cfg.model_copy(update={"merge": cfg.merge.model_copy(update={k: getattr(default, k) for k in BOUND_KEYS})})
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
    """A bare corpus's config and its number of criteria, loaded once (bad input stops here)."""
    cfg = corpus_config(found)
    return cfg, load_corpus(cfg.corpus, Path.cwd()).frame.height


def init_pipeline(corpus: Path, toml_path: Path | None = None, force: bool = False) -> tuple[Path, Detected, int]:
    """`taxonomy init FILE`: detect, load once (bad input stops here), write the TOML; nothing is run."""
    found = detect(corpus)
    toml_path = toml_path or Path(f"{pipeline_name(corpus)}.toml")
    if toml_path.exists() and not force:
        raise ConfigError(f"{toml_path}: already exists; fix: pass --out OTHER.toml, or --force to replace it")
    cfg, n = config_for_corpus(found)
    toml_path.write_text(render(cfg, found, toml_path), encoding="utf-8")
    return toml_path, found, n
