"""A rationale that quotes a term the criterion puts in quotes is grounded, whatever quote marks either
uses; apostrophes inside or after words are not quote marks; the Stage 1 prompt says the same."""

from __future__ import annotations

import pytest

from taxonomy.config import LabelRules
from taxonomy.prompts import render
from taxonomy.validate import check_rationale_grounding, criterion_literals

CRITERIA = {
    "single": "The report notes 'direct correlations' between the series.",
    "double": 'The report notes "direct correlations" between the series.',
    "curly double": "The report notes “direct correlations” between the series.",
    "curly single": "The report notes ‘direct correlations’ between the series.",
    "backticks": "The report notes `direct correlations` between the series.",
}


@pytest.mark.parametrize("style", sorted(CRITERIA))
@pytest.mark.parametrize(
    "rationale",
    [
        'the verifier needs to confirm that "direct correlations" are named',
        "the verifier needs to confirm that 'Direct correlations' are named",
        "the verifier needs to confirm that ‘direct correlations’ are named",
    ],
)
def test_a_quoted_term_grounds_the_rationale_in_any_quote_style(style, rationale):
    assert check_rationale_grounding(rationale, CRITERIA[style]) == []


@pytest.mark.parametrize("style", sorted(CRITERIA))
def test_a_paraphrase_of_the_quoted_term_still_fails(style):
    assert check_rationale_grounding(
        "the verifier needs to confirm that correlations which are direct are named", CRITERIA[style]
    )


def test_apostrophes_are_not_quote_marks():
    literals = criterion_literals(
        "The agent's plan doesn't list the 'risk register' or the owners' names, and 'it's done' is said."
    )
    assert {"risk register", "it's done"} <= literals
    assert not any(lit.startswith(("s plan", "t list", "s names")) for lit in literals), literals
    # A rationale naming only what lies between two apostrophes has quoted nothing.
    assert check_rationale_grounding("the verifier needs to find plan doesn", "The agent's plan doesn't cite it.")


def test_the_prompt_names_every_quote_style_the_validator_accepts():
    prompt = render(
        "stage1_discovery.j2",
        rules=LabelRules(),
        task_id="t",
        brief="b",
        category=None,
        cohort=None,
        min_quote_words=3,
        shared_context="",
        criteria=[{"text": "x", "direction": None, "context": "", "context_rest": ""}],
    )
    assert "term it puts in quotes of any kind (\"…\", '…', “…”, ‘…’, `…`)" in prompt
