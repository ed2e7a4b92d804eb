"""The Stage 1 validators hold the paper's wording: each rule catches what it should, lets the
paper's own good examples through, says how to fix the answer, and works on non-English criteria."""

from __future__ import annotations

import json

import polars as pl
import pytest

from taxonomy.config import LabelRules
from taxonomy.validate import (
    check_forbidden_tokens,
    check_generic_virtue,
    check_not_only_stop_words,
    check_rationale_grounding,
    label_problems,
)
from tests import responders
from tests.conftest import invoke, write_pipeline

RULES = LabelRules()
PAPER_GOOD = [
    "numeric_value_recomputation_capability",
    "formula_dependency_tracing_capability",
    "cross_section_consistency_checking_capability",
    "external_source_factual_lookup_capability",
    "unit_and_scale_normalization_capability",
    "qualitative_intent_interpretation_capability",
    "multi_period_completeness_auditing_capability",
    "visual_layout_inspection_capability",
]


@pytest.mark.parametrize(
    "name",
    PAPER_GOOD
    + [
        "capital_ratio_recomputation_capability",
        "data_pipeline_stage_tracing_capability",
        "consecutive_period_ordering_capability",
        "therapist_note_completeness_capability",
    ],
)
def test_the_papers_good_names_and_ordinary_words_pass(name):
    assert label_problems(name, RULES) == []


@pytest.mark.parametrize(
    "name, token, word",
    [
        ("pdfs_page_count_checking_capability", "pdf", "pdfs"),
        ("apis_endpoint_contract_checking_capability", "api", "apis"),
        ("sqlite_schema_inspection_capability", "sql", "sqlite"),
        ("jsonl_record_field_checking_capability", "json", "jsonl"),
        ("excel_workbook_check_capability", "excel", None),
    ],
)
def test_forbidden_token_anywhere_in_a_word(name, token, word):
    (message,) = check_forbidden_tokens(name, RULES)
    assert f"`{token}`" in message and (word is None or f"(in `{word}`)" in message)
    assert "restate it without naming a particular tool" in message


def test_safe_stems_are_configurable():
    rules = LabelRules(token_safe_stems=[])
    assert check_forbidden_tokens("cross_section_consistency_checking_capability", rules)
    assert not check_forbidden_tokens("cross_section_consistency_checking_capability", RULES)


@pytest.mark.parametrize(
    "name",
    [
        "overall_accuracy_check_capability",
        "good_overall_quality_capability",
        "general_correctness_verification_capability",
    ],
)
def test_generic_virtues_are_rejected_with_a_fix(name):
    (message,) = check_generic_virtue(name, RULES)
    assert "generic virtue" in message and "say which check and on what" in message


def test_name_made_only_of_stop_words():
    (message,) = check_not_only_stop_words("of_the_and_capability", RULES)
    assert "only of stop words" in message
    assert check_not_only_stop_words("numeric_value_recomputation_capability", RULES) == []


CRITERION = "The model achieves at least 85.3% accuracy on the held-out test set reported in results/metrics.json"


@pytest.mark.parametrize(
    "rationale",
    [
        'the verifier needs to read "the held-out test set" and compare',
        "the verifier needs to confirm the value 85.3 against the log",
        "the verifier needs to open results/metrics.json",
        "the verifier needs to check The Model Achieves the bar",  # case does not matter
    ],
)
def test_rationale_quoting_a_phrase_number_or_literal_passes(rationale):
    assert check_rationale_grounding(rationale, CRITERION) == []


@pytest.mark.parametrize(
    "rationale",
    [
        "the verifier needs to check the accuracy of the model on test data",  # loose shared words, no phrase
        "the verifier needs to recompute the reported score",  # a paraphrase
        "the verifier needs to check the model on the test",  # stop-word-only runs do not count
    ],
)
def test_rationale_without_a_verbatim_quote_fails_with_an_example(rationale):
    (message,) = check_rationale_grounding(rationale, CRITERION)
    assert "quote the criterion verbatim" in message and '"The model achieves"'.lower() in message.lower()


def test_rationale_rules_hold_for_chinese_and_japanese_criteria():
    zh = "模型在测试集上的准确率至少为百分之九十"
    assert check_rationale_grounding('the verifier needs to check "测试集上的准确率"', zh) == []
    (message,) = check_rationale_grounding("the verifier needs to check the accuracy", zh)
    assert '"模型在"' in message
    ja = "報告書に売上高の表が含まれている"
    assert check_rationale_grounding("the verifier needs to find 売上高の表 in the report", ja) == []
    assert check_rationale_grounding("the verifier needs to open the report", ja)
    de = "Die Tabelle enthält die Umsätze für 2023"
    assert check_rationale_grounding("the verifier needs to find „die Umsätze für“", de) == []
    assert check_rationale_grounding("the verifier needs to check 2023", de) == []


# ---- through the CLI: the LLM path re-asks, the offline path passes ----------------------------
def first_item(**changes):
    def respond(req):
        answer = responders.discovery(req.texts[0])
        answer["items"][0].update(changes)
        return answer

    return respond


def reask_text(server) -> str:
    (reask,) = [r for r in server.requests if len(r.texts) == 3]
    return reask.texts[2]


@pytest.mark.parametrize(
    "change, expected",
    [
        ({"capabilities": ["pdfs_page_count_checking_capability"]}, "`pdf` (in `pdfs`)"),
        ({"capabilities": ["overall_accuracy_check_capability"]}, "generic virtue"),
        ({"rationale": "the verifier needs to judge whether the work meets it"}, "quote the criterion verbatim"),
    ],
)
def test_each_violation_is_reasked_with_its_fix(gemini_env, tmp_path, change, expected):
    gemini_env.push(first_item(**change))
    toml = write_pipeline(tmp_path, limit=10)
    invoke("discover", toml, "--provider", "gemini", "--run-dir", tmp_path / "run", "-q")
    assert expected in reask_text(gemini_env)
    labels = pl.read_parquet(tmp_path / "run" / "stage1_labels.parquet")
    assert labels["status"].to_list() == ["ok"] * 10
    assert not set(labels["labels"].explode()) & set(change.get("capabilities", []))


def cjk_corpus(tmp_path):
    rows = [
        {
            "task_id": "报告",
            "text": "报告包含按季度划分的销售额表格",
            "category": "结构",
            "brief": "撰写一份季度销售报告。",
        },
        {
            "task_id": "报告",
            "text": "总销售额等于各季度销售额之和",
            "category": "计算",
            "brief": "撰写一份季度销售报告。",
        },
        {"task_id": "报告", "text": "图表的标题为“季度销售额”", "category": "结构", "brief": "撰写一份季度销售报告。"},
        {
            "task_id": "資料",
            "text": "資料の各ページにページ番号が付いている",
            "category": "書式",
            "brief": "社内向けの資料を作成する。",
        },
    ]
    path = tmp_path / "cjk.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    toml = tmp_path / "cjk.toml"
    toml.write_text(
        f'name = "cjk"\n[corpus]\npath = "{path}"\nformat = "table"\n[output]\ndir = "{tmp_path / "outputs"}"\n'
    )
    return toml


def test_cjk_corpus_on_the_llm_path(gemini_env, tmp_path):
    invoke("discover", cjk_corpus(tmp_path), "--provider", "gemini", "--run-dir", tmp_path / "run", "-q")
    labels = pl.read_parquet(tmp_path / "run" / "stage1_labels.parquet")
    assert labels["status"].to_list() == ["ok"] * 4
    prompts = [r.texts[0] for r in gemini_env.requests]
    assert any("结构" in p for p in prompts) and any("報告" not in p and "資料" in p for p in prompts)


def test_cjk_corpus_on_the_offline_path(offline_env, tmp_path):
    from taxonomy.stages.discover import item_problems

    invoke("discover", cjk_corpus(tmp_path), "--run-dir", tmp_path / "run", "-q")
    labels = pl.read_parquet(tmp_path / "run" / "stage1_labels.parquet").join(
        pl.read_parquet(tmp_path / "run" / "criteria.parquet").select("criterion_id", "text"), on="criterion_id"
    )
    for row in labels.iter_rows(named=True):
        if row["status"] == "ok":
            assert item_problems(row["labels"], row["rationale"], row["text"], RULES) == []
        else:
            assert row["problems"]  # never silently kept
    assert labels.filter(pl.col("status") == "ok").height >= 3


def test_a_literal_counts_only_whole():
    criterion = 'The flag "x" is set in config.yaml'
    assert check_rationale_grounding(
        "the verifier needs to check the exact value", criterion
    )  # "x" inside "exact" is no quote
    assert check_rationale_grounding("the verifier needs to open config.yaml", criterion) == []
    assert check_rationale_grounding("the verifier needs to open myconfig.yaml.bak", criterion)
