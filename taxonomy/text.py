"""The one tokenizer: how every key-less part (the offline backend, the rubric linter) reads criterion text.

Grammar, not a domain: nothing here knows a field's vocabulary. Words are runs of letters in any
script; scripts written without spaces (Han, kana, Hangul, Thai) are read as characters.

    words(text)          lower-cased letter runs, a spaceless run kept whole
    tokens(text)         words, a spaceless run split into character unigrams and bigrams (for vectors)
    stem(word)           the first STEM_LETTERS letters of a longer word, so inflections are one token
    normalized(text)     case, space and punctuation folded, for exact-duplicate checks
    function_words(texts) the function words of the languages the texts are written in
    FUNCTION_WORDS       the English ones (NAME_STOP_WORDS and PHRASE_STOP_WORDS: what validate.py's rules skip)
    NEGATIONS            words that turn a statement into its negation
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from stop_words import LANGUAGE_MAPPING, get_stop_words

__all__ = [
    "FUNCTION_WORDS",
    "NAME_STOP_WORDS",
    "PHRASE_STOP_WORDS",
    "WORD",
    "STEM_LETTERS",
    "NEGATIONS",
    "words",
    "tokens",
    "stem",
    "is_spaceless",
    "normalized",
    "function_words",
    "corpus_languages",
    "language_name",
]

# Han, kana, Hangul syllables, Thai: no spaces between words.
_SPACELESS_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u0e00-\u0e7f"
_SPACELESS = re.compile(f"[{_SPACELESS_CHARS}]")


def _marks() -> str:
    """Combining marks (vowel signs, points, accents): part of their word, though not letters to `\\w`."""
    return "".join(re.escape(chr(c)) for c in range(0x300, 0x10000) if unicodedata.category(chr(c)).startswith("M"))


_MARKS = _marks()
# A run of letters and marks, any script; a change between a spaceless script and another ends a word
# ("防水等级IPX7": "防水等级", "ipx").
WORD = re.compile(f"[{_SPACELESS_CHARS}]+|(?:[^\\W\\d_{_SPACELESS_CHARS}]|[{_MARKS}])+", re.UNICODE)
STEM_LETTERS = 5  # "mention", "mentions", "mentioned" share their first five letters
NEGATIONS = frozenset("not no never without nor cannot doesn don isn aren wasn weren didn won shouldn".split())


def is_spaceless(token: str) -> bool:
    return not token.isascii() and bool(_SPACELESS.search(token))  # every spaceless script lies outside ASCII


_ASCII_WORD = re.compile("[a-z]+")  # WORD on ASCII text, where there are no marks and no spaceless script: 2x faster


def words(text: str) -> list[str]:
    """Lower-cased runs of letters; digits and punctuation separate words."""
    text = (text or "").lower()
    return _ASCII_WORD.findall(text) if text.isascii() else WORD.findall(text)


def tokens(text: str) -> list[str]:
    """`words`, with each run of a spaceless script split into character unigrams and bigrams."""
    out: list[str] = []
    for w in words(text):
        if is_spaceless(w):
            out += list(w) + [a + b for a, b in zip(w, w[1:])]
        else:
            out.append(w)
    return out


def stem(word: str) -> str:
    """What inflected forms of a long word share; short words and spaceless runs stay whole."""
    return word[:STEM_LETTERS] if len(word) > STEM_LETTERS and not is_spaceless(word) else word


_PUNCT = re.compile(r"[^\w\s]", re.UNICODE)


def normalized(text: str) -> str:
    """Case, Unicode form, white space and punctuation folded: two criteria equal here are one check."""
    folded = unicodedata.normalize("NFKC", text or "").casefold()
    return " ".join(_PUNCT.sub(" ", folded).split())


# ---- English function words --------------------------------------------------------
# The words a capability name may not consist of only (validate's name rules).
NAME_STOP_WORDS = frozenset(
    "a an the of to and or in on for with by at from as is are be into onto per via vs versus its their this that "
    "these those each every any all some no not than then".split()
)
# The words a rationale's quoted phrase may not consist of only (validate's grounding rule).
PHRASE_STOP_WORDS = frozenset(
    "the a an of to and or in on for with is are be by that this it as at from its their all any "
    "each has have must should not no".split()
)

# English function words: the two lists above, plus the auxiliaries, pronouns and quantifiers an offline
# name must not be made of.
# Grammar, not a domain: the same list serves a medical, legal or code corpus written in English.
FUNCTION_WORDS = (
    NAME_STOP_WORDS
    | PHRASE_STOP_WORDS
    | frozenset(
        "nor but if so was were been being it them they both either neither there here which who whom whose "
        "what when where why how can could may might will would shall should do does did done had having also "
        "only just such other same one two very more most least less many much own our your we you he she his her "
        # prepositions and conjunctions of place, time and reason; not those that carry a check's sense
        # ("against", "between", "without", "except", "over": a stance, a comparison, a negation, an exclusion)
        "about above across after along among around before behind below beneath beside during inside near off out "
        "outside since through toward towards under until up upon within while because although though "
        "whether unless".split()
    )
)


# ---- the languages a corpus is written in -------------------------------------------
# English has the project's own list (FUNCTION_WORDS above), since general stop-word lists drop
# check verbs ("uses", "shows"). Any other language written with spaces gets its stop words from the
# `stop-words` package, when enough criteria use them.
_SAMPLE = 3000  # criteria read to decide the languages: enough, and fast at 100k
_MIN_HITS = 2  # a criterion with fewer stop words of any language says nothing
_LANGUAGE_SHARE = 0.05  # a language counts when this share of the read criteria is written in it...
_LANGUAGE_MIN = 3  # ...and at least this many


@lru_cache(maxsize=1)
def _lists() -> dict[str, frozenset[str]]:
    out = {}
    for code in LANGUAGE_MAPPING:
        stop = frozenset(w.lower() for w in get_stop_words(code))
        if stop and not any(is_spaceless(w) for w in stop):
            out[code] = stop
    return out


def language_name(code: str) -> str:
    return LANGUAGE_MAPPING.get(code, code).capitalize()


@lru_cache(maxsize=1)
def _owners() -> dict[str, tuple[str, ...]]:
    """Each stop word's languages: a criterion's words are looked up once, not once per language."""
    owners: dict[str, list[str]] = {}
    for code, stop in _lists().items():
        for w in stop:
            owners.setdefault(w, []).append(code)
    return {w: tuple(codes) for w, codes in owners.items()}


def _language_of(ws: list[str], lists: dict[str, frozenset[str]]) -> str | None:
    hits = dict.fromkeys(lists, 0)
    owners = _owners()
    for w in ws:
        for code in owners.get(w, ()):
            hits[code] += 1
    best = max(hits.values(), default=0)
    winners = [code for code, h in hits.items() if h == best]
    # A tie ("de", "la" belong to several Romance languages) decides nothing.
    return winners[0] if best >= _MIN_HITS and len(winners) == 1 else None


@lru_cache(maxsize=4)
def _languages(read: tuple[str, ...]) -> tuple[str, ...]:
    lists, counts = _lists(), {}
    for text in read:
        code = _language_of([w for w in words(text) if not is_spaceless(w)], lists)
        if code:
            counts[code] = counts.get(code, 0) + 1
    least = max(_LANGUAGE_MIN, _LANGUAGE_SHARE * len(read))
    return tuple(sorted(code for code, n in counts.items() if n >= least))


def corpus_languages(texts: list[str]) -> tuple[str, ...]:
    """ISO codes of the languages (written with spaces) that enough of the texts are written in."""
    return _languages(tuple(texts[:: max(1, len(texts) // _SAMPLE)]))


def function_words(texts: list[str]) -> frozenset[str]:
    """The project's English function words plus the stop words of every other language the texts use."""
    lists = _lists()
    extra = [lists[code] for code in corpus_languages(texts) if code != "en"]
    return FUNCTION_WORDS.union(*extra) if extra else FUNCTION_WORDS
