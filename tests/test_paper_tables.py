"""The paper's tables through the CLI, on the LLM path (local Gemini-shaped server) and offline:
non-examples against nearest siblings, P2/P3 per capability, shares over all criteria, Table A6
grouped by P2, and two corpora side by side against one frozen taxonomy (Tables A3/A5)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from taxonomy.shares import FAILED_ROW, UNTAGGED_ROW, primary_shares
from taxonomy.schemas import Taxonomy
from taxonomy.merge.siblings import choose_siblings, named_siblings, non_example_problems
from tests import responders
from tests.conftest import ROOT, copy_run, invoke, llm_devai_named, offline_devai_run, write_pipeline

DEVAI_VERDICTS = f"devai:{ROOT / 'data' / 'devai'}"


def load_taxonomy_json(run_dir: Path) -> Taxonomy:
    return Taxonomy.model_validate_json((run_dir / "taxonomy.json").read_text())


def assert_boundaries(taxonomy: Taxonomy) -> None:
    """Every capability: 1-3 non-examples, each naming exactly one other capability."""
    names = taxonomy.names()
    for cap in taxonomy.capabilities:
        assert 1 <= len(cap.non_examples) <= 3, (cap.name, cap.non_examples)
        for text in cap.non_examples:
            assert len(set(named_siblings(text, names)) - {cap.name}) == 1, text


def pinn_pipeline(tmp_path: Path) -> Path:
    toml = tmp_path / "pinn.toml"
    toml.write_text(
        f'name = "paperbench-pinn"\n[corpus]\npath = "{ROOT / "data" / "paperbench"}"\nformat = "paperbench"\npapers = '
        '["pinn"]\n'
        f'[llm]\nbackoff_initial_s = 0.01\nbackoff_max_s = 0.05\n[output]\ndir = "{tmp_path / "outputs"}"\n'
    )
    return toml


# ---- library: sibling choice -------------------------------------------------------------------
def test_siblings_rank_by_embedding_and_co_tagging_without_a_cut_off():
    sim = np.array([[1.0, 0.30, 0.20, 0.10], [0.30, 1.0, 0.25, 0.05], [0.20, 0.25, 1.0, 0.15], [0.10, 0.05, 0.15, 1.0]])
    assert choose_siblings(sim, k=2)[0] == [1, 2]  # far apart (all < 0.8), yet every capability has siblings
    co = np.zeros((4, 4))
    co[0, 3] = co[3, 0] = 50  # criteria often carry both 0 and 3
    assert choose_siblings(sim, co, k=2)[0] == [1, 3]  # co-tagging lifts 3 from last to second
    names = ["a_b_c_capability", "d_e_f_capability", "g_h_i_capability", "j_k_l_capability"]
    ok = [[f"if it is about totals, prefer `{names[s]}`"] for s in (1, 0, 1, 2)]
    assert non_example_problems(names, ok, choose_siblings(sim, k=2)) == []
    bad = non_example_problems(
        names,
        [[], ["prefer `a_b_c_capability`"], ["if x and y then z, prefer `nope_capability`"], ok[3]],
        choose_siblings(sim, k=2),
    )
    assert (
        "`a_b_c_capability` has 0 non_examples; give 1-3" in bad[0]
        and "nearest siblings: `d_e_f_capability`, `g_h_i_capability`" in bad[0]
    )
    assert any("names `a_b_c_capability` but not the boundary" in p for p in bad)  # no words saying where the line is
    assert any("`g_h_i_capability` non_example" in p and "(it names 0)" in p for p in bad)


# ---- LLM path -------------------------------------------------------------------------------------
@pytest.fixture
def llm_run(gemini_env, tmp_path):
    run_dir = llm_devai_named(tmp_path)  # the merge and the tagging run here, on the session's Stages 1-2b
    result = invoke("run", tmp_path / "devai.toml", "--provider", "gemini", "--run-dir", run_dir, "-q", "--no-report")
    return result, run_dir


def test_llm_merge_gives_boundaries_and_design_principles(llm_run):
    result, run_dir = llm_run
    taxonomy = load_taxonomy_json(run_dir)
    assert_boundaries(taxonomy)
    for cap in taxonomy.capabilities:
        assert isinstance(cap.needs_native_inspection, bool) and isinstance(cap.needs_domain_conventions, bool)
        assert cap.needs_native_inspection_reason and cap.needs_domain_conventions_reason
    raw = json.loads((run_dir / "taxonomy.json").read_text())["capabilities"][0]
    assert {
        "needs_native_inspection",
        "needs_native_inspection_reason",
        "needs_domain_conventions",
        "needs_domain_conventions_reason",
    } <= set(raw)
    md = (run_dir / "taxonomy.md").read_text()
    assert (
        "| capability | share (Stage 3) | stability | P1 | P2 | P3 | description |" in md
        and "- **P2, native inspection:** " in md
    )
    first = taxonomy.capabilities[0]
    assert (
        f"| ✓ | {'✓' if first.needs_native_inspection else '–'} | {'✓' if first.needs_domain_conventions else '–'} |"
        in md
    )
    # Shares over all criteria, the tagged-only denominator beside it.
    assert "share of all" in result.output and "share of tagged" in result.output
    assert "share of all criteria | share of tagged criteria" in (run_dir / "stage3_summary.md").read_text()


def test_llm_merge_missing_boundaries_and_principles_is_reasked(gemini_env, tmp_path):
    broken = {"merge": [], "boundaries": []}

    def careless(req):
        answer = responders.model(req)
        kind = responders.kind(req.texts[0])
        if kind in broken and not broken[kind]:
            broken[kind].append(req)
            if kind == "merge":
                answer["capabilities"][0]["needs_native_inspection_reason"] = "It reads layout. It also reads formulas."
            else:
                for cap in answer["capabilities"]:
                    cap["non_examples"] = []
        return answer

    gemini_env.responder = careless
    run_dir = llm_devai_named(tmp_path)
    invoke("run", tmp_path / "devai.toml", "--provider", "gemini", "--run-dir", run_dir, "-q", "--no-report")

    def of_kind(kind):
        return [r for r in gemini_env.requests if r.kind == "generate" and responders.kind(r.texts[0]) == kind]

    merges, cards, bounds = of_kind("merge"), of_kind("cards"), of_kind("boundaries")
    # A broken P2 reason is asked about that capability alone, not by resending the merge.
    assert (
        len(merges) == 1
        and len(cards) == 1
        and "`needs_native_inspection_reason` must be one sentence" in cards[0].texts[0]
    )
    assert re.findall(r"^### Capability (\d+):", cards[0].texts[0], re.M) == ["0"]
    # Boundaries come after membership: the first answer gave none, so the follow-up asks about every
    # capability again, each with its siblings and what was wrong, as a new short request.
    assert len(bounds) == 2 and len(bounds[1].texts) == 1
    assert bounds[1].texts[0].count("give 1-3 non_examples, not 0") == len(
        load_taxonomy_json(tmp_path / "run").capabilities
    )
    assert "Nearest siblings: `" in bounds[1].texts[0]
    taxonomy = load_taxonomy_json(tmp_path / "run")
    assert taxonomy.repairs == [] and all(isinstance(c.needs_native_inspection, bool) for c in taxonomy.capabilities)
    assert_boundaries(taxonomy)
    assert "Nearest: `" in merges[0].texts[0]  # the prompt lists each candidate's nearest candidates


def test_llm_breakdown_groups_by_p2_with_fn_minus_fp_and_ratio(llm_run):
    _, run_dir = llm_run
    taxonomy = load_taxonomy_json(run_dir)
    result = invoke("breakdown", run_dir, "--verdicts", DEVAI_VERDICTS, "--boot", "0")
    assert "FN/FP is empty when FP is 0" in result.output
    gap = pl.read_csv(run_dir / "breakdown" / "gap_agent_as_a_judge.csv")
    assert gap.columns[:2] == ["p2_group", "capability"] and {"fn_minus_fp", "fn_over_fp"} <= set(gap.columns)
    p2 = {c.name: c.needs_native_inspection for c in taxonomy.capabilities}
    expected = [
        "native inspection required (P2)" if p2[c] else "judgment on rendered content" for c in gap["capability"]
    ]
    assert gap["p2_group"].to_list() == expected and expected == sorted(
        expected, key=lambda g: not g.startswith("native")
    )
    for group in set(expected):  # FN - FP descending within a group
        values = gap.filter(pl.col("p2_group") == group)["fn_minus_fp"].to_list()
        assert values == sorted(values, reverse=True)
    row = gap.row(0, named=True)
    assert row["fn_over_fp"] is None or abs(row["fn_over_fp"] - row["fn_rate"] / row["fp_rate"]) < 1e-9


def test_llm_two_corpora_side_by_side(llm_run, tmp_path):
    _, run_a = llm_run
    run_b = tmp_path / "pinn-run"
    invoke(
        "tag",
        pinn_pipeline(tmp_path),
        "--taxonomy",
        run_a / "taxonomy.json",
        "--provider",
        "gemini",
        "--run-dir",
        run_b,
        "-q",
    )
    result = invoke(
        "breakdown",
        run_a,
        "--verdicts",
        DEVAI_VERDICTS,
        "--verdicts",
        f"paperbench:{ROOT / 'data' / 'paperbench'}",
        "--against",
        run_b,
    )
    header = next(line for line in result.output.splitlines() if line.startswith("| capability"))
    assert (
        header
        == "| capability | devai: criteria | devai: judged | devai: agent_as_a_judge | paperbench-pinn: criteria |"
    )
    table = pl.read_csv(run_a / "breakdown" / "against_pinn-run.csv")
    names = load_taxonomy_json(run_a).names()
    assert table["capability"].to_list() == [*names, "ALL"]
    tags = pl.read_parquet(run_b / "stage3_tags.parquet").filter(pl.col("status") == "ok")
    assert table.filter(pl.col("capability") == "ALL")["paperbench-pinn: criteria"].item() == tags.height


# ---- offline path -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def offline_run(tmp_path_factory) -> Path:
    return offline_devai_run(tmp_path_factory.mktemp("paper-offline"))


@pytest.fixture
def _offline(offline_env):
    return offline_env


def test_offline_boundaries_against_nearest_siblings_and_unknown_principles(offline_run, _offline):
    from taxonomy.merge.check import check_merge
    from taxonomy.merge.measures import capability_similarity
    from taxonomy.pipeline import micro_centroids, micro_co_labels
    from taxonomy.run import RunDir
    from taxonomy.schemas import MergedCapability, MicroCapability
    from taxonomy.config import LabelRules, MergeConfig
    from taxonomy.merge.siblings import capability_co_counts

    taxonomy = load_taxonomy_json(offline_run)
    assert_boundaries(taxonomy)
    micro = [
        MicroCapability.model_validate(m) for m in json.loads((offline_run / "micro_capabilities.json").read_text())
    ]
    proposal = [
        MergedCapability(**c.model_dump(exclude={"members", "share"}), member_input_names=c.members)
        for c in taxonomy.capabilities
    ]
    run = RunDir(offline_run)
    co = capability_co_counts(proposal, micro, micro_co_labels(run, micro))
    sim = capability_similarity(proposal, micro, micro_centroids(run, micro))
    assert check_merge(proposal, micro, MergeConfig(), LabelRules(), sim, co_counts=co) == []
    nearest = choose_siblings(sim, co, k=1)
    for i, cap in enumerate(taxonomy.capabilities):  # the nearest sibling is always one of the boundaries
        assert proposal[nearest[i][0]].name in {
            s for t in cap.non_examples for s in named_siblings(t, taxonomy.names())
        }
        assert cap.needs_native_inspection is None and cap.needs_domain_conventions is None
        assert cap.needs_native_inspection_reason.startswith("Unknown: the offline backend")
    md = (offline_run / "taxonomy.md").read_text()  # one unknown for all is said once, not as a column of "?"
    assert (
        "| ? |" not in md
        and "P3 (needs domain conventions absent from the criterion text) are left out of the table" in md
    )
    assert md.count(taxonomy.capabilities[0].needs_native_inspection_reason) == 1


def test_offline_breakdown_puts_unknown_p2_in_its_own_group(offline_run, _offline):
    invoke("breakdown", offline_run, "--verdicts", DEVAI_VERDICTS, "--boot", "0")
    gap = pl.read_csv(offline_run / "breakdown" / "gap_agent_as_a_judge.csv")
    assert set(gap["p2_group"]) == {"P2 unknown"} and gap["fn_minus_fp"].to_list() == sorted(
        gap["fn_minus_fp"].to_list(), reverse=True
    )


def test_offline_two_corpora_and_a_wrong_taxonomy_is_refused(offline_run, _offline, tmp_path):
    run_b = tmp_path / "pinn-run"
    invoke("tag", pinn_pipeline(tmp_path), "--taxonomy", offline_run / "taxonomy.json", "--run-dir", run_b, "-q")
    result = invoke("breakdown", offline_run, "--verdicts", DEVAI_VERDICTS, "--against", run_b)
    assert "paperbench-pinn: no `human` verdicts with another verifier's" in result.output
    table = pl.read_csv(offline_run / "breakdown" / "against_pinn-run.csv")
    absent = table.filter(pl.col("paperbench-pinn: criteria").is_null())["capability"].to_list()
    lines = {line.split(" | ")[0].strip("| "): line for line in result.output.splitlines() if line.startswith("| ")}
    for cap in absent:  # a capability the second corpus never uses prints as "–"
        assert lines[cap].rstrip().endswith("| – |")
    # A run tagged against another taxonomy is refused with the command that fixes it.
    other = json.loads((offline_run / "taxonomy.json").read_text())
    other["capabilities"][0]["description"] += " Edited."
    (tmp_path / "other.json").write_text(json.dumps(other))
    run_c = tmp_path / "pinn-other"
    invoke("tag", pinn_pipeline(tmp_path), "--taxonomy", tmp_path / "other.json", "--run-dir", run_c, "-q")
    refused = invoke("breakdown", offline_run, "--verdicts", DEVAI_VERDICTS, "--against", run_c, ok=False)
    assert refused.exit_code == 2 and "fix: tag the second corpus with the first's frozen taxonomy" in refused.output
    missing = invoke("breakdown", offline_run, "--verdicts", DEVAI_VERDICTS, "--against", tmp_path / "nope", ok=False)
    assert missing.exit_code == 2 and "no such run directory" in missing.output and not (tmp_path / "nope").exists()


# ---- shares over the whole corpus -----------------------------------------------------------------
def test_shares_count_failed_and_untagged_criteria(offline_run, _offline, tmp_path):
    tags = pl.DataFrame(
        {
            "criterion_id": ["a", "b", "c", "d", "e"],
            "tags": [["x"], ["x"], ["y"], [], ["y"]],
            "primary": ["x", "x", "y", None, None],
            "status": ["ok", "ok", "ok", "failed", "ok"],
        }
    )
    criteria = pl.DataFrame({"criterion_id": ["a", "b", "c", "d", "e", "f"]})
    shares = primary_shares(tags, criteria)
    rows = {r["capability"]: r for r in shares.iter_rows(named=True)}
    assert rows["x"]["share"] == pytest.approx(2 / 6) and rows["x"]["share_of_tagged"] == pytest.approx(2 / 3)
    assert rows[FAILED_ROW]["n"] == 1 and rows[UNTAGGED_ROW]["n"] == 2 and rows[UNTAGGED_ROW]["share_of_tagged"] is None
    assert shares["share"].sum() == pytest.approx(1.0)
    # Through the CLI: a failed criterion in a run shows as its own row of the shares `taxonomy run` prints.
    run = copy_run(offline_run, tmp_path)
    table = pl.read_parquet(run / "stage3_tags.parquet")
    failed = table.with_columns(
        status=pl.when(pl.int_range(pl.len()) < 5).then(pl.lit("failed")).otherwise(pl.col("status"))
    )
    failed.write_parquet(run / "stage3_tags.parquet")
    text = invoke("run", write_pipeline(tmp_path), "--run-dir", run, "-q", "--no-report").output
    assert f"| {FAILED_ROW} | 5 | 1.4% |" in text  # 5 of 365


# ---- guidance starts from the P3 capabilities ------------------------------------------------------
def test_llm_guidance_starts_from_p3_capabilities(llm_run, gemini_env):
    _, run_dir = llm_run
    taxonomy = load_taxonomy_json(run_dir)
    p3 = [c.name for c in taxonomy.capabilities if c.needs_domain_conventions]
    assert p3 and len(p3) < len(taxonomy.capabilities)  # the test model decides both ways
    invoke("guidance", run_dir, "--provider", "gemini", "-q")
    info = json.loads((run_dir / "manifest.json").read_text())["stages"]["guidance"]
    assert info["p3_capabilities"] == p3 and info["drafting_order"][: len(p3)] == p3
    prompts = {
        re.search(r"Capability `([a-z_]+)`", r.texts[0]).group(1): r.texts[0]
        for r in gemini_env.requests
        if r.kind == "generate" and "judge guidance" in r.texts[0]
    }
    for name, prompt in prompts.items():
        assert ("design principle P3" in prompt) == (name in p3)


def test_offline_guidance_order_keeps_unknown_p3(offline_run, _offline):
    from taxonomy.guidance.draft import p3_first

    taxonomy = load_taxonomy_json(offline_run)
    assert [c.name for c in p3_first(taxonomy)] == taxonomy.names()  # all unknown: corpus order kept
    taxonomy.capabilities[-1].needs_domain_conventions = True
    taxonomy.capabilities[0].needs_domain_conventions = False
    order = [c.name for c in p3_first(taxonomy)]
    assert order[0] == taxonomy.names()[-1] and order[-1] == taxonomy.names()[0]


def test_stage3_co_tagging_without_a_boundary_is_reported():
    from taxonomy.merge.siblings import unbounded_cotagged

    names = ["a_b_c_capability", "d_e_f_capability", "g_h_i_capability"]
    tags = pl.DataFrame({"tags": [[names[0], names[1]]] * 4 + [[names[2], names[0]]], "status": ["ok"] * 5})
    bounded = [
        ["if totals, prefer `g_h_i_capability`"],
        ["if totals, prefer `g_h_i_capability`"],
        ["if totals, prefer `a_b_c_capability`"],
    ]
    (note,) = unbounded_cotagged(tags, names, bounded)
    assert note.startswith(
        "`a_b_c_capability` and `d_e_f_capability` are co-tagged on 4 criteria but neither names the other"
    )
    bounded[1] = ["if the totals are recomputed, prefer `a_b_c_capability`"]
    assert unbounded_cotagged(tags, names, bounded) == []
    assert unbounded_cotagged(tags, names, [[], [], []], min_share=0.9) == []  # 4 of 5 is under 90%


def test_llm_tag_failures_are_a_row_of_the_shares(gemini_env, tmp_path):
    def one_bad_tag(req):
        answer = responders.model(req)
        if responders.kind(req.texts[0]) == "tag":
            answer["items"][0]["capabilities"] = ["invented_overall_quality_judgement_capability"]
        return answer

    gemini_env.responder = one_bad_tag
    toml = write_pipeline(tmp_path, limit=40)
    result = invoke("run", toml, "--provider", "gemini", "--run-dir", tmp_path / "run", "-q", "--no-report")
    tags = pl.read_parquet(tmp_path / "run" / "stage3_tags.parquet")
    n_failed = tags.filter(pl.col("status") == "failed").height
    assert n_failed >= 1
    row = next(
        line
        for line in (tmp_path / "run" / "stage3_summary.md").read_text().splitlines()
        if line.startswith(f"| {FAILED_ROW}")
    )
    assert row == f"| {FAILED_ROW} | {n_failed} | {100 * n_failed / 40:.1f}% | – |"
    assert FAILED_ROW in result.output
