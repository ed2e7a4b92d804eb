"""Re-asks keep the best answer per criterion: an item answered validly in any attempt is kept."""
from __future__ import annotations

import polars as pl

from tests import responders
from tests.conftest import invoke, write_pipeline

N = 10  # DevAI's first criteria


def test_item_valid_in_attempt_1_and_dropped_in_attempt_2_is_kept(gemini_env, tmp_path):
    def respond(req):
        answer = responders.discovery(req.texts[0])
        if len(req.texts) == 1:  # attempt 1: criterion 0 valid, criterion 1 breaks a rule
            answer["items"][1]["capabilities"] = ["excel_workbook_check_capability"]
        else:  # attempt 2: criterion 1 fixed, criterion 0 dropped
            answer["items"] = answer["items"][1:]
        return answer

    gemini_env.responder = respond
    toml = write_pipeline(tmp_path, limit=N)
    invoke("discover", toml, "--provider", "gemini", "--run-dir", tmp_path / "run", "-q")
    labels = pl.read_parquet(tmp_path / "run" / "stage1_labels.parquet")
    assert labels["status"].to_list() == ["ok"] * N
    first_text = pl.read_parquet(tmp_path / "run" / "criteria.parquet")["text"][0]
    asked = next(r.texts[0] for r in gemini_env.requests if first_text in r.texts[0])  # the batch holding criterion 0
    assert labels["attempts"][0] == 2 and labels["labels"][0].to_list() == responders.discovery(asked)["items"][0]["capabilities"]
    assert "excel_workbook_check_capability" not in labels["labels"].explode().to_list()
    # Two calls per batch: the second attempt completed the answer, no third was needed.
    assert gemini_env.count("generate") == 2 * len({r.texts[0] for r in gemini_env.requests})


def test_item_broken_in_every_attempt_still_fails(gemini_env, tmp_path):
    def respond(req):
        answer = responders.discovery(req.texts[0])
        answer["items"][1]["capabilities"] = ["excel_workbook_check_capability"]
        if len(req.texts) > 1:
            answer["items"] = answer["items"][1:]
        return answer

    gemini_env.responder = respond
    invoke("discover", write_pipeline(tmp_path, limit=5), "--provider", "gemini", "--run-dir", tmp_path / "run", "-q")
    labels = pl.read_parquet(tmp_path / "run" / "stage1_labels.parquet")  # DevAI's first task: one batch of 5
    assert labels["status"].to_list() == ["ok", "failed", "ok", "ok", "ok"]
    assert "`excel`" in labels["problems"][1][0]
