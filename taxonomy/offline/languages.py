"""The function words of the languages a corpus is written in: words that name no check.

English has the project's own list (`validate.FUNCTION_WORDS`), because general stop-word lists
drop check verbs ("uses", "shows", "states"). A corpus written in any other language that uses
spaces between words gets that language's stop words from the `stop-words` package as well;
without them a Spanish corpus named its capabilities `check_for_el_capability` and
`check_de_la_capability`. The language is read off the criteria: each is counted for the language
whose stop words it uses most, and a language counts when enough criteria are its.
"""
from __future__ import annotations

import hashlib
from functools import lru_cache

from stop_words import LANGUAGE_MAPPING, get_stop_words

from taxonomy.offline.features import WORD, is_spaceless
from taxonomy.validate import FUNCTION_WORDS

__all__ = ["corpus_languages", "function_words", "language_name"]

SAMPLE = 3000        # criteria read to decide the languages (evenly spaced): enough, and fast at 100k
MIN_HITS = 2         # a criterion with fewer stop words of any language says nothing
MIN_SHARE = 0.05     # a language counts when this share of the read criteria is written in it ...
MIN_CRITERIA = 3     # ... and at least this many
_CACHE: dict[str, tuple[str, ...]] = {}


@lru_cache(maxsize=1)
def _lists() -> dict[str, frozenset[str]]:
    """ISO code -> stop words, for the languages written with spaces (a script without spaces is read
    as characters, and its criteria are never counted for a language here)."""
    out = {}
    for code in LANGUAGE_MAPPING:
        words = frozenset(w.lower() for w in get_stop_words(code))
        if words and not any(is_spaceless(w) for w in words):
            out[code] = words
    return out


def language_name(code: str) -> str:
    return LANGUAGE_MAPPING.get(code, code).capitalize()


def _language_of(words: list[str], lists: dict[str, frozenset[str]]) -> str | None:
    hits = {code: sum(w in stop for w in words) for code, stop in lists.items()}
    best = max(hits.values(), default=0)
    winners = [code for code, h in hits.items() if h == best]
    # A tie ("de", "la" are stop words of several Romance languages) decides nothing.
    return winners[0] if best >= MIN_HITS and len(winners) == 1 else None


def corpus_languages(texts: list[str]) -> tuple[str, ...]:
    """ISO codes of the languages (written with spaces) that enough criteria are written in, sorted."""
    key = hashlib.sha1(repr(list(texts)).encode("utf-8")).hexdigest()
    if key not in _CACHE:
        _CACHE.clear()  # one corpus at a time, as the corpus spaces
        step = max(1, len(texts) // SAMPLE)
        read = texts[::step]
        lists = _lists()
        counts: dict[str, int] = {}
        for text in read:
            code = _language_of([w for w in WORD.findall((text or "").lower()) if not is_spaceless(w)], lists)
            if code:
                counts[code] = counts.get(code, 0) + 1
        least = max(MIN_CRITERIA, MIN_SHARE * len(read))
        _CACHE[key] = tuple(sorted(code for code, n in counts.items() if n >= least))
    return _CACHE[key]


def function_words(texts: list[str]) -> frozenset[str]:
    """The project's English function words plus the stop words of every other language the corpus uses."""
    lists = _lists()
    extra = [lists[code] for code in corpus_languages(texts) if code != "en"]
    return FUNCTION_WORDS.union(*extra) if extra else FUNCTION_WORDS
