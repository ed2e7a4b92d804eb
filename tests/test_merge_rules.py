"""Stage 2c: the merge-constraint checker and the deterministic repair solver."""

from __future__ import annotations

import re

import numpy as np
import pytest

from taxonomy.config import LabelRules, MergeConfig
from taxonomy.merge.check import check_merge
from taxonomy.merge.measures import capability_similarity, to_taxonomy_capabilities
from taxonomy.merge.solver import solve_merge
from taxonomy.schemas import MergedCapability, MicroCapability

CFG = MergeConfig()
RULES = LabelRules()
TOPICS = [
    "revenue",
    "margin",
    "formula",
    "chart",
    "date",
    "currency",
    "citation",
    "narrative",
    "ratio",
    "layout",
    "filing",
    "footnote",
]
# Criteria per micro (two micros per topic); topic 0 holds 55 of 100.
COUNTS = [30, 25] + [2, 2] * 9 + [3, 2] + [2, 2]


def make_micro() -> tuple[list[MicroCapability], np.ndarray]:
    """Two micros per topic on that topic's axis; topic 11 leans on topic 10 (a confusable pair)."""
    rng = np.random.default_rng(0)
    micro, rows = [], []
    for t, topic in enumerate(TOPICS):
        for v, variant in enumerate(["figures", "sources"]):
            i = 2 * t + v
            micro.append(
                MicroCapability(
                    name=f"trace_{topic}_{variant}_capability",
                    cluster_id=i,
                    n_criteria=COUNTS[i],
                    description=f"Checks the {topic} {variant}. More detail.",
                    diagnostic_signal=f"mentions {topic}",
                    example_pattern=f"The {topic} {variant} are right.",
                    non_examples=[f"if layout, prefer `trace_layout_{variant}_capability`"],
                )
            )
            vec = np.zeros(len(TOPICS))
            vec[t] = 1.0
            if t == 11:
                vec[10] = 3.0
            vec += 0.05 * rng.standard_normal(len(TOPICS))
            rows.append(vec / np.linalg.norm(vec))
    return micro, np.array(rows)


def cap(
    name: str, members: list[str], non_examples: list[str] | None = None, description: str = "What it checks."
) -> MergedCapability:
    return MergedCapability(
        name=name,
        description=description,
        diagnostic_signal="a cue",
        example_pattern="an example",
        non_examples=non_examples or [],
        member_input_names=members,
    )


def bad_proposal(micro: list[MicroCapability]) -> list[MergedCapability]:
    """12 capabilities; topic 0 at 55%; one micro dropped; a repeated name; an invalid name; a confusable pair."""
    caps = [
        cap(f"audit_{t}_topic_capability", [micro[2 * i].name, micro[2 * i + 1].name]) for i, t in enumerate(TOPICS)
    ]
    caps[5].member_input_names = [micro[10].name]  # drops micro 11
    caps[8].name = caps[7].name
    caps[9].name = "Build-Excel-Model"
    return caps


def messages(violations) -> str:
    return "\n".join(str(v) for v in violations)


def test_checker_flags_each_violation_kind():
    micro, cents = make_micro()
    proposal = bad_proposal(micro)
    sim = capability_similarity(proposal, micro, cents)
    text = messages(check_merge(proposal, micro, CFG, RULES, sim))
    assert "you gave 12 capabilities; give 8-10" in text
    assert (
        "`audit_revenue_topic_capability` holds 55.0% of criteria (max 40%); split it along its members: "
        "trace_revenue_figures_capability, trace_revenue_sources_capability"
    ) in text
    assert "not mapped: `trace_currency_sources_capability`" in text
    assert f"the name `{proposal[7].name}` is used by 2 capabilities" in text
    assert "`Build-Excel-Model` must be lower_snake_case" in text
    # Every capability must carry 1-3 non-examples; the planted close pair are each other's nearest sibling.
    assert text.count("has 0 non_examples; give 1-3") == len(proposal)
    assert (
        "`audit_footnote_topic_capability` has 0 non_examples; give 1-3, each naming a sibling capability and the "
        "boundary "
        "against it (nearest siblings: `audit_filing_topic_capability`" in text
    )


def test_checker_other_kinds_and_clean_pass():
    micro, cents = make_micro()
    caps = [
        cap("audit_shared_topics_capability", [m.name for m in micro[:12]] + ["made_up_name_capability"]),
        cap("audit_other_topics_capability", [m.name for m in micro[11:]], description=" "),
        cap("audit_tiny_topics_capability", []),
    ]
    text = messages(check_merge(caps, micro, CFG, RULES, None))
    assert "lists unknown member(s) `made_up_name_capability`" in text
    assert "`trace_currency_sources_capability` is mapped 2 times" in text
    assert "has an empty description" in text
    assert "`audit_tiny_topics_capability` has no valid members" in text
    assert "you gave 3 capabilities" in text

    clean, _ = solve_merge(micro, cents, CFG, RULES)
    assert check_merge(clean, micro, CFG, RULES, capability_similarity(clean, micro, cents)) == []
    # A capability below min_share is named with its nearest neighbour.
    small = [
        cap("audit_a_topic_capability", [m.name for m in micro[:-1]]),
        cap("audit_b_topic_capability", [micro[-1].name]),
    ]
    cfg = MergeConfig(min_caps=1, max_caps=10, max_share=1.0, min_share=0.05)
    text = messages(check_merge(small, micro, cfg, RULES, capability_similarity(small, micro, cents)))
    assert (
        "`audit_b_topic_capability` holds 2.0% of criteria (min 5%); merge it into its nearest neighbour (nearest: "
        "`audit_a_topic_capability`)" in text
    )


def test_solver_repairs_bad_proposal_and_records_repairs():
    micro, cents = make_micro()
    proposal, repairs = solve_merge(micro, cents, CFG, RULES, start=bad_proposal(micro))
    sim = capability_similarity(proposal, micro, cents)
    assert check_merge(proposal, micro, CFG, RULES, sim) == []
    text = "\n".join(repairs)
    assert "mapped the unmapped `trace_currency_sources_capability`" in text
    assert "split `audit_revenue_topic_capability` (55.0%, above the 40% maximum)" in text
    assert "folded `" in text
    assert "renamed `Build-Excel-Model`" in text or "Build-Excel-Model" not in {c.name for c in proposal}
    assert "boundary sentence(s) against nearest siblings" in text
    assert not any(r.startswith(("infeasible", "could not", "stopped")) for r in repairs)
    assert (
        "renamed `audit_narrative_topic_capability` to `trace_ratio_figures_capability` (the name was already taken"
        in text
    )
    # The model's cards survive where the model's groups survive; a fold keeps the receiver's card.
    names = {c.name for c in proposal}
    assert {"audit_date_topic_capability", "audit_revenue_topic_capability", "trace_ratio_figures_capability"} <= names
    filing = next(c for c in proposal if c.name == "audit_filing_topic_capability")
    assert set(filing.member_input_names) >= {"trace_filing_figures_capability", "trace_footnote_figures_capability"}
    # Every micro mapped exactly once.
    mapped = [n for c in proposal for n in c.member_input_names]
    assert sorted(mapped) == sorted(m.name for m in micro)


def test_solver_repairs_names_and_boundaries_within_valid_count():
    micro, cents = make_micro()
    cfg = MergeConfig(min_caps=8, max_caps=12, max_share=0.6)
    start = bad_proposal(micro)
    start[5].member_input_names.append(micro[11].name)
    proposal, repairs = solve_merge(micro, cents, cfg, RULES, start=start)
    names = [c.name for c in proposal]
    assert len(names) == len(set(names)) == 12
    assert check_merge(proposal, micro, cfg, RULES, capability_similarity(proposal, micro, cents)) == []
    assert any(r.startswith("renamed `Build-Excel-Model` to `trace_layout_figures_capability`") for r in repairs)
    assert any("was already taken" in r for r in repairs)
    filing = next(c for c in proposal if c.name == "audit_filing_topic_capability")
    assert any("prefer `audit_footnote_topic_capability`" in ne for ne in filing.non_examples)
    assert filing.non_examples[-1].startswith("if the criterion is about what it checks, prefer")


def test_solver_from_scratch_and_determinism():
    micro, cents = make_micro()
    a, ra = solve_merge(micro, cents, CFG, RULES)
    b, rb = solve_merge(micro, cents, CFG, RULES)
    assert [c.model_dump() for c in a] == [c.model_dump() for c in b] and ra == rb
    assert check_merge(a, micro, CFG, RULES, capability_similarity(a, micro, cents)) == []
    assert CFG.min_caps <= len(a) <= CFG.max_caps
    # Micros of one topic stay together unless the share cap forces them apart.
    owner = {n: c.name for c in a for n in c.member_input_names}
    together = sum(owner[micro[2 * t].name] == owner[micro[2 * t + 1].name] for t in range(1, len(TOPICS)))
    assert together >= len(TOPICS) - 2
    c, rc = solve_merge(micro, cents, CFG, RULES, start=bad_proposal(micro))
    d, rd = solve_merge(micro, cents, CFG, RULES, start=bad_proposal(micro))
    assert [x.model_dump() for x in c] == [x.model_dump() for x in d] and rc == rd


def test_solver_reports_infeasible_inputs_without_looping():
    micro, cents = make_micro()
    # Fewer micro-clusters than min_caps.
    few, few_c = micro[:5], cents[:5]
    proposal, repairs = solve_merge(few, few_c, CFG, RULES)
    assert len(proposal) <= 5
    assert any(r.startswith("infeasible:") and "min_caps=8 not reached" in r for r in repairs)
    # One micro-cluster alone above max_share.
    heavy = [m.model_copy(update={"n_criteria": 500 if i == 0 else m.n_criteria}) for i, m in enumerate(micro)]
    proposal, repairs = solve_merge(heavy, cents, CFG, RULES)
    assert any(r.startswith("infeasible: `trace_revenue_figures_capability` alone holds") for r in repairs)
    assert check_merge(proposal, heavy, CFG, RULES, capability_similarity(proposal, heavy, cents)) != []
    assert sorted(n for c in proposal for n in c.member_input_names) == sorted(m.name for m in heavy)
    # A start whose every name is unknown falls back to the scratch path.
    proposal, repairs = solve_merge(micro, cents, CFG, RULES, start=[cap("audit_nothing_here_capability", ["nope"])])
    assert any(r.startswith("no usable start") for r in repairs)
    assert check_merge(proposal, micro, CFG, RULES, capability_similarity(proposal, micro, cents)) == []


def test_to_taxonomy_capabilities_fills_members_and_share():
    micro, cents = make_micro()
    proposal, _ = solve_merge(micro, cents, CFG, RULES)
    caps = to_taxonomy_capabilities(proposal, micro)
    assert [c.name for c in caps] == [p.name for p in proposal]
    assert sum(c.share for c in caps) == pytest.approx(1.0)
    assert all(c.members == p.member_input_names for c, p in zip(caps, proposal))


def test_input_checks_and_whole_name_boundaries():
    micro, cents = make_micro()
    with pytest.raises(ValueError, match="one row per micro-capability"):
        solve_merge(micro, cents[:3], CFG, RULES)
    with pytest.raises(ValueError, match="names must be unique"):
        check_merge([], micro + micro[:1], CFG, RULES, None)
    # A boundary must name the other capability itself, not a longer name containing it.
    a = cap("verify_totals_capability", [micro[0].name], ["if recomputed, prefer `cross_verify_totals_capability_x`"])
    b = cap("cross_verify_totals_capability", [micro[1].name], ["if stated, prefer `reverify_totals_capability`"])
    cfg = MergeConfig(min_caps=1, max_caps=30, max_share=1.0, min_share=0.0)
    sim = np.array([[1.0, 0.99], [0.99, 1.0]])

    def about_a():
        return [
            str(v)
            for v in check_merge([a, b], micro, cfg, RULES, sim)
            if str(v).startswith("`verify_totals_capability` non") or str(v).startswith("`verify_totals_capability`'s")
        ]

    assert (
        len(about_a()) == 2 and "(it names 0)" in about_a()[0] and "name none of its nearest siblings" in about_a()[1]
    )
    a.non_examples = ["if the totals are recomputed, prefer `cross_verify_totals_capability`."]
    assert about_a() == []


def test_hard_violations_name_each_broken_constraint():
    from taxonomy.merge.check import hard_violations

    micro, cents = make_micro()
    text = "\n".join(hard_violations(bad_proposal(micro), micro, CFG))
    assert "capability count 8-10: the taxonomy has 12" in text
    assert "max share 40%: `audit_revenue_topic_capability` holds 55.0% of criteria" in text
    assert "each micro-cluster mapped once: 1 input name(s) are not mapped" in text
    assert "lower_snake_case" not in text and "confusable" not in text  # form rules, not hard ones
    fixed, _ = solve_merge(micro, cents, CFG, RULES, start=bad_proposal(micro))
    assert hard_violations(fixed, micro, CFG) == []
    one = [cap("audit_everything_at_once_capability", [m.name for m in micro])]
    assert hard_violations(one, micro, CFG) == [
        "capability count 8-10: the taxonomy has 1",
        "max share 40%: `audit_everything_at_once_capability` holds 100.0% of criteria",
    ]


def test_a_split_names_its_two_halves_apart_and_as_they_end_up():
    """The card of a capability over the limit is named after the member that falls in the smaller half: the
    note names that half as the solver then names it, not by the card's name again, and renames nothing."""
    micro, cents = make_micro()
    start = [cap("trace_revenue_sources_capability", [micro[0].name, micro[1].name])]
    start += [
        cap(f"audit_{t}_topic_capability", [micro[2 * i].name, micro[2 * i + 1].name])
        for i, t in enumerate(TOPICS)
        if i
    ]
    proposal, repairs = solve_merge(
        micro, cents, MergeConfig(min_caps=8, max_caps=12, max_share=0.4), RULES, start=start
    )
    note = next(r for r in repairs if r.startswith("split `trace_revenue_sources_capability`"))
    halves = re.findall(r"into `([a-z_]+)` \(30\.0%\) and `([a-z_]+)` \(25\.0%\)", note)
    assert halves and halves[0][0] != halves[0][1], note
    names = {c.name for c in proposal}
    assert set(halves[0]) <= names, (halves, names)
    assert not [r for r in repairs if r.startswith("renamed `trace_revenue_sources_capability`")], repairs
