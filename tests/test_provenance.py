"""Provenance: a stage is reused only when built from what it would read now; otherwise it and
every later stage are rebuilt, saying why, and unchanged LLM requests still come from the cache."""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest

from taxonomy.corpus import CorpusConfig, load_corpus
from tests.conftest import ROOT, invoke, write_pipeline


@pytest.fixture(scope="module")
def devai_rows() -> list[dict]:
    corpus = load_corpus(CorpusConfig(path=str(ROOT / "data" / "devai"), format="devai"), ROOT)
    return corpus.frame.select("task_id", "criterion_id", "text").to_dicts()


def table_pipeline(tmp: Path, rows: list[dict], name: str = "grow", k: int = 12, extra: str = "") -> Path:
    corpus = tmp / "criteria.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    toml = tmp / f"{name}.toml"
    toml.write_text(
        f'name = "{name}"\n[corpus]\npath = "{corpus}"\nformat = "table"\n'
        f"[llm]\nbackoff_initial_s = 0.01\nbackoff_max_s = 0.05\n[cluster]\nk = {k}\n"
        f'[merge]\nmin_caps = 3\nmax_caps = 6\n[output]\ndir = "{tmp / "outputs"}"\n{extra}'
    )
    return toml


def stage_lines(output: str) -> dict[str, str]:
    """What the run printed about each stage, its lines joined."""
    out: dict[str, str] = {}
    for line in output.splitlines():
        if ":" in line:
            stage = line.split(":", 1)[0]
            out[stage] = out.get(stage, "") + line + "\n"
    return out


def test_grown_corpus_rebuilds_every_stage_and_says_why(offline_env, tmp_path, devai_rows):
    toml = table_pipeline(tmp_path, devai_rows[:60])
    run = tmp_path / "run"
    invoke("run", toml, "--run-dir", run, "-q", "--no-report")
    again = invoke("run", toml, "--run-dir", run, "-q", "--no-report")
    assert again.output.count("up to date, skipped") == 5

    table_pipeline(tmp_path, devai_rows[:160])
    grown = invoke("run", toml, "--run-dir", run, "-q", "--no-report")
    lines = stage_lines(grown.output)
    assert (
        "recomputing" in lines["discover"]
        and "the corpus changed" in lines["discover"]
        and "160 criteria" in lines["discover"]
    )
    assert "skipped" not in grown.output
    assert pl.read_parquet(run / "stage1_labels.parquet").height == 160
    assert pl.read_parquet(run / "stage3_tags.parquet").height == 160
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["corpus"]["n_criteria"] == 160
    assert manifest["stages"]["tag"]["fingerprint_parts"]["corpus"] == manifest["corpus"]["content_hash"]


def test_changed_k_rebuilds_from_cluster_on(offline_env, tmp_path, devai_rows):
    toml = table_pipeline(tmp_path, devai_rows[:80], k=12)
    run = tmp_path / "run"
    invoke("run", toml, "--run-dir", run, "-q", "--no-report")
    table_pipeline(tmp_path, devai_rows[:80], k=8)
    result = invoke("run", toml, "--run-dir", run, "-q", "--no-report")
    lines = stage_lines(result.output)
    assert "skipped" in lines["discover"]
    assert "cluster: recomputing" in lines["cluster"] and "cluster.k 12 -> 8" in lines["cluster"]
    assert pl.read_parquet(run / "clusters.parquet")["cluster_id"].n_unique() == 8
    # The later stages are rebuilt too, never served from the k=12 run.
    assert all("skipped" not in lines[stage] for stage in ("canonicalize", "merge", "tag"))


def test_llm_rebuild_pays_only_for_changed_requests(gemini_env, tmp_path, devai_rows):
    toml = table_pipeline(tmp_path, devai_rows[:60], k=10)
    run = tmp_path / "run"
    invoke("run", toml, "--provider", "gemini", "--run-dir", run, "-q", "--no-report")
    assert gemini_env.count("generate") > 0
    gemini_env.reset()
    toml.write_text(toml.read_text().replace("max_caps = 6", "max_caps = 7"))
    result = invoke("run", toml, "--provider", "gemini", "--run-dir", run, "-q", "--no-report")
    assert "merge: recomputing" in result.output and "merge.max_caps 6 -> 7" in result.output
    kinds = [r.texts[0] for r in gemini_env.requests if r.kind == "generate"]
    # Only the merge prompt changed (and tagging, if the taxonomy came out different): discovery and naming are cached.
    assert kinds and not any("Criteria to annotate" in t or "ONE cluster" in t for t in kinds)


def test_run_dir_of_another_pipeline_is_refused(offline_env, tmp_path, devai_rows):
    run = tmp_path / "run"
    invoke("run", table_pipeline(tmp_path, devai_rows[:40], name="first"), "--run-dir", run, "-q", "--no-report")
    before = (run / "taxonomy.json").read_bytes()
    other = table_pipeline(tmp_path, devai_rows[:40], name="second")
    result = invoke("run", other, "--run-dir", run, "-q", ok=False)
    assert result.exit_code == 2 and "holds a run of pipeline 'first', not 'second'" in result.output
    assert "Traceback" not in result.output and (run / "taxonomy.json").read_bytes() == before


def test_partial_run_dir_of_a_failed_run_is_rebuilt(offline_env, tmp_path, devai_rows):
    toml = table_pipeline(tmp_path, devai_rows[:50])
    run = tmp_path / "run"
    invoke("run", toml, "--run-dir", run, "-q", "--no-report")
    # What a kill between writing an artifact and recording it leaves: files the manifest does not know,
    # a missing artifact, and a temporary file.
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest["stages"]["cluster"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    (run / "micro_capabilities.json").unlink()
    (run / ".stage3_tags.parquet.abc.tmp").write_bytes(b"PAR1 half")
    result = invoke("run", toml, "--run-dir", run, "-q", "--no-report")
    lines = stage_lines(result.output)
    assert "skipped" in lines["discover"] and "cluster: recomputing" in lines["cluster"]
    assert pl.read_parquet(run / "stage3_tags.parquet").height == 50


def test_older_run_without_fingerprints_is_rebuilt(offline_env, tmp_path, devai_rows):
    toml = table_pipeline(tmp_path, devai_rows[:40])
    run = tmp_path / "run"
    invoke("run", toml, "--run-dir", run, "-q", "--no-report")
    manifest = json.loads((run / "manifest.json").read_text())
    for record in manifest["stages"].values():
        record.pop("fingerprint"), record.pop("fingerprint_parts")
    manifest.pop("run_format")
    (run / "manifest.json").write_text(json.dumps(manifest))
    result = invoke("run", toml, "--run-dir", run, "-q", "--no-report")
    assert (
        "discover: recomputing (with every later stage): no fingerprint recorded (made by an older version"
        in result.output
    )


def test_a_run_built_by_other_code_of_the_offline_backend_is_rebuilt(offline_env, tmp_path, devai_rows, monkeypatch):
    """With no model, the code is the model: after an upgrade, the run the older offline code built is not
    served as current (it was: every stage said "up to date, skipped")."""
    from taxonomy import provenance

    toml = table_pipeline(tmp_path, devai_rows[:40])
    run = tmp_path / "run"
    invoke("run", toml, "--run-dir", run, "-q", "--no-report")
    manifest = json.loads((run / "manifest.json").read_text())
    assert {
        manifest["stages"][stage]["fingerprint_parts"]["backend"]["code"] for stage in ("discover", "merge", "tag")
    } == {provenance.code_hash()}
    assert invoke("run", toml, "--run-dir", run, "-q", "--no-report").output.count("up to date, skipped") == 5
    monkeypatch.setattr(provenance, "code_hash", lambda: "another-build")
    result = invoke("run", toml, "--run-dir", run, "-q", "--no-report")
    lines = stage_lines(result.output)
    assert "discover: recomputing" in lines["discover"] and "another-build" in lines["discover"], result.output
    assert "skipped" not in result.output


def test_single_stage_refuses_stale_input(offline_env, tmp_path, devai_rows):
    toml = table_pipeline(tmp_path, devai_rows[:40], k=10)
    run = tmp_path / "run"
    invoke("run", toml, "--run-dir", run, "-q", "--no-report")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["settings"]["cluster"]["k"] = 6  # as if the run's cluster settings had been changed
    (run / "manifest.json").write_text(json.dumps(manifest))
    result = invoke("canonicalize", run, "-q", ok=False)
    assert result.exit_code == 2 and "stage cluster is out of date (config cluster.k 10 -> 6)" in result.output


def test_edited_taxonomy_is_refused_until_retagged(offline_env, tmp_path):
    run = tmp_path / "run"
    invoke("run", write_pipeline(tmp_path, limit=120), "--run-dir", run, "-q", "--no-report")
    verdicts = f"devai:{ROOT / 'data' / 'devai'}"
    invoke("breakdown", run, "--verdicts", verdicts, "--boot", "0")
    taxonomy = json.loads((run / "taxonomy.json").read_text())
    old = taxonomy["capabilities"][0]["name"]
    taxonomy["capabilities"][0]["name"] = "renamed_evidence_inspection_capability"
    (run / "taxonomy.json").write_text(json.dumps(taxonomy))
    for args in (("report", run), ("breakdown", run, "--verdicts", verdicts), ("guidance", run, "-q")):
        result = invoke(*args, ok=False)
        assert (
            result.exit_code == 2
            and "tagged against taxonomy" in result.output
            and f"taxonomy tag {run}" in result.output
        )
    invoke("tag", run, "-q")
    tags = pl.read_parquet(run / "stage3_tags.parquet")
    assert old not in set(tags["primary"]) and "renamed_evidence_inspection_capability" in set(tags["primary"])
    invoke("report", run)
    html = (run / "report.html").read_text()
    # The breakdown made with the old names is left out of the report, not shown as current.
    assert "breakdown/ was computed with taxonomy" in html
    invoke("guidance", run, "-q")
    uses = json.loads((run / "manifest.json").read_text())["uses"]
    assert uses["guidance"]["taxonomy_hash"] != uses["breakdown"]["taxonomy_hash"]


def test_artifacts_follow_the_umask(offline_env, tmp_path, devai_rows):
    old = os.umask(0o022)
    try:
        run = tmp_path / "run"
        invoke("run", table_pipeline(tmp_path, devai_rows[:40]), "--run-dir", run, "-q")
    finally:
        os.umask(old)
    for name in ("report.html", "taxonomy.json", "stage3_tags.parquet", "manifest.json", "label_embeddings.npy"):
        assert (run / name).stat().st_mode & 0o777 == 0o644, name
