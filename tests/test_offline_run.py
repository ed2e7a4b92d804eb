"""The main job with no key: the whole pipeline offline through the CLI, and a frozen taxonomy reused."""

from __future__ import annotations

import json
import re

import polars as pl

from taxonomy.schemas import Taxonomy
from tests.conftest import ROOT, invoke, write_pipeline
from tests.test_stages import assert_taxonomy_passes_every_check


def test_offline_run_on_devai_passes_every_check(offline_env, tmp_path):
    run_dir = tmp_path / "run"
    result = invoke("run", write_pipeline(tmp_path), "--run-dir", run_dir)
    assert "Backend: offline" in result.output and "GEMINI_API_KEY" in result.output
    assert result.output.count("Backend:") == 1
    assert f"Report:   {run_dir / 'report.html'}" in result.output.replace("\n", "")
    taxonomy, micro = assert_taxonomy_passes_every_check(run_dir)
    assert all(cap.labels for cap in taxonomy.capabilities)
    tags = pl.read_parquet(run_dir / "stage3_tags.parquet")
    assert tags["status"].to_list() == ["ok"] * 365 and set(tags["primary"]) <= set(taxonomy.names())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["backend"] == "offline" and manifest["model"] == "none" and manifest["totals"]["peak_rss_mb"] > 0


def test_frozen_taxonomy_tags_a_corpus_as_the_run_did(offline_env, tmp_path):
    run_dir = tmp_path / "run"
    invoke("run", write_pipeline(tmp_path), "--run-dir", run_dir, "-q", "--no-report")
    frozen = tmp_path / "frozen"
    invoke("tag", ROOT / "pipelines" / "devai.toml", "--taxonomy", run_dir / "taxonomy.json", "--run-dir", frozen, "-q")
    a = pl.read_parquet(run_dir / "stage3_tags.parquet").select("criterion_id", "primary")
    b = pl.read_parquet(frozen / "stage3_tags.parquet").select("criterion_id", "primary")
    assert (
        a.join(b, on="criterion_id", suffix="_frozen").filter(pl.col("primary") != pl.col("primary_frozen")).height == 0
    )


def test_bare_corpus_file_is_tagged_against_a_frozen_taxonomy(offline_env, tmp_path):
    run_dir = tmp_path / "run"
    invoke("run", write_pipeline(tmp_path, limit=120), "--run-dir", run_dir, "-q", "--no-report")
    corpus = tmp_path / "new_rubric.jsonl"
    corpus.write_text(
        '{"task_id": "t1", "text": "The reported F1 score on the test split is at least 0.80."}\n'
        '{"task_id": "t1", "text": "A README explains how to run the training script."}\n'
    )
    result = invoke("tag", corpus, "--taxonomy", run_dir / "taxonomy.json", "--run-dir", tmp_path / "new", "-q")
    tags = pl.read_parquet(tmp_path / "new" / "stage3_tags.parquet")
    names = Taxonomy.model_validate_json((run_dir / "taxonomy.json").read_text()).names()
    assert tags.height == 2 and set(tags["primary"]) <= set(names) and "Share of criteria" in result.output


def test_bad_config_is_one_clear_line(offline_env, tmp_path):
    toml = write_pipeline(tmp_path)
    toml.write_text(toml.read_text() + "[cluster]\nk = 1\n")
    result = invoke("run", toml, ok=False)
    assert result.exit_code == 2 and "key cluster.k" in result.output and "fix:" in result.output


def test_smoke_run_does_not_take_the_full_runs_directory(offline_env, tmp_path):
    toml = write_pipeline(tmp_path)
    invoke("discover", toml, "--limit", "10", "-q")
    invoke("discover", toml, "-q")
    small = pl.read_parquet(tmp_path / "outputs" / "devai" / "offline-first10" / "criteria.parquet")
    full = pl.read_parquet(tmp_path / "outputs" / "devai" / "offline" / "criteria.parquet")
    assert (small.height, full.height) == (10, 365)


def test_capability_descriptions_are_distinct(offline_env, tmp_path):
    run_dir = tmp_path / "run"
    invoke("run", ROOT / "pipelines" / "paperbench.toml", "--run-dir", run_dir, "-q", "--no-report")
    taxonomy = Taxonomy.model_validate_json((run_dir / "taxonomy.json").read_text())
    gists = [re.sub(r"\s*\([^)]*\)", "", c.description) for c in taxonomy.capabilities]  # ignore the name in brackets
    assert len(set(gists)) == len(gists)


def test_tagging_against_a_frozen_taxonomy_never_overwrites_the_pipelines_run(offline_env, tmp_path):
    toml = write_pipeline(tmp_path)
    invoke("run", toml, "-q", "--no-report")
    own = tmp_path / "outputs" / "devai" / "offline" / "stage3_tags.parquet"
    before = own.read_bytes()
    edited = json.loads(own.with_name("taxonomy.json").read_text())
    edited["capabilities"][0]["name"] = "hand_renamed_value_check_capability"
    frozen = tmp_path / "edited.json"
    frozen.write_text(json.dumps(edited))
    invoke("tag", toml, "--taxonomy", frozen, "-q")
    assert own.read_bytes() == before
    (elsewhere,) = (tmp_path / "outputs" / "devai").glob("offline-taxonomy-*/stage3_tags.parquet")
    assert "hand_renamed_value_check_capability" in set(pl.read_parquet(elsewhere)["tags"].explode())


def _error_line(result) -> str:
    lines = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, result.output
    return lines[0]


def test_a_limit_below_the_bounds_takes_the_nearest_bounds(offline_env, tmp_path):
    """5 criteria cannot make 8 capabilities: they were refused (exit 2); the run now takes the nearest bounds the
    five can meet, says so in one line, and serves the taxonomy, which `merge` alone gives again."""
    run_dir = tmp_path / "run"
    toml = write_pipeline(tmp_path, limit=5)
    result = invoke("run", toml, "--run-dir", run_dir, "--no-report")
    notes = [line for line in result.output.splitlines() if "cannot make 8-10" in line]
    assert len(notes) == 1 and "5 criteria" in notes[0], result.output
    kept = Taxonomy.model_validate_json((run_dir / "taxonomy.json").read_text())
    assert 1 <= len(kept.capabilities) <= 5 and not kept.violations
    assert not (run_dir / "taxonomy.rejected.json").exists()
    assert invoke("merge", run_dir, "-q").exit_code == 0
    assert pl.read_parquet(run_dir / "stage3_tags.parquet").height == 5


def test_thirty_criterion_slice_holds_the_constraints_or_fails(offline_env, tmp_path):
    from taxonomy.config import MergeConfig

    cfg = MergeConfig()
    for corpus in ("devai", "healthbench"):
        run_dir = tmp_path / corpus
        result = invoke(
            "run",
            write_pipeline(tmp_path, corpus=corpus, limit=30),
            "--run-dir",
            run_dir,
            "-q",
            "--no-report",
            ok=False,
        )
        if result.exit_code == 0:
            taxonomy, _ = assert_taxonomy_passes_every_check(run_dir)
            assert not taxonomy.violations
            shares = pl.read_parquet(run_dir / "stage3_tags.parquet")["primary"].value_counts(normalize=True)[
                "proportion"
            ]
            assert cfg.min_caps <= len(taxonomy.capabilities) <= cfg.max_caps and shares.max() <= cfg.max_share
        else:
            assert result.exit_code == 2 and "breaks a hard constraint" in _error_line(result)


def test_llm_path_takes_the_nearest_bounds_too(gemini_env, tmp_path):
    from tests import responders

    def one_capability_merge(req):  # the model lumps everything together; the repair splits it as far as it can
        prompt = req.texts[0]
        return responders.merge(prompt, n_caps=1) if responders.kind(prompt) == "merge" else responders.model(req)

    gemini_env.responder = one_capability_merge
    run_dir = tmp_path / "run"
    toml = write_pipeline(tmp_path, limit=5)
    result = invoke("run", toml, "--provider", "gemini", "--run-dir", run_dir, "-q", "--no-report")
    assert len([line for line in result.output.splitlines() if "cannot make 8-10" in line]) == 1, result.output
    kept = Taxonomy.model_validate_json((run_dir / "taxonomy.json").read_text())
    assert 1 <= len(kept.capabilities) <= 5 and not kept.violations


def test_offline_taxonomy_md_says_what_it_is_and_lists_capabilities_by_share(offline_env, tmp_path):
    """The key-less taxonomy.md: one sentence that no model read the criteria and how to add meaning; the table
    largest first, in the order the printed summary gives; each capability its title, size and quoted criteria."""
    run_dir = tmp_path / "run"
    result = invoke("run", write_pipeline(tmp_path), "--run-dir", run_dir, "--no-report")
    md = (run_dir / "taxonomy.md").read_text()
    assert "No model read these criteria" in md and "GEMINI_API_KEY" in md and "--provider openai" in md
    assert 'taxonomy edit RUN describe NAME "what it checks"' in md
    rows = re.findall(r"^\| `(\w+)` \| ([\d.]+)% \|", md, flags=re.M)
    shares = [float(share) for _, share in rows]
    assert len(rows) == len(Taxonomy.model_validate_json((run_dir / "taxonomy.json").read_text()).capabilities)
    assert shares == sorted(shares, reverse=True)
    printed = re.findall(r"^\| (check_\w+) \| \d+ \|", result.output, flags=re.M)
    assert [name for name, _ in rows] == printed
    sections = md.split("\n## `")[1:]
    assert [s.split("`")[0] for s in sections if not s.startswith("Repairs")] == printed
    for section in sections:
        assert re.search(r"^\d+ criteria \([\d.]+%\)\. Criteria such as “", section.split("\n\n")[1])
    # three criteria quoted, where a capability holds three different ones
    assert sum(section.split("\n\n")[1].count("”; “") == 2 for section in sections) >= len(sections) - 1
    assert "Placing a criterion" not in md and "catch-all" not in md and "open with" not in md


def test_the_bundled_offline_example_is_what_the_tool_writes_today(offline_env, tmp_path):
    """outputs/examples/devai-offline/ is shown to people as what `taxonomy run pipelines/devai.toml` writes;
    an example from an older version would pass old texts off as current ones."""
    run_dir = tmp_path / "run"
    invoke("run", ROOT / "pipelines" / "devai.toml", "--run-dir", run_dir, "-q", "--no-report")
    example = ROOT / "outputs" / "examples" / "devai-offline"
    for name in ("taxonomy.md", "stage3_summary.md"):
        assert (run_dir / name).read_text() == (example / name).read_text(), (
            f"{example / name} is stale; fix: rerun the commands in outputs/README.md and copy the files"
        )


def test_changing_an_offline_knob_rebuilds_the_stages(offline_env, tmp_path):
    """A run built with other [offline] settings is not served as current: every stage runs again."""
    run_dir = tmp_path / "run"
    toml = write_pipeline(tmp_path, limit=120)
    invoke("run", toml, "--run-dir", run_dir, "-q", "--no-report")
    before = json.loads((run_dir / "manifest.json").read_text())["stages"]["discover"]["fingerprint"]
    toml.write_text(toml.read_text() + "[offline]\nfine_kinds = 60\n")
    invoke("run", toml, "--run-dir", run_dir, "-q", "--no-report")
    after = json.loads((run_dir / "manifest.json").read_text())["stages"]
    assert after["discover"]["fingerprint"] != before
    assert pl.read_parquet(run_dir / "stage1_labels.parquet")["labels"].explode().n_unique() <= 60
