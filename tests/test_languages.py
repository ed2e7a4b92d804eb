"""taxonomy/text.py: which languages' function words a corpus gets."""

from __future__ import annotations

import polars as pl

from taxonomy.text import FUNCTION_WORDS, corpus_languages, function_words
from tests.conftest import ROOT

HELDOUT = ROOT / "benchmarks" / "heldout"


def _criteria(name: str) -> list[str]:
    return pl.read_csv(HELDOUT / name)["criterion"].to_list()


def test_each_held_out_corpus_is_read_in_its_own_languages():
    assert corpus_languages(_criteria("es_support.csv")) == ("es",)
    assert corpus_languages(_criteria("de_analysis.csv")) == ("de",)
    assert corpus_languages(_criteria("report_writing.csv")) == ("en",)
    # Chinese criteria are read as characters and count for no language: only the English ones do
    assert corpus_languages(_criteria("zh_en_writing.csv")) == ("en",)


def test_a_language_counts_from_a_few_criteria_and_english_keeps_its_own_list():
    english = _criteria("report_writing.csv")[:100]
    spanish = _criteria("es_support.csv")
    assert corpus_languages(english + spanish[:8]) == ("en", "es")  # 8 of 108 (7%), a tie or two decides none
    assert corpus_languages(english + spanish[:2]) == ("en",)  # 2 of 102 are too few to name by
    assert function_words(english) == FUNCTION_WORDS  # "uses", "shows" stay words a name may use
    mixed = function_words(english + spanish[:8])
    assert {"el", "que", "la"} <= mixed and FUNCTION_WORDS <= mixed and "uses" not in mixed
