"""With no key, any valid rubric in any script gets a taxonomy, and new criteria are tagged as the run did.

Everything goes through the CLI (in-process, as a user would type it) with `--provider offline`. The rubrics are
hand-written (tests/fixtures/scripts/README.md): an English support rubric and its first 40 rows in eleven
languages, and rubrics of other shapes; the bundled held-out corpora give the prefixes from 20 to 200 rows.
"""

from __future__ import annotations

import json
import math
import unicodedata
from pathlib import Path

import polars as pl
import pytest
from sklearn.metrics import normalized_mutual_info_score
from typer.testing import CliRunner

from taxonomy.cli import app
from taxonomy.text import FUNCTION_WORDS
from tests.conftest import ROOT, offline_devai_run, write_pipeline

FIXTURES = ROOT / "tests" / "fixtures" / "scripts"
HELDOUT = ROOT / "benchmarks" / "heldout"
SUPPORT = FIXTURES / "support_en_120.csv"
SUPPORT40 = FIXTURES / "support40_en.csv"
LANGUAGES = sorted(p.stem.removeprefix("support40_") for p in FIXTURES.glob("support40_*.csv") if p != SUPPORT40)
OTHER_SHAPES = ["report_25.csv", "coding_agent_60.jsonl", "plain_20.csv"]

MIN_CAPS, MAX_CAPS, MIN_SHARE, MAX_SHARE = 8, 10, 0.02, 0.40
FULL_CONSTRAINTS_FROM = 40  # the issue: from 40 criteria up, 8-10 capabilities of 2-40% each
SUBSET_KEEPS = 0.95  # a subset tagged against a frozen run keeps this share of its primary tags
# Each translation's primary tags against the English 40's. Chance is high on 40 criteria: the English tags
# against 2,000 shuffles of themselves gave NMI 0.38 on average, 0.47 at the 99th percentile, 0.51 at most.
# The translations gave 0.63-0.77 (benchmarks/scripts.py).
TRANSLATION_NMI = 0.6
# Words a name may not be made of alone: a name of only these says nothing about its criteria.
PLACEHOLDER_WORDS = frozenset(
    "first second third fourth fifth sixth seventh eighth ninth tenth other misc kind group cluster "
    "unmarked unnamed unknown none".split()
)


# ---- running ---------------------------------------------------------------------------------


def _invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def _run(corpus: Path, run_dir: Path):
    return _invoke("run", corpus, "--provider", "offline", "--run-dir", run_dir, "-q", "--no-report")


def _prefix(source: Path, n: int, folder: Path) -> Path:
    path = folder / f"{source.stem}_first{n}.csv"
    pl.read_csv(source).head(n).write_csv(path)
    return path


def _primaries(run_dir: Path) -> dict[str, str]:
    tags = pl.read_parquet(run_dir / "stage3_tags.parquet")
    return dict(zip(tags["criterion_id"].to_list(), tags["primary"].to_list()))


def _capabilities(run_dir: Path) -> list[dict]:
    return json.loads((run_dir / "taxonomy.json").read_text(encoding="utf-8"))["capabilities"]


# ---- reading words as a reader does: letters, marks and digits of any script ---------------------


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text or "").casefold()


def _is_word_char(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "LMN"  # marks too: Devanagari and Thai vowel signs are marks


_SPACELESS_RANGES = (
    (0x3040, 0x30FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xF900, 0xFAFF),  # kana, Han
    (0x0E00, 0x0EFF),
    (0x1000, 0x109F),
    (0x1780, 0x17FF),
)  # Thai, Lao, Myanmar, Khmer


def _kind(ch: str, previous: str | None) -> str | None:
    """What run a character belongs to: digits, a spaceless script, other letters; a mark joins its letter."""
    category = unicodedata.category(ch)[0]
    if category == "M":
        return previous
    if category == "N":
        return "digits"
    if category != "L":
        return None
    return "spaceless" if any(a <= ord(ch) <= b for a, b in _SPACELESS_RANGES) else "letters"


def _runs(text: str) -> list[tuple[str, str]]:
    """(kind, run) pairs. Digits and punctuation separate words, as taxonomy.text says; so does a change of
    script ("订单号HK" holds a Han run and the word "hk")."""
    out: list[tuple[str, str]] = []
    kind = None
    for ch in _fold(text):
        kind_here = _kind(ch, kind)
        if kind_here is not None and kind_here == kind:
            out[-1] = (kind, out[-1][1] + ch)
        elif kind_here is not None:
            out.append((kind_here, ch))
        kind = kind_here
    return out


def _words(text: str) -> list[str]:
    return [run for kind, run in _runs(text) if kind != "spaceless"]


def _is_hangul(word: str) -> bool:
    return any("\uac00" <= ch <= "\ud7af" for ch in word)


def _whole_word(word: str, corpus_words: set[str]) -> bool:
    if word in corpus_words:
        return True
    # Korean writes a particle onto its word ("노트북이"): the word without it is still whole.
    return _is_hangul(word) and any(w.startswith(word) for w in corpus_words)


def _segmented(language: str) -> list[tuple[str, set[int]]] | None:
    """A spaceless fixture's criteria, space-free, each with the offsets where a word starts or ends.

    The words are segmented by hand (support40_<lang>.words.txt); punctuation, digits and a change of script
    bound words too."""
    path = FIXTURES / f"support40_{language}.words.txt"
    if not path.exists():
        return None
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        text, cuts = "", {0}
        for word in _fold(line).split():
            previous = None
            for ch in word:
                kind = _kind(ch, previous)
                if kind is None or kind != previous:  # as in _runs: punctuation, digits, a change of script
                    cuts.add(len(text))
                text, previous = text + ch, kind
            cuts.add(len(text))
        lines.append((text, cuts))
    return lines


def _at_word_bounds(phrase: str, lines: list[tuple[str, set[int]]]) -> bool:
    phrase = "".join(_fold(phrase).split())
    for text, cuts in lines:
        start = text.find(phrase)
        while start >= 0:
            if start in cuts and start + len(phrase) in cuts:
                return True
            start = text.find(phrase, start + 1)
    return False


def _title_phrases(title: str) -> list[str]:
    phrases = [p.strip().strip("\"'“”‘’«»「」『』…").strip() for p in (title or "").split("·")]
    return [p for p in phrases if p]


def _phrase_is_whole(phrase: str, corpus_words: set[str], spaceless_runs: list[str]) -> bool:
    """Spaced words must be whole words of the criteria; with no segmentation to say where a spaceless
    script's words end, its runs need only occur in the criteria."""
    return all(
        any(run in r for r in spaceless_runs) if kind == "spaceless" else _whole_word(run, corpus_words)
        for kind, run in _runs(phrase)
    )


def _title_problems(capabilities: list[dict], texts: list[str], language: str | None) -> list[str]:
    """Titles never cut a word in half: whole words of the criteria, or hand-segmented word bounds."""
    lines = _segmented(language) if language else None
    runs = [r for t in texts for r in _runs(t)]
    corpus_words = {run for kind, run in runs if kind != "spaceless"}
    spaceless_runs = [run for kind, run in runs if kind == "spaceless"]
    problems = []
    for cap in capabilities:
        for phrase in _title_phrases(cap.get("title", "")):
            if lines is not None:
                ok = _at_word_bounds(phrase, lines)
            else:
                ok = _phrase_is_whole(phrase, corpus_words, spaceless_runs)
            if not ok:
                problems.append(f"title {cap.get('title')!r} of {cap['name']} cuts a word: {phrase!r}")
    return problems


# ---- what every run must give -------------------------------------------------------------------


def _is_placeholder(name: str) -> bool:
    """A name of ordinals, fallbacks and function words only (`check_second_kind`, `check_for_without`)."""
    body = [w for w in name.split("_") if w not in ("check", "capability", "")]
    return not body or all(w in PLACEHOLDER_WORDS or w in FUNCTION_WORDS or w.isdigit() for w in body)


def _name_problems(capabilities: list[dict]) -> list[str]:
    problems = []
    for cap in capabilities:
        if _is_placeholder(cap["name"]) or "unmarked" in cap["name"]:
            problems.append(f"placeholder name {cap['name']}")
        if not (cap.get("title") or "").strip():
            problems.append(f"{cap['name']} has an empty title")
        if "unmarked" in json.dumps(cap, ensure_ascii=False):
            problems.append(f"{cap['name']} mentions the fallback 'unmarked'")
    return problems


def _share_problems(run_dir: Path, capabilities: list[dict]) -> list[str]:
    primaries = list(_primaries(run_dir).values())
    n = len(primaries)
    counts = {cap["name"]: primaries.count(cap["name"]) for cap in capabilities}
    problems = []
    if not MIN_CAPS <= len(capabilities) <= MAX_CAPS:
        problems.append(f"{len(capabilities)} capabilities, not {MIN_CAPS}-{MAX_CAPS}")
    for name, count in counts.items():
        if count > math.floor(MAX_SHARE * n + 1e-9) or count < math.ceil(MIN_SHARE * n - 1e-9):
            problems.append(f"{name} holds {count} of {n} criteria as primary ({count / n:.0%})")
    return problems


def _says_why(output: str) -> bool:
    reasons = ("too few", "too small", "cannot", "can't", "could not")
    return any(r in line.lower() for line in output.splitlines() for r in reasons)


def _check_run(corpus: Path, run_dir: Path, result, language: str | None = None) -> None:
    assert result.exit_code == 0, f"{corpus.name}: exit {result.exit_code}\n{result.output}"
    capabilities = _capabilities(run_dir)
    texts = pl.read_parquet(run_dir / "criteria.parquet")["text"].to_list()
    problems = _name_problems(capabilities) + _title_problems(capabilities, texts, language)
    shares = _share_problems(run_dir, capabilities)
    if len(texts) >= FULL_CONSTRAINTS_FROM or not _says_why(result.output):
        problems += shares
    assert not problems, f"{corpus.name} ({len(texts)} criteria):\n" + "\n".join(problems) + "\n" + result.output


@pytest.fixture(scope="module")
def script_run(tmp_path_factory):
    """The run on support40_<language>.csv, made once for the tests that read it."""
    runs: dict[str, tuple[Path, object]] = {}

    def get(language: str) -> tuple[Path, object]:
        if language not in runs:
            run_dir = tmp_path_factory.mktemp(f"support40_{language}") / "run"
            runs[language] = (run_dir, _run(FIXTURES / f"support40_{language}.csv", run_dir))
        return runs[language]

    return get


# ---- the matrix: every prefix from 20 to 200 criteria, every script, every shape -----------------

# English, Spanish, and Chinese with English: the three scripts' bundled corpora (de_analysis adds no case
# the others miss and would add 37 runs).
PREFIX_SOURCES = [SUPPORT] + [HELDOUT / f"{n}.csv" for n in ("report_writing", "es_support", "zh_en_writing")]
# Every 5 rows up to 100, where the bounds and the share repairs change most with size; every 10 above.
PREFIXES = [
    pytest.param(source, n, id=f"{source.stem}-{n}")
    for source in PREFIX_SOURCES
    for n in [*range(20, 101, 5), *range(110, 201, 10)]
    if n <= pl.read_csv(source).height
]


@pytest.mark.parametrize(("source", "n"), PREFIXES)
def test_every_prefix_of_a_rubric_gets_a_taxonomy(offline_env, tmp_path, source, n):
    corpus = _prefix(source, n, tmp_path)
    _check_run(corpus, tmp_path / "run", _run(corpus, tmp_path / "run"))


@pytest.mark.parametrize("language", ["en", *LANGUAGES])
def test_every_script_gets_a_taxonomy_with_whole_word_titles(offline_env, script_run, language):
    _check_run(FIXTURES / f"support40_{language}.csv", *script_run(language), language)


@pytest.mark.parametrize("name", ["support_en_120.csv", *OTHER_SHAPES])
def test_every_shape_gets_a_taxonomy(offline_env, tmp_path, name):
    _check_run(FIXTURES / name, tmp_path / "run", _run(FIXTURES / name, tmp_path / "run"))


# ---- a translated rubric groups as its original does --------------------------------------------


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_translation_groups_as_its_original(offline_env, script_run, language):
    (english_dir, english), (run_dir, result) = script_run("en"), script_run(language)
    assert english.exit_code == 0 and result.exit_code == 0, result.output
    english40, translated = _primaries(english_dir), _primaries(run_dir)
    assert translated.keys() == english40.keys()
    ids = sorted(english40)
    nmi = normalized_mutual_info_score([english40[i] for i in ids], [translated[i] for i in ids])
    assert nmi >= TRANSLATION_NMI, f"{language}: NMI {nmi:.3f} against the English run"


# ---- tagging against a frozen run ---------------------------------------------------------------


@pytest.fixture(scope="module")
def support_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("support") / "run"
    result = _run(SUPPORT, run_dir)
    assert result.exit_code == 0, result.output
    return run_dir


def _kept(run: dict[str, str], frozen: dict[str, str]) -> float:
    assert set(frozen) <= set(run)
    return sum(run[i] == p for i, p in frozen.items()) / len(frozen)


def test_the_runs_own_corpus_tagged_against_it_keeps_every_tag(offline_env, tmp_path, support_run):
    result = _invoke("tag", SUPPORT, "--taxonomy", support_run, "--run-dir", tmp_path / "tagged", "-q")
    assert result.exit_code == 0, result.output
    assert _kept(_primaries(support_run), _primaries(tmp_path / "tagged")) == 1.0


def test_a_subset_tagged_against_a_frozen_run_keeps_its_tags(offline_env, tmp_path, support_run):
    """Once, the first 40 rows kept 19 of 40 primary tags, 34 of them in one capability."""
    result = _invoke("tag", SUPPORT40, "--taxonomy", support_run, "--run-dir", tmp_path / "tagged", "-q")
    assert result.exit_code == 0, result.output
    frozen = _primaries(tmp_path / "tagged")
    assert len(frozen) == 40 and _kept(_primaries(support_run), frozen) >= SUBSET_KEEPS


def test_auditing_a_subset_reports_the_shares_the_run_gave_it(offline_env, tmp_path, support_run):
    """Once, `audit` reported a 62-point coverage shift for a subset of the same rubric."""
    result = _invoke("audit", SUPPORT40, "--taxonomy", support_run, "--run-dir", tmp_path / "audit", "-q")
    assert result.exit_code == 0, result.output
    shares = pl.read_csv(tmp_path / "audit" / "audit" / "shares.csv")
    subset = [p for i, p in _primaries(support_run).items() if i in set(_primaries(tmp_path / "audit"))]
    for name, share in zip(shares["capability"].to_list(), shares["share"].to_list()):
        in_run = subset.count(name) / len(subset)
        # at 95% kept, two of 40 criteria may move: 5 points either way
        assert abs(share - in_run) <= 1 - SUBSET_KEEPS + 1e-6, (name, share, in_run)


def test_a_devai_subset_tagged_against_the_devai_run_keeps_its_tags(offline_env, tmp_path):
    """Once, DevAI's first 40 criteria kept 33 of 40 primary tags."""
    run_dir = offline_devai_run(tmp_path)
    (tmp_path / "first40").mkdir()
    subset = write_pipeline(tmp_path / "first40", limit=40)
    result = _invoke("tag", subset, "--taxonomy", run_dir, "--run-dir", tmp_path / "tagged", "-q")
    assert result.exit_code == 0, result.output
    frozen = _primaries(tmp_path / "tagged")
    assert len(frozen) == 40 and _kept(_primaries(run_dir), frozen) >= SUBSET_KEEPS


# ---- the other defects, one CLI assertion each --------------------------------------------


def test_no_criterion_is_left_in_a_placeholder_group(offline_env, tmp_path):
    """Once, the first 80 rows gave 34 criteria the fallback label `unmarked` and were refused."""
    corpus = _prefix(HELDOUT / "report_writing.csv", 85, tmp_path)
    result = _run(corpus, tmp_path / "run")
    assert result.exit_code == 0, result.output
    labels = pl.read_parquet(tmp_path / "run" / "stage1_labels.parquet")
    assert "unmarked" not in json.dumps(labels.to_dicts(), ensure_ascii=False, default=str)


@pytest.mark.parametrize("language", ["ru", "el", "ar", "hi", "he"])
def test_a_spaced_script_is_read_as_words(offline_env, script_run, language):
    """Once, Cyrillic, Greek, Arabic and Devanagari rubrics got one label for every criterion,
    and the refusal read `has 0 non_examples … (nearest siblings: ), ;`."""
    run_dir, result = script_run(language)
    assert "(nearest siblings: )" not in result.output and ", ;" not in result.output
    assert result.exit_code == 0, result.output
    labels = pl.read_parquet(run_dir / "stage1_labels.parquet")
    assert labels.explode("labels")["labels"].n_unique() >= MIN_CAPS


def test_split_names_each_part_from_its_own_criteria(offline_env, tmp_path):
    """Once, a split part was named `check_for_unmarked_capability`, with an empty title."""
    run_dir = tmp_path / "run"
    _invoke("run", SUPPORT, "--provider", "offline", "--run-dir", run_dir, "-q", "--no-report")
    before = {cap["name"] for cap in _capabilities(run_dir)}
    largest = max(_capabilities(run_dir), key=lambda cap: cap["share"])["name"]
    result = _invoke("edit", run_dir, "split", largest, "--provider", "offline", "--allow-violations", "-q")
    assert result.exit_code == 0, result.output
    capabilities = _capabilities(run_dir)
    parts = [cap for cap in capabilities if cap["name"] not in before]
    assert len(parts) >= 2 and largest not in {cap["name"] for cap in capabilities}
    texts = pl.read_parquet(run_dir / "criteria.parquet")["text"].to_list()
    assert not _name_problems(parts) + _title_problems(parts, texts, None)
