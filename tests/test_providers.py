"""The OpenAI-compatible provider and Vertex embeddings, over HTTP against the local server."""

from __future__ import annotations

import polars as pl

from tests.conftest import invoke, write_pipeline


def test_openai_compatible_server_runs_stage1(server, offline_env, monkeypatch, tmp_path):
    monkeypatch.setenv("LOCAL_LLM_KEY", "sk-local-secret-value-0123456789abcdef")
    toml = write_pipeline(tmp_path, limit=25, extra="")
    toml.write_text(
        toml.read_text().replace(
            "[llm]\n", f'[llm]\nbase_url = "{server.url}/v1"\nmodel = "qwen3-8b"\napi_key_env = "LOCAL_LLM_KEY"\n'
        )
    )
    result = invoke("discover", toml, "--provider", "openai", "--run-dir", tmp_path / "run", "-q")
    assert "Backend: openai (model qwen3-8b)" in result.output
    req = server.requests[0]
    assert req.mode == "openai" and req.model == "qwen3-8b" and req.schema["title"] == "DiscoveryAnswer"
    assert req.headers["authorization"] == "Bearer sk-local-secret-value-0123456789abcdef"
    labels = pl.read_parquet(tmp_path / "run" / "stage1_labels.parquet")
    assert labels["status"].to_list() == ["ok"] * 25


def test_openai_without_base_url_is_one_clear_line(offline_env, tmp_path):
    result = invoke("discover", write_pipeline(tmp_path, limit=5), "--provider", "openai", ok=False)
    assert result.exit_code == 2 and "llm.base_url" in result.output


def test_vertex_embeds_labels_with_text_embedding_005(server, monkeypatch, tmp_path):
    monkeypatch.setenv("GOOGLE_VERTEX_BASE_URL", server.url)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "p")
    monkeypatch.setenv("GOOGLE_VERTEX_ACCESS_TOKEN", "ya29.vertex-token-abcdef")
    toml = write_pipeline(tmp_path, limit=60)
    invoke("discover", toml, "--provider", "vertex", "--run-dir", tmp_path / "run", "-q")
    invoke("cluster", tmp_path / "run", "-q")
    embeds = [r for r in server.requests if r.kind == "embed"]
    assert embeds and all(r.mode == "vertex" and r.path.endswith("text-embedding-005:predict") for r in embeds)
    clusters = pl.read_parquet(tmp_path / "run" / "clusters.parquet")
    criteria = pl.read_parquet(tmp_path / "run" / "criteria.parquet")
    # Stage 2a clusters the criteria by their text and their labels: each criterion and each unique label once
    assert sum(len(r.texts) for r in embeds) == criteria.height + clusters.height
    server.reset()
    (tmp_path / "run" / "clusters.parquet").unlink()
    invoke("cluster", tmp_path / "run", "-q")
    assert server.count(kind="embed") == 0  # embeddings come from the cache the second time
