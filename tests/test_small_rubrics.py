"""Small rubrics: the merge bounds hold wherever they can, and where a rubric's distinct criteria cannot meet
them the run says why in one line and still writes the taxonomy it can, exit 0, with or without a key."""

from __future__ import annotations

import json
import random
import tomllib
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import ROOT, invoke


@pytest.fixture(autouse=True)
def _in_a_folder_of_its_own(tmp_path, monkeypatch):
    """Commands write their answer cache under ./outputs: each test runs in its own folder, never the checkout."""
    monkeypatch.chdir(tmp_path)


SUPPORT = ROOT / "tests" / "fixtures" / "scripts" / "support_en_120.csv"
HELDOUT = ROOT / "benchmarks" / "heldout"


def _slice(n: int, folder: Path) -> Path:
    path = folder / f"support_first{n}.csv"
    pl.read_csv(SUPPORT).head(n).write_csv(path)
    return path


def _shares(run_dir: Path) -> list[float]:
    primary = pl.read_parquet(run_dir / "stage3_tags.parquet")["primary"]
    return primary.value_counts(normalize=True)["proportion"].to_list()


def test_forty_criteria_make_eight_to_ten_capabilities_under_forty_percent(offline_env, tmp_path):
    """The first 40 rows got 2 capabilities holding 85% and 15% under the relaxed bounds."""
    run_dir = tmp_path / "run"
    result = invoke("run", _slice(40, tmp_path), "--run-dir", run_dir, "-q", "--no-report")
    shares = _shares(run_dir)
    assert 8 <= len(shares) <= 10 and max(shares) <= 0.40 and min(shares) >= 0.02, shares
    assert "merge" not in tomllib.loads((run_dir / "pipeline.toml").read_text()), "no relaxed bounds"
    assert "cannot make" not in result.output and "relaxed" not in result.output


def test_a_slice_that_was_refused_runs(offline_env, tmp_path):
    """The first 80 rows: 34 criteria got the fallback label `unmarked`, which held 42.5%, and the run exited 2."""
    run_dir = tmp_path / "run"
    invoke("run", _slice(80, tmp_path), "--run-dir", run_dir, "-q", "--no-report")
    labels = pl.read_parquet(run_dir / "stage1_labels.parquet")["labels"].explode()
    assert "unmarked" not in " ".join(labels.to_list()) and labels.n_unique() >= 20
    assert max(_shares(run_dir)) <= 0.40


def test_a_rubric_too_small_for_the_bounds_says_why_and_gets_its_taxonomy(offline_env, tmp_path):
    run_dir = tmp_path / "run"
    result = invoke("run", _slice(5, tmp_path), "--run-dir", run_dir, "--no-report")
    notes = [line for line in result.output.splitlines() if "cannot make 8-10" in line]
    assert len(notes) == 1 and "5 criteria" in notes[0] and "so this run allows 5 capabilities" in notes[0], notes
    taxonomy = json.loads((run_dir / "taxonomy.json").read_text())
    assert len(taxonomy["capabilities"]) == 5 and not taxonomy.get("violations")
    # The TOML keeps the configured bounds: a run takes them again from whatever corpus it reads.
    assert "merge" not in tomllib.loads((run_dir / "pipeline.toml").read_text())
    settings = json.loads((run_dir / "manifest.json").read_text())["settings"]["merge"]
    assert (settings["min_caps"], settings["max_caps"]) == (5, 5)


# ---- few distinct criteria: the bounds follow them, on both paths ---------------------------------

TEMPLATES = (
    "The agent looks up the order before answering.",
    "The agent refunds the fee when the charge was wrong.",
    "The agent asks the customer for the order number.",
    "The response is polite and brief.",
)


def _rubric(folder: Path, rows: list[tuple[str, str]], name: str = "rubric.csv") -> Path:
    path = folder / name
    pl.DataFrame({"task_id": [t for t, _ in rows], "criterion": [c for _, c in rows], "weight": 1}).write_csv(path)
    return path


def _bounds_notes(output: str) -> list[str]:
    return [line for line in output.splitlines() if "cannot make" in line]


@pytest.fixture(params=["offline", "gemini"])
def backend(request) -> str:
    """Each path in turn: key-less, and Gemini through the real SDK against the local test server."""
    request.getfixturevalue("offline_env" if request.param == "offline" else "gemini_env")
    return request.param


def test_templates_repeated_over_tasks_make_one_capability_each(backend, tmp_path):
    """Four checks repeated over ten tasks: no empty capability, one line on why there are four."""
    corpus = _rubric(tmp_path, [(f"t{i}", text) for i in range(10) for text in TEMPLATES])
    run_dir = tmp_path / "run"
    result = invoke("run", corpus, "--provider", backend, "--run-dir", run_dir, "-q", "--no-report")
    notes = _bounds_notes(result.output)
    assert len(notes) == 1 and "4 distinct criteria (40 rows)" in notes[0] and "allows 4 capabilities" in notes[0]
    capabilities = json.loads((run_dir / "taxonomy.json").read_text())["capabilities"]
    assert [c["share"] for c in capabilities] == [0.25] * 4, capabilities


def test_a_one_criterion_rubric_gets_one_capability_without_boundaries(backend, tmp_path):
    corpus = _rubric(tmp_path, [("t1", "The agent refunds the fee.")])
    run_dir = tmp_path / "run"
    result = invoke("run", corpus, "--provider", backend, "--run-dir", run_dir, "-q", "--no-report")
    assert "non_examples" not in result.output and len(_bounds_notes(result.output)) == 1
    (capability,) = json.loads((run_dir / "taxonomy.json").read_text())["capabilities"]
    assert capability["share"] == 1.0 and capability["non_examples"] == []
    assert "1 capability over 1 criterion;" in (run_dir / "taxonomy.md").read_text()


def _random_rubric(seed: int, folder: Path) -> tuple[Path, int]:
    """8-10 criteria drawn from the bundled held-out corpora (any language), some repeated, over 1-3 tasks."""
    rng = random.Random(seed)
    pool = [t for p in sorted(HELDOUT.glob("*.csv")) for t in pl.read_csv(p)["criterion"].to_list()]
    chosen = rng.sample(pool, rng.randint(8, 10))
    if seed % 2:
        chosen = [rng.choice(chosen[:3]) if rng.random() < 0.4 else c for c in chosen]
    rows = [(f"t{rng.randint(1, 3)}", c) for c in chosen]
    return _rubric(folder, rows, f"random{seed}.csv"), len(set(chosen))


@pytest.mark.parametrize("seed", range(6))
def test_a_random_small_rubric_gets_as_many_capabilities_as_its_distinct_criteria_allow(offline_env, tmp_path, seed):
    """14 of 25 such rubrics were refused: capabilities left empty, two distinct criteria read as one."""
    corpus, distinct = _random_rubric(seed, tmp_path)
    run_dir = tmp_path / "run"
    invoke("run", corpus, "--run-dir", run_dir, "-q", "--no-report")
    capabilities = json.loads((run_dir / "taxonomy.json").read_text())["capabilities"]
    assert min(8, distinct) <= len(capabilities) <= min(10, distinct), (distinct, capabilities)
    primaries = pl.read_parquet(run_dir / "stage3_tags.parquet")["primary"].to_list()
    assert {c["name"] for c in capabilities} == set(primaries), "every capability holds a criterion"


@pytest.mark.parametrize("seed", range(3))
def test_a_random_small_rubric_runs_through_the_model_too(gemini_env, tmp_path, seed):
    corpus, distinct = _random_rubric(seed, tmp_path)
    run_dir = tmp_path / "run"
    invoke("run", corpus, "--provider", "gemini", "--run-dir", run_dir, "-q", "--no-report")
    capabilities = json.loads((run_dir / "taxonomy.json").read_text())["capabilities"]
    assert 1 <= len(capabilities) <= distinct and all(c["share"] > 0 for c in capabilities)


@pytest.mark.parametrize(
    "criteria",
    [
        # two Thai criteria with no word in common
        ["เอเจนต์ เปรียบเทียบ ที่อยู่ลูกค้า พร้อมลิงก์", "คำตอบ ยืนยัน เงื่อนไขการรับประกัน อย่างชัดเจน"],
        # two kana criteria that differ only in their verb, and one in English
        [
            "レポートはリンクつきで ポイントを せつめいする。",
            "レポートはリンクつきで ポイントを ていじする。",
            "The agent quotes the cancellation policy without jargon!",
        ],
    ],
    ids=["thai_two", "kana_three"],
)
def test_two_or_three_criteria_in_any_script_get_one_capability_each(offline_env, tmp_path, criteria):
    corpus = _rubric(tmp_path, [("t1", c) for c in criteria])
    run_dir = tmp_path / "run"
    invoke("run", corpus, "--provider", "offline", "--run-dir", run_dir, "-q", "--no-report")
    assert sorted(_shares(run_dir)) == pytest.approx([1 / len(criteria)] * len(criteria))


def test_criteria_that_differ_only_in_their_numbers_are_one_check(offline_env, tmp_path):
    rows = [(f"t{i % 3}", f"The reply gives fact number {i} about the order.") for i in range(1, 10)]
    run_dir = tmp_path / "run"
    result = invoke("run", _rubric(tmp_path, rows), "--provider", "offline", "--run-dir", run_dir, "-q", "--no-report")
    assert "RuntimeWarning" not in result.output
    assert _shares(run_dir) == [1.0] and len(_bounds_notes(result.output)) == 1
