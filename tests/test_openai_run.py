"""A whole `taxonomy run` through the OpenAI-compatible provider, chat completions and /v1/embeddings,
against the local server speaking the OpenAI shapes, 429s included."""

from __future__ import annotations

import json

import polars as pl

from tests.conftest import invoke, write_pipeline


def openai_pipeline(tmp_path, server, limit: int = 60, embeddings: bool = True):
    extra = "[cluster]\nk = 10\n" + (
        '[embedding]\nprovider = "openai"\nopenai_model = "nomic-embed-text"\nbatch_size = 16\n' if embeddings else ""
    )
    toml = write_pipeline(tmp_path, limit=limit, extra=extra)
    toml.write_text(toml.read_text().replace("[llm]\n", f'[llm]\nbase_url = "{server.url}/v1"\nmodel = "qwen3-8b"\n'))
    return toml


def test_full_openai_run_completes_in_one_invocation_through_429s(server, offline_env, tmp_path):
    server.fail_next(429, times=3, retry_after=0)
    server.fail_next(429, times=2, kind="embed")
    run = tmp_path / "run"
    result = invoke(
        "run", openai_pipeline(tmp_path, server), "--provider", "openai", "--run-dir", run, "-q", "--no-report"
    )
    assert "Event loop is closed" not in result.output
    tags = pl.read_parquet(run / "stage3_tags.parquet")
    assert tags.height == 60 and tags["status"].to_list() == ["ok"] * 60
    manifest = json.loads((run / "manifest.json").read_text())
    stages = manifest["stages"]
    assert stages["cluster"]["embedder"] == "openai:nomic-embed-text"
    generate = [r for r in server.requests if r.kind == "generate"]
    embeds = [r for r in server.requests if r.kind == "embed"]
    assert {r.mode for r in server.requests} == {"openai"} and all(r.path == "/v1/embeddings" for r in embeds)
    # Every request reached the server once, plus the scripted 429s: nothing was paid twice.
    usage = manifest["usage"]
    assert len(generate) == usage["calls"] + 3 and len(embeds) == usage["embed_calls"] + 2
    assert usage["calls"] == sum(stages[s].get("calls", 0) for s in stages) > 0
    assert stages["cluster"]["embed_calls"] == usage["embed_calls"] and usage["embed_tokens"] > 0
    # Each criterion and each unique label was embedded exactly once (Stage 2a clusters criteria by both).
    labels = pl.read_parquet(run / "clusters.parquet").height
    assert sum(len(r.texts) for r in embeds[2:]) == tags.height + labels
    server.reset()
    again = invoke(
        "run", openai_pipeline(tmp_path, server), "--provider", "openai", "--run-dir", run, "-q", "--no-report"
    )
    assert again.output.count("up to date, skipped") == 5 and server.count() == 0


def test_openai_embeddings_need_a_model_name(server, offline_env, tmp_path):
    toml = openai_pipeline(tmp_path, server, limit=20)
    toml.write_text(toml.read_text().replace('openai_model = "nomic-embed-text"\n', ""))
    result = invoke("run", toml, "--provider", "openai", "--run-dir", tmp_path / "run", "-q", ok=False)
    assert result.exit_code == 2 and "embedding.openai_model: empty" in result.output
