from pathlib import Path

import polars as pl
import pytest

from taxonomy.analysis.audit import (
    UNTAGGED,
    AuditResult,
    audit_coverage,
    bundled_criteria,
    capability_shares,
    count_checks,
    join_tags,
    low_fit_criteria,
    missing_capabilities,
    near_duplicates,
    task_capability_matrix,
)
from taxonomy.schemas import Taxonomy, TaxonomyCapability
from tests import run_fixture
from tests.conftest import ROOT, invoke, support_csv


@pytest.fixture(autouse=True)
def _in_a_folder_of_its_own(tmp_path, monkeypatch):
    """Commands write their answer cache under ./outputs: each test runs in its own folder, never the checkout."""
    monkeypatch.chdir(tmp_path)


A, B, C = "file_check_capability", "code_review_capability", "metric_check_capability"


def _tax(shares=(0.5, 0.3, 0.2)) -> Taxonomy:
    caps = [
        TaxonomyCapability(
            name=n, description="d", diagnostic_signal="s", example_pattern="e", non_examples=[], members=[], share=s
        )
        for n, s in zip((A, B, C), shares)
    ]
    return Taxonomy(capabilities=caps)


def _frames(rows):
    """rows: (task, criterion id, text, primary, score) → criteria, tags."""
    criteria = pl.DataFrame(
        {"task_id": [r[0] for r in rows], "criterion_id": [r[1] for r in rows], "text": [r[2] for r in rows]}
    )
    tags = pl.DataFrame(
        {
            "criterion_id": [r[1] for r in rows],
            "tags": [[r[3]] if r[3] else [] for r in rows],
            "primary": [r[3] for r in rows],
            "score": [r[4] for r in rows],
        },
        schema_overrides={"primary": pl.Utf8, "score": pl.Float64, "tags": pl.List(pl.Utf8)},
    )
    return criteria, tags


ROWS = [
    ("t1", "c1", "The model is saved as model.pt.", A, 0.9),
    ("t1", "c2", "The model class is defined in src/model.py.", B, 0.8),
    ("t1", "c3", "Accuracy is reported.", C, 0.7),
    ("t2", "c4", "The predictions are saved as preds.csv.", A, 0.9),
    ("t2", "c5", "The loss function is implemented in src/loss.py.", B, 0.85),
    ("t3", "c6", "The plot is saved as plot.png.", A, 0.95),
    ("t3", "c7", "The code is pleasant.", B, 0.1),  # fits nothing well
    ("t3", "c8", "Nothing here.", None, None),  # Stage 3 failed
]


def test_shares_beside_reference():
    criteria, tags = _frames(ROWS)
    shares = capability_shares(join_tags(criteria, tags), [A, B, C], {A: 0.5, B: 0.3, C: 0.2})
    got = {r["capability"]: r for r in shares.iter_rows(named=True)}
    assert got[A]["n"] == 3 and got[A]["share"] == pytest.approx(3 / 8)
    assert got[A]["diff"] == pytest.approx(3 / 8 - 0.5)
    assert got[C]["share"] == pytest.approx(1 / 8) and got[C]["reference_share"] == 0.2
    # The failed criterion is its own row so the shares still add up to one.
    assert got[UNTAGGED]["n"] == 1 and got[UNTAGGED]["reference_share"] is None
    assert shares["share"].sum() == pytest.approx(1.0)


def test_task_matrix_and_missing_capability():
    criteria, tags = _frames(ROWS)
    matrix = task_capability_matrix(join_tags(criteria, tags), [A, B, C])
    assert matrix["task_id"].to_list() == ["t1", "t2", "t3"]
    assert matrix.row(0) == ("t1", 1, 1, 1) and matrix.row(2) == ("t3", 1, 1, 0)
    # C is in 1 of 3 tasks: below 0.5, so its absence is no gap; A and B are in every task.
    assert missing_capabilities(matrix, missing_share=0.5).rows() == []
    # At a lower bar C counts as common and t2, t3 miss it.
    low = missing_capabilities(matrix, missing_share=0.3)
    assert low.select("task_id", "capability").rows() == [("t2", C), ("t3", C)]
    assert low["prevalence"][0] == pytest.approx(1 / 3)


def test_missing_capability_found():
    rows = [(f"t{i}", f"c{i}{j}", "x", cap, 0.9) for i in range(4) for j, cap in enumerate((A, B))]
    rows = [r for r in rows if not (r[0] == "t3" and r[3] == B)]  # t3 lacks B, which 3/4 tasks have
    criteria, tags = _frames(rows)
    matrix = task_capability_matrix(join_tags(criteria, tags), [A, B, C])
    assert missing_capabilities(matrix, 0.5).select("task_id", "capability").rows() == [("t3", B)]


def test_low_fit_criteria():
    criteria, tags = _frames(ROWS)
    low = low_fit_criteria(join_tags(criteria, tags), none_threshold=0.5)
    assert low["criterion_id"].to_list() == ["c8", "c7"]  # untagged first (null score), then by score
    assert low["reason"].to_list() == ["untagged", "score < 0.5"]
    assert low.filter(pl.col("criterion_id") == "c7")["text"][0] == "The code is pleasant."


def test_low_fit_without_score_column_lists_only_untagged():
    criteria, tags = _frames(ROWS)
    low = low_fit_criteria(join_tags(criteria, tags.drop("score")), none_threshold=0.5)
    assert low["criterion_id"].to_list() == ["c8"]


def test_near_duplicates_within_task_only():
    criteria = pl.DataFrame(
        {
            "task_id": ["t1", "t1", "t1", "t2"],
            "criterion_id": ["a", "b", "c", "d"],
            "text": [
                "The LSTM model is implemented in src/model.py.",
                "The LSTM model is implemented in the file src/model.py.",
                "Accuracy on the test split is reported.",
                "The LSTM model is implemented in src/model.py.",
            ],  # same text, other task: not a pair
        }
    )
    dups = near_duplicates(criteria, dup_threshold=0.8)
    assert dups.select("task_id", "criterion_a", "criterion_b").rows() == [("t1", "a", "b")]
    assert dups["similarity"][0] >= 0.8
    assert near_duplicates(criteria, dup_threshold=0.999).height == 0


def test_near_duplicates_need_same_numbers_and_context():
    text = "An MLP of width {} is trained with learning rate 1E-4 on the convection problem."
    criteria = pl.DataFrame(
        {
            "task_id": ["t"] * 4,
            "criterion_id": ["w50", "w100", "w50-again", "w50-other-parent"],
            "text": [text.format(50), text.format(100), text.format(50), text.format(50)],
            "context": ["root > A", "root > A", "root > A", "root > B"],
        }
    )
    # Template twins differing in one number are separate checks; other parents are other scopes.
    assert near_duplicates(criteria, 0.9).select("criterion_a", "criterion_b").rows() == [("w50", "w50-again")]
    pairs = lambda **kw: near_duplicates(criteria, 0.5, **kw).select("criterion_a", "criterion_b").rows()  # noqa: E731
    assert ("w50", "w100") in pairs(same_numbers=False) and ("w50", "w100") not in pairs()


@pytest.mark.parametrize(
    "text, bundled",
    [
        ("The model is saved as model.pt.", False),
        ("The query and value matrices are adapted.", False),  # coordinated nouns: one check
        ("Results are plotted, e.g. as a bar chart.", False),
        ("The F1 score is computed and saved as f1.txt.", True),
        ("The loss is logged; the plot is saved.", True),
        ("The model is trained. The checkpoint is in models/.", True),
        ("The report lists precision, recall, and F1.", True),
        ("The report lists precision, recall and F1.", True),
        ("Top-1 and Top-5 accuracy are reported.", False),
        ("The script (1) loads data (2) trains (3) evaluates.", True),
    ],
)
def test_count_checks(text, bundled):
    n, cues = count_checks(text)
    assert (n >= 2) == bundled, (n, cues)


def test_bundled_by_close_scores():
    joined = pl.DataFrame(
        {
            "criterion_id": ["x", "y"],
            "task_id": ["t", "t"],
            "text": ["One check.", "One check too."],
            "tags": [[A, B], [A, B]],
            "scores": [[0.81, 0.78], [0.9, 0.3]],
        }
    )
    out = bundled_criteria(joined, close_margin=0.1)
    assert out["criterion_id"].to_list() == ["x"]
    assert "close scores" in out["reason"][0] and A in out["reason"][0]


def test_audit_coverage_end_to_end_on_fixture():
    tax = run_fixture.taxonomy()
    res = audit_coverage(run_fixture.criteria(), run_fixture.tags(), tax, None, none_threshold=0.5)
    assert isinstance(res, AuditResult)
    # Reference shares default to the taxonomy's own.
    ref = dict(zip(res.shares["capability"], res.shares["reference_share"]))
    assert ref[tax.capabilities[0].name] == pytest.approx(tax.capabilities[0].share)
    assert set(res.unmapped["criterion_id"]) == {"t3-c4", "t4-c3", "t5-c2"}
    assert res.duplicates.select("criterion_a", "criterion_b").rows() == [("t3-c1", "t3-c2")]
    assert "t2-c2" in res.bundled["criterion_id"].to_list()
    missing = res.missing.select("task_id", "capability").rows()
    assert missing == [("t5_agent", "file_artifact_inspection_capability")]
    md = res.to_markdown()
    assert md.startswith("# Coverage audit") and "## Near-duplicate criteria within a task" in md
    assert md.count("\n## ") == 6


def test_audit_and_breakdown_print_shares_in_one_format():
    from taxonomy.analysis.breakdown import to_markdown

    tax = run_fixture.taxonomy()
    res = audit_coverage(run_fixture.criteria(), run_fixture.tags(), tax, None, none_threshold=0.5)
    md = res.to_markdown()
    first = res.shares.row(0, named=True)
    # The same cells `taxonomy breakdown` prints for a share: percent with one decimal.
    expected = to_markdown(res.shares.head(1), pct_cols=["share", "reference_share", "diff"]).splitlines()[-1]
    assert expected in md and f"| {100 * first['share']:.1f} |" in expected
    assert f"| {first['share']:.3f} |" not in md


# ---- "fits no capability", calibrated on the run's own corpus --------------------------------
@pytest.fixture(scope="module")
def devai_split(tmp_path_factory):
    """A key-less run on DevAI without one task in five; those tasks' criteria are the run's own held-out ones."""
    import zlib

    from taxonomy.config import load_config
    from taxonomy.corpus import load_corpus
    from tests.conftest import invoke

    root = Path(__file__).resolve().parents[1]
    cfg = load_config(root / "pipelines" / "devai.toml")
    frame = load_corpus(cfg.corpus, cfg.base_dir).frame.select(pl.col("task_id").cast(pl.Utf8), criterion="text")
    held = pl.Series([zlib.crc32(t.encode()) % 5 == 0 for t in frame["task_id"].to_list()])
    work = tmp_path_factory.mktemp("audit")
    frame.filter(~held).write_csv(work / "devai_run.csv")
    frame.filter(held).write_csv(work / "devai_held_out.csv")
    invoke("run", str(work / "devai_run.csv"), "--provider", "offline", "--run-dir", str(work / "run"), "-q")
    return work


def _audit(work: Path, corpus: Path, name: str) -> tuple[pl.DataFrame, int, str]:
    from tests.conftest import invoke

    out = work / name
    result = invoke(
        "audit", str(corpus), "--taxonomy", str(work / "run"), "--provider", "offline", "--run-dir", str(out)
    )
    n = pl.read_parquet(out / "criteria.parquet").height
    return pl.read_csv(out / "audit" / "unmapped.csv"), n, result.output


def test_audit_flags_a_foreign_corpus_and_few_of_the_runs_own(devai_split):
    foreign = Path(__file__).resolve().parents[1] / "benchmarks" / "heldout" / "report_writing.csv"
    flagged, n, output = _audit(devai_split, foreign, "foreign")
    assert flagged.height >= 0.8 * n, (flagged.height, n)
    own, n_own, _ = _audit(devai_split, devai_split / "devai_held_out.csv", "own")
    assert own.height <= 0.1 * n_own, (own.height, n_own)
    # The audit says what the flag means, how it was calibrated, and lists the criteria to act on.
    assert f"Fit no capability: {flagged.height} of {n} criteria" in output
    assert "quantile of the same rank" in output and "held out from the fit" in output
    assert flagged["text"][0] in (devai_split / "foreign" / "audit" / "audit.md").read_text()


def test_audit_calibration_is_saved_stamped_and_refitted_when_stale(devai_split):
    import json

    saved = devai_split / "run" / "novelty.json"
    assert saved.is_file()  # the audits above fitted it once, beside the tagger
    data = json.loads(saved.read_text())
    assert data["fitted_for"]["alpha"] == 0.1 and data["calibrated_on"] > 200
    assert 0 < data["held_out_flagged"] <= 0.1
    data["fitted_for"]["corpus"] = "another corpus"
    data["threshold"] = 2.0  # a stale calibration that would flag everything
    saved.write_text(json.dumps(data))
    own, n_own, _ = _audit(devai_split, devai_split / "devai_held_out.csv", "own-again")
    assert own.height <= 0.1 * n_own
    assert json.loads(saved.read_text())["fitted_for"]["corpus"] != "another corpus"


# ---- with a model: "no capability fits" is an answer ------------------------------------------
FOREIGN_WORDS = ("report", "citation", "sources", "policy")


def _audit_model(req) -> dict:
    """Answers audit prompts by content: a criterion about reports and sources fits none of DevAI's capabilities."""
    from tests import responders

    prompt = req.texts[0]
    if "Criteria to audit" not in prompt:
        return responders.model(req)
    answer = responders.tagging(prompt.replace("Criteria to audit", "Criteria to tag"))
    texts = dict(responders.criteria(prompt))
    for item in answer["items"]:
        if any(w in texts[item["criterion_idx"]].lower() for w in FOREIGN_WORDS):
            item.update(
                capabilities=[], none_reason="It checks a written report's sourcing, which no capability covers."
            )
    return answer


def test_audit_with_a_model_answers_that_no_capability_fits(tmp_path, llm_exported_run, monkeypatch):
    from tests.conftest import API_KEY, copy_run, invoke
    from tests.fake_gemini import FakeGeminiServer

    run = copy_run(llm_exported_run, tmp_path)
    corpus = tmp_path / "mixed.csv"
    pl.DataFrame(
        {
            "task_id": ["r", "r", "d", "d"],
            "criterion": [
                "The report cites its sources for every figure.",
                "The policy recommendations follow from the evidence.",
                "The trained model is saved under models/saved_models/.",
                "The confusion matrix is saved as results/figures/confusion_matrix.png.",
            ],
        }
    ).write_csv(corpus)
    with FakeGeminiServer(responder=_audit_model) as srv:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", srv.url)
        monkeypatch.setenv("GEMINI_API_KEY", API_KEY)
        monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
        invoke("audit", corpus, "--taxonomy", run, "--provider", "gemini", "--run-dir", tmp_path / "audit", "-q")
    flagged = pl.read_csv(tmp_path / "audit" / "audit" / "unmapped.csv")
    by_text = dict(zip(flagged["text"], flagged["reason"]))
    assert by_text["The report cites its sources for every figure."].startswith("the model: It checks a written")
    assert "the model:" in by_text["The policy recommendations follow from the evidence."]
    devai = pl.read_csv(corpus)["criterion"].to_list()[2:]
    assert not any("the model:" in by_text.get(t, "") for t in devai)
    audit_md = (tmp_path / "audit" / "audit" / "audit.md").read_text()
    assert "which no capability covers" in audit_md


@pytest.mark.slow  # a full run
def test_audit_takes_the_run_directory_and_prints_no_merge_note(offline_run, here, offline_env):
    support_csv(here / "small.csv", 20)  # under the size whose merge bounds a run relaxes
    by_dir = invoke("audit", "small.csv", "--taxonomy", offline_run, "-q")
    assert "# Coverage audit" in by_dir.output and "merge" not in by_dir.output.lower()
    by_file = invoke("audit", "small.csv", "--taxonomy", offline_run / "taxonomy.json", "-q")
    assert by_file.output == by_dir.output
    tagged = invoke("tag", "small.csv", "--taxonomy", offline_run, "-q")  # tag takes it alike
    assert "Share of criteria by primary capability" in tagged.output and "merge" not in tagged.output.lower()


def test_audit_of_a_corpus_against_the_frozen_taxonomy(offline_run, offline_env, tmp_path):
    result = invoke(
        "audit",
        ROOT / "pipelines" / "paperbench.toml",
        "--taxonomy",
        offline_run / "taxonomy.json",
        "--run-dir",
        tmp_path / "audit-run",
        "-q",
    )
    assert "# Coverage audit" in result.output
    shares = pl.read_csv(tmp_path / "audit-run" / "audit" / "shares.csv")
    assert abs(shares["share"].sum() - 1) < 1e-6 and "reference_share" in shares.columns
    for name in ("task_matrix", "missing", "unmapped", "duplicates", "bundled"):
        assert (tmp_path / "audit-run" / "audit" / f"{name}.csv").exists()
