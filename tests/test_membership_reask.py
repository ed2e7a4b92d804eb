"""A membership re-ask carries the candidates' shares, the rules, the previous answer and its violations,
not the whole conversation again: the merge stage stays within 1.5x the prompt tokens of its first call."""

from __future__ import annotations

import json

import pytest

from tests import responders
from tests.conftest import invoke, write_pipeline


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
    run_dir = tmp_path / "run"
    invoke("run", write_pipeline(tmp_path), "--provider", "gemini", "--run-dir", run_dir, "-q", "--no-report")
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
