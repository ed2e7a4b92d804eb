"""Load a rubric corpus into one criterion table.

Every format ends in the same polars frame, one row per criterion, with these leading
columns (then any free extra columns):

    task_id       Utf8     the task (paper, instance, file stem, ...)
    criterion_id  Utf8     unique across the corpus; "<task>/<id>" in multi-task corpora
    text          Utf8     the criterion
    weight        Float64  negative = penalty; PaperBench leaves sum to 1 per paper
    category      Utf8     the corpus's own category, if any (nullable)
    direction     Utf8     "reward" or "penalty"
    brief         Utf8     the task brief ("" if none)
    context       Utf8     ancestor requirements joined " > " (trees), else ""
    source        Utf8     "<file>:<line>" for rows, "<file>#<JSON pointer>" for JSON nodes

Formats (CorpusConfig.format), one small loader each in LOADERS:
  table        .jsonl / .csv / .tsv (each optionally .gz) / .parquet / a .json list of objects;
               columns mapped by ColumnMap, unmapped columns pass through as extra columns
  paperbench   folder with papers/<paper>/rubric.json[.gz]; leaves only; extras
               finegrained_category and node_id (the upstream node id)
  devai        folder with instances/ or devai/instances/; extras requirement_id, prerequisites
  rubric_list  a JSON list of {"criteria"|"criterion", "weight", ...} (one task), or a folder of them
  tasks_jsonl  tasks.jsonl lines with task_id, final_prompt, aggregated_rubric_json
  healthbench  HealthBench JSONL (prompt_id, prompt, rubrics); extras axis, level, theme (gold, never read)

Bad input raises CorpusError with a one-line message "<file>: <where>: <what>; fix: <how>".
<where> is `row N` for the Nth criterion of a table or JSON list (the header not counted), with its file
line in a text file: `row 2 (line 3)` in CSV, TSV and JSONL; `line N` alone for what is found before rows are
read (an encoding or JSON syntax error, the header); `at /pointer` in JSON trees; absent for the whole file.
A bare file with no pipeline TOML is recognised by detect.detect (format and column names).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

from taxonomy.corpus.config import ColumnMap, Corpus, CorpusConfig, CorpusError, LEADING_COLUMNS, show_path
from taxonomy.corpus.devai import load_devai
from taxonomy.corpus.healthbench import load_healthbench
from taxonomy.corpus.jsonio import existing_file, read_json
from taxonomy.corpus.paperbench import load_paperbench
from taxonomy.corpus.records import Loaded, finalize
from taxonomy.corpus.rubric_list import load_rubric_list, load_tasks_jsonl
from taxonomy.corpus.table import load_table

__all__ = [
    "LEADING_COLUMNS",
    "LOADERS",
    "ColumnMap",
    "Corpus",
    "CorpusConfig",
    "CorpusError",
    "load_corpus",
    "read_json",
]

log = logging.getLogger("taxonomy.corpus")

LOADERS: dict[str, Callable[[Path, CorpusConfig], Loaded]] = {
    "table": load_table,
    "paperbench": load_paperbench,
    "devai": load_devai,
    "rubric_list": load_rubric_list,
    "tasks_jsonl": load_tasks_jsonl,
    "healthbench": load_healthbench,
}


_said: set[tuple[str, str]] = set()


def _say_once(path: Path, warnings: list[str]) -> None:
    """Each warning about a corpus once per process, though a command may load it twice (to size it, then to run)."""
    for text in warnings:
        if (str(path.resolve()), text) not in _said:
            _said.add((str(path.resolve()), text))
            log.warning("%s: %s", show_path(path), text)


def load_corpus(cfg: CorpusConfig, base_dir: Path) -> Corpus:
    """Load the corpus `cfg` describes; relative paths resolve against `base_dir`."""
    path = Path(cfg.path).expanduser()
    path = path if path.is_absolute() else Path(base_dir) / path
    if not path.exists() and existing_file(path) is None:
        raise CorpusError(
            show_path(path),
            "-",
            "corpus path not found",
            f"make [corpus] path relative to {Path(base_dir).resolve()} (the pipeline file's folder) or absolute",
        )
    loaded = LOADERS[cfg.format](path, cfg)
    if not loaded.records:
        raise CorpusError(
            show_path(path),
            "-",
            "no criteria in it (an empty file, or a header with no rows)",
            "add criteria, or point [corpus] path at the right file",
        )
    corpus = finalize(loaded, cfg, lint=f"taxonomy lint {show_path(path)}")
    _say_once(path, corpus.warnings)
    if corpus.frame.is_empty():
        raise CorpusError(
            show_path(path),
            "-",
            "no criteria left after filtering (on_empty, papers)",
            "check the [corpus] filters, or the criterion text column",
        )
    return corpus
