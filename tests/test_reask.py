"""Re-asks: Stage 1 keeps the best answer per criterion (an item answered validly in any attempt is kept), and a
membership re-ask at the merge is a small fresh request carrying the candidates' shares, the rules, the previous
answer and its violations, not the whole conversation again: the merge stage stays within 1.5x the prompt
tokens of its first call."""

from __future__ import annotations

import json

import polars as pl
import pytest

from tests import responders
from tests.conftest import invoke, llm_devai_named, write_pipeline

pytestmark = pytest.mark.slow  # runs through the SDK

N = 10  # DevAI's first criteria


def test_item_valid_in_attempt_1_and_dropped_in_attempt_2_is_kept(gemini_env, tmp_path):
    kept_first: list[tuple[str, str]] = []  # (prompt, first criterion's text) of every batch whose attempt 2 drops it

    def respond(req):
        answer = responders.discovery(req.texts[0])
        found = responders.criteria(req.texts[0])
        if len(found) < 2:  # batches are per (task, rubric category): some hold one criterion
            return answer
        if len(req.texts) == 1:  # attempt 1: criterion 0 valid, criterion 1 breaks a rule
            answer["items"][1]["capabilities"] = ["excel_workbook_check_capability"]
            kept_first.append((req.texts[0], found[0][1]))
        else:  # attempt 2: criterion 1 fixed, criterion 0 dropped
            answer["items"] = answer["items"][1:]
        return answer

    gemini_env.responder = respond
    toml = write_pipeline(tmp_path, limit=N)
    invoke("discover", toml, "--provider", "gemini", "--run-dir", tmp_path / "run", "-q")
    labels = pl.read_parquet(tmp_path / "run" / "stage1_labels.parquet")
    assert labels["status"].to_list() == ["ok"] * N
    assert kept_first, "no batch of two or more criteria: the test corpus must have one"
    text_of = dict(pl.read_parquet(tmp_path / "run" / "criteria.parquet").select("criterion_id", "text").iter_rows())
    texts = [text_of[c] for c in labels["criterion_id"]]
    for asked, text in kept_first:  # valid in attempt 1, missing from attempt 2: attempt 1's labels are kept
        row = next(i for i, t in enumerate(texts) if t.strip() in text)
        first = responders.discovery(asked)["items"][0]["capabilities"]
        assert labels["attempts"][row] == 2 and labels["labels"][row].to_list() == first
    assert "excel_workbook_check_capability" not in labels["labels"].explode().to_list()
    # No batch needed a third call: the second attempt completed every answer.
    assert gemini_env.count("generate") <= 2 * len({r.texts[0] for r in gemini_env.requests})


def test_item_broken_in_every_attempt_still_fails(gemini_env, tmp_path):
    broken: set[str] = set()

    def respond(req):
        answer = responders.discovery(req.texts[0])
        found = responders.criteria(req.texts[0])
        if len(found) < 2:  # one-criterion batches are answered validly
            return answer
        answer["items"][1]["capabilities"] = ["excel_workbook_check_capability"]
        broken.add(found[1][1])
        if len(req.texts) > 1:
            answer["items"] = answer["items"][1:]
        return answer

    gemini_env.responder = respond
    invoke("discover", write_pipeline(tmp_path, limit=N), "--provider", "gemini", "--run-dir", tmp_path / "run", "-q")
    labels = pl.read_parquet(tmp_path / "run" / "stage1_labels.parquet")
    text_of = dict(pl.read_parquet(tmp_path / "run" / "criteria.parquet").select("criterion_id", "text").iter_rows())
    assert broken, "no batch of two or more criteria: the test corpus must have one"
    expected = ["failed" if any(text_of[c].strip() in b for b in broken) else "ok" for c in labels["criterion_id"]]
    assert labels["status"].to_list() == expected and "ok" in expected
    failed_at = expected.index("failed")
    assert "`excel`" in labels["problems"][failed_at][0]


def _giant_first(times: int):
    """The first `times` membership answers put nearly half the criteria into one capability."""
    broken: list[int] = []

    def respond(req):
        answer = responders.model(req)
        if responders.kind(req.texts[0]) in ("merge", "regroup") and len(broken) < times:
            broken.append(1)
            caps = answer["capabilities"]
            for c in caps[1:5]:
                caps[0]["member_input_names"] += c["member_input_names"][1:]
                c["member_input_names"] = c["member_input_names"][:1]
        return answer

    return respond


@pytest.mark.parametrize("faults", [1, 2])
def test_a_membership_reask_is_a_small_fresh_request(gemini_env, tmp_path, faults):
    gemini_env.responder = _giant_first(faults)
    run_dir = llm_devai_named(tmp_path)  # only the merge and the tagging are sent
    invoke("run", tmp_path / "devai.toml", "--provider", "gemini", "--run-dir", run_dir, "-q", "--no-report")
    merges = [
        r for r in gemini_env.requests if r.kind == "generate" and responders.kind(r.texts[0]) in ("merge", "regroup")
    ]
    assert len(merges) == faults + 1 and all(len(r.texts) == 1 for r in merges)  # never the conversation again
    for req in merges[1:]:
        text = req.texts[0]
        assert (
            "more than 40%" in text
            and "Your previous grouping" in text
            and "What was wrong:" in text
            and "40%" in text.split("What was wrong:")[1]
        )
        assert (
            "Signal:" not in text and "Everything `" not in text
        )  # neither the candidates' cards nor the capabilities' again
    taxonomy = json.loads((run_dir / "taxonomy.json").read_text())
    assert taxonomy["repairs"] == [] and max(c["share"] for c in taxonomy["capabilities"]) <= 0.40
    ledger = [json.loads(line) for line in (run_dir / "usage.jsonl").read_text().splitlines()]
    tokens = [e["prompt_tokens"] for e in ledger if e["stage"] == "merge"]
    print(
        f"merge prompt tokens with {faults} membership fault(s): {tokens}, {sum(tokens) / tokens[0]:.2f}x the first "
        "call"
    )
    if faults == 1:
        assert sum(tokens) <= 1.5 * tokens[0], tokens  # membership, its re-ask, boundaries
    assert sum(tokens) <= (1 + 0.4 * faults + 0.2) * tokens[0], tokens
