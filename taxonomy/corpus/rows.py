"""Rows a rubric should not hold as they are: the same criterion twice in a task, criteria that differ only
in case, spaces or punctuation, and criteria far longer than a check is. Exact repeats are collapsed (they
would count one check several times and pull the taxonomy toward it); the rest are kept and counted.
Each kind is one warning with its count; `taxonomy lint` lists every row."""

from __future__ import annotations

import polars as pl

from taxonomy.corpus.config import CorpusConfig
from taxonomy.text import normalized


# Published benchmarks: verdicts name each of their criteria by id, so a repeat is kept (and counted).
BENCHMARKS = ("paperbench", "devai", "healthbench")


def _n(count: int, plural_verb: str, singular_verb: str) -> str:
    return f"{count} criteria {plural_verb}" if count != 1 else f"1 criterion {singular_verb}"


def _sources(frame: pl.DataFrame, limit: int = 5) -> str:
    shown = frame["source"].head(limit).to_list()
    return ", ".join(shown) + (f" and {frame.height - limit} more" if frame.height > limit else "")


def check_rows(frame: pl.DataFrame, cfg: CorpusConfig, lint: str) -> tuple[pl.DataFrame, list[str]]:
    """`frame` with exact repeats collapsed, and one warning per kind of bad row. `lint`: the command that lists
    them."""
    warnings = []
    keyed = frame.with_row_index("_i").with_columns(
        _exact=pl.col("text").str.strip_chars(), _folded=pl.col("text").map_elements(normalized, return_dtype=pl.Utf8)
    )
    keyed = keyed.with_columns(_repeat=pl.col("_i") > pl.col("_i").min().over("task_id", "context", "_exact", "weight"))
    repeat = pl.col("_repeat")
    repeats = keyed.filter(repeat)
    if repeats.height and (cfg.on_duplicate or ("keep" if cfg.format in BENCHMARKS else "collapse")) == "collapse":
        keyed = keyed.filter(~repeat)
        warnings.append(
            f"{_n(repeats.height, 'repeat', 'repeats')} an earlier criterion of its task word for word (same weight, "
            f"spaces trimmed): collapsed into the first, {keyed.height} criteria left ({_sources(repeats)}); "
            f"`{lint}` lists them"
        )
    elif repeats.height:
        why = 'on_duplicate = "keep"' if cfg.on_duplicate else "a benchmark's verdicts name each by its id"
        warnings.append(
            f"{_n(repeats.height, 'repeat', 'repeats')} an earlier criterion of its task word for word "
            f"(kept: {why}): {_sources(repeats)}; `{lint}` lists them"
        )
    near = keyed.filter((pl.col("_i") > pl.col("_i").min().over("task_id", "context", "_folded")) & ~repeat)
    if near.height:
        warnings.append(
            f"{_n(near.height, 'differ', 'differs')} from another of its task only in case, spaces, punctuation or "
            f"weight (kept): {_sources(near)}; `{lint}` lists them; make them one criterion, or say how they differ"
        )
    long = keyed.filter(pl.col("text").str.len_chars() > cfg.warn_chars).sort(
        pl.col("text").str.len_chars(), descending=True
    )
    if long.height:
        warnings.append(
            f"{_n(long.height, 'are', 'is')} over {cfg.warn_chars:,} "
            f"characters, the longest {long['text'][0].__len__():,} "
            f"({_sources(long)}): a check is a sentence or two, and every prompt that quotes one carries it whole; "
            f"split or shorten them (`{lint}` lists them)"
        )
    return keyed.drop("_i", "_exact", "_folded", "_repeat"), warnings
