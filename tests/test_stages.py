"""Stages 2 and 3 and the whole run through the CLI and the real google-genai SDK, repair paths included."""

from __future__ import annotations

import json
import re

import polars as pl
import pytest

from taxonomy.config import LabelRules, MergeConfig
from taxonomy.merge.check import check_merge
from taxonomy.merge.measures import capability_similarity
from taxonomy.schemas import MergedCapability, MicroCapability, Taxonomy
from tests import responders
from tests.conftest import invoke, llm_devai_named, write_pipeline


def full_run(tmp_path, *extra: str):
    toml = write_pipeline(tmp_path)  # DevAI: 365 criteria, k = 80 micro-clusters by default
    run_dir = tmp_path / "run"
    result = invoke("run", toml, "--provider", "gemini", "--run-dir", run_dir, "-q", *extra)
    return result, run_dir


def merge_run(tmp_path):
    """The merge and the tagging of a full run, on a copy of the session's run up to its named micro-clusters."""
    run_dir = llm_devai_named(tmp_path)
    result = invoke("run", tmp_path / "devai.toml", "--provider", "gemini", "--run-dir", run_dir, "-q", "--no-report")
    return result, run_dir


def load_run(run_dir):
    taxonomy = Taxonomy.model_validate_json((run_dir / "taxonomy.json").read_text())
    micro = [MicroCapability.model_validate(m) for m in json.loads((run_dir / "micro_capabilities.json").read_text())]
    return taxonomy, micro


def assert_taxonomy_passes_every_check(run_dir):
    from taxonomy.pipeline import micro_centroids, micro_co_labels
    from taxonomy.run import RunDir
    from taxonomy.merge.siblings import capability_co_counts

    taxonomy, micro = load_run(run_dir)
    centroids = micro_centroids(RunDir(run_dir), micro)
    proposal = [
        MergedCapability(**c.model_dump(exclude={"members", "share"}), member_input_names=c.members)
        for c in taxonomy.capabilities
    ]
    cfg = MergeConfig()
    co = capability_co_counts(proposal, micro, micro_co_labels(RunDir(run_dir), micro))
    assert (
        check_merge(proposal, micro, cfg, LabelRules(), capability_similarity(proposal, micro, centroids), co_counts=co)
        == []
    )
    assert cfg.min_caps <= len(taxonomy.capabilities) <= cfg.max_caps
    assert sorted(m for c in taxonomy.capabilities for m in c.members) == sorted(m.name for m in micro)
    return taxonomy, micro


def test_full_run_produces_a_valid_taxonomy_and_tags_and_a_rerun_sends_nothing(gemini_env, tmp_path):
    result, run_dir = full_run(tmp_path)
    taxonomy, micro = assert_taxonomy_passes_every_check(run_dir)
    k = pl.read_parquet(run_dir / "clusters.parquet")[
        "cluster_id"
    ].n_unique()  # cluster.k = "auto": scaled with the labels
    assert 20 <= k <= 80 and len(micro) == k and taxonomy.content_hash == taxonomy.compute_hash()
    tags = pl.read_parquet(run_dir / "stage3_tags.parquet")
    assert tags.height == 365 and tags["status"].to_list() == ["ok"] * 365
    assert set(tags["primary"]) <= set(taxonomy.names())
    assert all(1 <= len(t) <= 3 and t[0] == p for t, p in zip(tags["tags"], tags["primary"]))
    manifest = json.loads((run_dir / "manifest.json").read_text())
    for stage in ("discover", "cluster", "canonicalize", "merge", "tag"):
        assert "seconds" in manifest["stages"][stage]
    # The merge: one call for membership, one for the boundaries once membership is settled.
    assert manifest["stages"]["canonicalize"]["calls"] == k and manifest["stages"]["merge"]["calls"] == 2
    names = prompts_of(gemini_env, "canonicalize")
    assert len(names) == k and all(
        "Criteria that carry labels of this cluster" in p and "<nearby cluster=" in p for p in names
    )
    micro_names = {m.name for m in micro}
    for m in micro:  # each micro-capability's boundaries name real sibling micro-capabilities
        assert 1 <= len(m.non_examples) <= 3
        assert all(len(set(re.findall(r"`([a-z_]+)`", t)) & (micro_names - {m.name})) == 1 for t in m.non_examples), (
            m.non_examples
        )
    assert set(manifest["prompt_hashes"]) == {"discover", "canonicalize", "merge", "tag"}
    embeds = [r for r in gemini_env.requests if r.kind == "embed"]
    assert embeds and embeds[0].path.endswith(":batchEmbedContents")
    assert (run_dir / "taxonomy.md").read_text().startswith("# Capability taxonomy")
    assert (run_dir / "report.html").exists() and "Report:" in result.output
    # Run again, Stage 1 forced: every answer comes from the cache, so nothing is sent.
    gemini_env.reset()
    full_run(tmp_path, "--force", "discover")
    assert gemini_env.count() == 0


def test_each_stage_runs_alone_from_the_run_directory(gemini_env, tmp_path):
    toml = write_pipeline(tmp_path, limit=120)
    run_dir = tmp_path / "run"
    invoke("discover", toml, "--provider", "gemini", "--run-dir", run_dir, "-q")
    for stage, artifact in (
        ("cluster", "clusters.parquet"),
        ("canonicalize", "micro_capabilities.json"),
        ("merge", "taxonomy.json"),
        ("tag", "stage3_tags.parquet"),
    ):
        invoke(stage, run_dir, "-q")
        assert (run_dir / artifact).exists()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["backend"] == "gemini" and set(manifest["stages"]) == {
        "discover",
        "cluster",
        "canonicalize",
        "merge",
        "tag",
    }


def test_stage_out_of_order_is_one_clear_line(gemini_env, tmp_path):
    toml = write_pipeline(tmp_path, limit=20)
    invoke("discover", toml, "--provider", "gemini", "--run-dir", tmp_path / "run", "-q")
    result = invoke("merge", tmp_path / "run", ok=False)
    assert (
        result.exit_code == 2 and "micro_capabilities.json: missing; fix: run `taxonomy canonicalize" in result.output
    )


def prompts_of(server, kind: str) -> list[str]:
    return [r.texts[0] for r in server.requests if r.kind == "generate" and responders.kind(r.texts[0]) == kind]


def _merge_breaker(mutate, times: int | None = None):
    """The model's merge answers break a rule: the first `times` of them, or all."""
    broken = []

    def respond(req):
        answer = responders.model(req)
        if responders.kind(req.texts[0]) in ("merge", "regroup") and (times is None or len(broken) < times):
            broken.append(req)
            mutate(answer["capabilities"])
        return answer

    return respond


def _twelve(caps):
    while len(caps) < 12:  # split the biggest groups until there are 12
        big = max(caps, key=lambda c: len(c["member_input_names"]))
        half = big["member_input_names"][len(big["member_input_names"]) // 2 :]
        big["member_input_names"] = big["member_input_names"][: len(big["member_input_names"]) // 2]
        caps.append({**big, "name": half[0], "member_input_names": half})


def _giant(caps):
    """Four groups give all but one member to the first, which ends near half the criteria."""
    for c in caps[1:5]:
        caps[0]["member_input_names"] += c["member_input_names"][1:]
        c["member_input_names"] = c["member_input_names"][:1]


def _drop_micro(caps):
    caps[-1]["member_input_names"].pop()


def _repeat_name(caps):
    caps[1]["name"] = caps[0]["name"]


def _long_reason(caps):
    caps[0]["needs_native_inspection_reason"] = (
        "It reads the structure of the deliverable. Flattening it to text loses that."
    )


# Rules only the whole answer can mend: re-asked in the conversation.
BREAKERS = {
    "twelve_capabilities": (_twelve, "you gave 12 capabilities; give 8-10"),
    "one_holds_55_percent": (_giant, "max 40%"),
}
# Rules about one capability's own card: asked about that capability alone.
CARD_BREAKERS = {
    "repeats_a_name": (_repeat_name, 1, "give this one a distinct name"),
    "two_sentence_reason": (_long_reason, 0, "must be one sentence"),
}


@pytest.mark.parametrize("case", sorted(CARD_BREAKERS))
def test_a_card_defect_is_asked_about_that_capability_only(gemini_env, tmp_path, case):
    mutate, idx, message = CARD_BREAKERS[case]
    gemini_env.responder = _merge_breaker(mutate, times=1)
    _, run_dir = merge_run(tmp_path)
    assert len(prompts_of(gemini_env, "merge")) == 1
    (follow_up,) = prompts_of(gemini_env, "cards")
    assert re.findall(r"^### Capability (\d+):", follow_up, re.M) == [str(idx)] and message in follow_up
    assert "Merge near-duplicates" not in follow_up and all(
        len(r.texts) == 1 for r in gemini_env.requests if r.kind == "generate"
    )
    taxonomy, _ = assert_taxonomy_passes_every_check(run_dir)
    assert taxonomy.repairs == []
    merge = [
        json.loads(line)["prompt_tokens"]
        for line in (run_dir / "usage.jsonl").read_text().splitlines()
        if '"stage": "merge"' in line
    ]
    assert len(merge) == 3 and sum(merge) <= 1.5 * merge[0], merge  # membership, the card follow-up, boundaries


def test_a_card_defect_that_persists_is_repaired_in_code(gemini_env, tmp_path):
    def stubborn(req):
        answer = responders.model(req)
        kind = responders.kind(req.texts[0])
        if kind == "merge":
            _repeat_name(answer["capabilities"])
        elif kind == "cards":
            for fix in answer["capabilities"]:
                fix["name"] = "Not A Valid Name"
        return answer

    gemini_env.responder = stubborn
    _, run_dir = merge_run(tmp_path)
    assert len(prompts_of(gemini_env, "cards")) == 2  # llm.reask_attempts follow-ups, then the program's repair
    taxonomy, _ = assert_taxonomy_passes_every_check(run_dir)
    assert "still broke" in taxonomy.repairs[0] and any(r.startswith("renamed") for r in taxonomy.repairs)


@pytest.mark.parametrize("case", sorted(BREAKERS))
def test_merge_violation_is_reasked_then_fixed(gemini_env, tmp_path, case):
    mutate, _ = BREAKERS[case]
    gemini_env.responder = _merge_breaker(mutate, times=1)
    _, run_dir = merge_run(tmp_path)
    merges = [
        r for r in gemini_env.requests if r.kind == "generate" and responders.kind(r.texts[0]) in ("merge", "regroup")
    ]
    # The re-ask is a fresh request carrying the previous grouping and its violations, not the conversation.
    assert len(merges) == 2 and len(merges[1].texts) == 1 and responders.kind(merges[1].texts[0]) == "regroup"
    assert BREAKERS[case][1] in merges[1].texts[0]
    taxonomy, _ = assert_taxonomy_passes_every_check(run_dir)
    assert taxonomy.repairs == []


def test_a_candidate_left_out_is_mapped_in_code_without_a_call(gemini_env, tmp_path):
    gemini_env.responder = _merge_breaker(_drop_micro)
    _, run_dir = merge_run(tmp_path)
    assert len(prompts_of(gemini_env, "merge")) == 1  # no re-ask: the program maps it itself
    taxonomy, _ = assert_taxonomy_passes_every_check(run_dir)
    assert len(taxonomy.repairs) == 1 and "which the model left out" in taxonomy.repairs[0]


def test_a_reason_with_an_abbreviation_is_one_sentence(gemini_env, tmp_path):
    """The prompt allows "e.g." in a one-sentence reason; the validator must not reject it."""

    def abbreviated(caps):
        caps[0]["needs_native_inspection_reason"] = (
            "It reads properties lost in flattening, e.g. formula structure, i.e. what text drops."
        )

    gemini_env.responder = _merge_breaker(abbreviated)
    _, run_dir = merge_run(tmp_path)
    assert len(prompts_of(gemini_env, "merge")) == 1
    taxonomy, _ = assert_taxonomy_passes_every_check(run_dir)
    assert taxonomy.repairs == [] and "e.g. formula" in taxonomy.capabilities[0].needs_native_inspection_reason


def test_rejected_boundaries_are_asked_again_about_that_capability_only(gemini_env, tmp_path):
    """The fault: the first boundary answer draws one capability's line against a capability that is not
    among its nearest siblings. The follow-up carries that capability, its siblings and the violation,
    never the merge again, and the merge stage stays within 1.5x the tokens of its membership call."""
    respond, faulted = responders.boundary_fault_model()
    gemini_env.responder = respond
    _, run_dir = merge_run(tmp_path)
    asks = prompts_of(gemini_env, "boundaries")
    assert len(asks) == 2 and all(len(r.texts) == 1 for r in gemini_env.requests if r.kind == "generate")
    follow_up = asks[1]
    assert re.findall(r"^### `([a-z_]+)`", follow_up, re.M) == faulted  # only the capability concerned
    assert "not one of this capability's nearest siblings" in follow_up and "Merge near-duplicates" not in follow_up
    taxonomy, _ = assert_taxonomy_passes_every_check(run_dir)
    assert taxonomy.repairs == []
    assert "prefer" in taxonomy.capabilities[[c.name for c in taxonomy.capabilities].index(faulted[0])].non_examples[0]
    ledger = [json.loads(line) for line in (run_dir / "usage.jsonl").read_text().splitlines()]
    merge = [e["prompt_tokens"] for e in ledger if e["stage"] == "merge"]
    assert len(merge) == 3 and sum(merge) <= 1.5 * merge[0], merge


@pytest.mark.parametrize("case", sorted(BREAKERS))
def test_persistent_merge_violation_is_repaired_in_code(gemini_env, tmp_path, case):
    mutate, _ = BREAKERS[case]
    gemini_env.responder = _merge_breaker(mutate)
    _, run_dir = merge_run(tmp_path)
    taxonomy, _ = assert_taxonomy_passes_every_check(run_dir)
    assert taxonomy.repairs and "still broke" in taxonomy.repairs[0]
    assert not any(r.startswith("unresolved") for r in taxonomy.repairs)


def test_unknown_capability_in_stage3_is_reasked(gemini_env, tmp_path):
    def unknown(req):
        answer = responders.model(req)
        if responders.kind(req.texts[0]) == "tag":
            answer["items"][0]["capabilities"] = ["invented_overall_quality_judgement_capability"]
        return answer

    toml = write_pipeline(tmp_path, limit=40)
    run_dir = tmp_path / "run"
    invoke("run", toml, "--provider", "gemini", "--run-dir", run_dir, "-q", "--no-report")
    (
        tmp_path / "outputs" / "devai" / "cache.sqlite"
    ).unlink()  # otherwise the cached tags answer and the model is never asked
    gemini_env.reset()
    gemini_env.push(unknown)
    invoke("tag", run_dir, "-q")
    reasks = [r for r in gemini_env.requests if len(r.texts) == 3]
    assert (
        len(reasks) == 1 and "`invented_overall_quality_judgement_capability` not in the taxonomy" in reasks[0].texts[2]
    )
    tags = pl.read_parquet(run_dir / "stage3_tags.parquet")
    assert "invented_overall_quality_judgement_capability" not in tags["tags"].explode().to_list()


def test_hand_edited_taxonomy_retags_and_bad_edit_is_clear(gemini_env, tmp_path):
    toml = write_pipeline(tmp_path, limit=40)
    run_dir = tmp_path / "run"
    invoke("run", toml, "--provider", "gemini", "--run-dir", run_dir, "-q", "--no-report")
    edited = json.loads((run_dir / "taxonomy.json").read_text())
    edited["capabilities"][0]["name"] = "hand_renamed_value_check_capability"
    frozen = tmp_path / "edited.json"
    frozen.write_text(json.dumps(edited))
    invoke("tag", run_dir, "--taxonomy", frozen, "-q")
    assert "hand_renamed_value_check_capability" in set(
        pl.read_parquet(run_dir / "stage3_tags.parquet")["tags"].explode()
    )
    edited["capabilities"][1]["name"] = "Bad Name"
    frozen.write_text(json.dumps(edited))
    result = invoke("tag", run_dir, "--taxonomy", frozen, ok=False)
    assert result.exit_code == 2 and "capabilities.1.name" in result.output and "fix:" in result.output
    frozen.write_text("{not json")
    result = invoke("tag", run_dir, "--taxonomy", frozen, ok=False)
    assert "line 1: invalid JSON" in result.output


def test_name_collision_between_clusters_is_reasked(gemini_env, tmp_path):
    def same_name(req):
        answer = responders.model(req)
        if responders.kind(req.texts[0]) == "canonicalize" and "already given to other clusters" not in req.texts[0]:
            answer["name"] = "shared_generic_value_check_capability"
        return answer

    gemini_env.responder = same_name
    toml = write_pipeline(tmp_path, limit=120)
    run_dir = tmp_path / "run"
    invoke("discover", toml, "--provider", "gemini", "--run-dir", run_dir, "-q")
    invoke("cluster", run_dir, "-q")
    invoke("canonicalize", run_dir, "-q")
    micro = json.loads((run_dir / "micro_capabilities.json").read_text())
    names = [m["name"] for m in micro]
    assert len(set(names)) == len(names) and names.count("shared_generic_value_check_capability") == 1
    renames = [r for r in gemini_env.requests if "already given to other clusters" in r.texts[0]]
    assert len(renames) == len(micro) - 1 and "shared_generic_value_check_capability" in renames[0].texts[0]


def test_paperbench_full_run_with_gemini_passes_every_check(gemini_env, tmp_path, monkeypatch):
    """The paper's scale: all 8,921 PaperBench leaves, every stage through the real SDK, every check in code."""
    from tests.conftest import ROOT

    monkeypatch.chdir(tmp_path)  # the TOML sets no [output]: the answer cache goes to ./outputs, here, not the checkout
    toml = tmp_path / "paperbench.toml"
    toml.write_text(
        (ROOT / "pipelines" / "paperbench.toml")
        .read_text()
        .replace('"../data/paperbench"', f'"{ROOT / "data" / "paperbench"}"')
    )
    run_dir = tmp_path / "run"
    invoke("run", toml, "--provider", "gemini", "--run-dir", run_dir, "-q", "--no-report")
    taxonomy, micro = assert_taxonomy_passes_every_check(run_dir)
    assert len(micro) == 80 and taxonomy.n_criteria == 8921
    tags = pl.read_parquet(run_dir / "stage3_tags.parquet")
    assert tags.height == 8921 and tags["status"].to_list() == ["ok"] * 8921
