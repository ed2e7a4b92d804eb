"""Repeated context and its price: the shared prompt prefix first, Gemini's cached tokens read from
usage_metadata, priced at llm.prices.cached_input in usage.jsonl and the manifest, and explicit
context caches (client.caches) made where they pay, through the real SDK against the test server."""

from __future__ import annotations

import json

import pytest

from taxonomy.config import Prices
from tests import responders
from tests.conftest import invoke, write_pipeline


def ledger(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "usage.jsonl").read_text().splitlines()]


def discover(tmp_path, extra: str = "", limit: int = 60):
    toml = write_pipeline(tmp_path, limit=limit, extra=extra)
    invoke("discover", toml, "--provider", "gemini", "--run-dir", tmp_path / "run", "-q")
    return tmp_path / "run"


def test_explicit_cache_carries_the_shared_prefix_and_is_priced(gemini_env, tmp_path):
    run_dir = discover(tmp_path)
    server = gemini_env
    sent = [r for r in server.requests if r.kind == "generate"]
    assert (
        server.cache_calls["create"] == 1 and server.cache_calls["delete"] == 1 and not server.caches
    )  # deleted when the stage ended
    assert all(r.cached_content for r in sent)
    # Only the batch went over the wire; the model read the whole prompt (the cache's prefix, then the batch).
    assert all(r.sent_texts[0].startswith("Task ID: ") and "Criteria to annotate" in r.sent_texts[0] for r in sent)
    assert all(r.texts[0].startswith("A capability is a property of the VERIFIER") for r in sent)
    entries = ledger(run_dir)
    calls = [e for e in entries if e["kind"] == "generate"]
    written = [e for e in entries if e["kind"] == "cache"]
    kept = [e for e in entries if e["kind"] == "cache_storage"]
    assert len(calls) == len(sent) and len(written) == 1 and len(kept) == 2
    # Storage is booked for the whole TTL when the cache is made (a killed run leaves it to expire), and the
    # unused part is credited back when the stage deletes it.
    tokens, ttl = written[0]["prompt_tokens"], 3600
    assert kept[0]["prompt_tokens"] == tokens * ttl and kept[1]["prompt_tokens"] < 0
    assert tokens <= sum(e["prompt_tokens"] for e in kept) <= tokens * 60
    assert all(0 < e["cached_tokens"] == written[0]["prompt_tokens"] < e["prompt_tokens"] for e in calls)
    stage = json.loads((run_dir / "manifest.json").read_text())["stages"]["discover"]
    assert (
        stage["cached_prompt_tokens"] == sum(e["cached_tokens"] for e in calls)
        and stage["cache_tokens"] == written[0]["prompt_tokens"]
    )
    prices = Prices()
    expected = (
        (stage["prompt_tokens"] - stage["cached_prompt_tokens"]) * prices.input
        + stage["cached_prompt_tokens"] * prices.input / 10
        + stage["output_tokens"] * prices.output
        + stage["cache_tokens"] * prices.input
        + stage["cache_token_seconds"] / 3600 * prices.cache_storage
    ) / 1e6
    assert stage["cost_usd"] == pytest.approx(expected, abs=1e-6)
    uncached = (stage["prompt_tokens"] * prices.input + stage["output_tokens"] * prices.output) / 1e6
    assert stage["cost_usd"] < 0.6 * uncached


def test_a_rerun_makes_no_cache_and_pays_nothing(gemini_env, tmp_path):
    discover(tmp_path)
    gemini_env.reset()
    gemini_env.cache_calls.clear()
    invoke("discover", tmp_path / "run", "-q")
    assert gemini_env.count() == 0 and gemini_env.cache_calls["create"] == 0
    assert (
        json.loads((tmp_path / "run" / "manifest.json").read_text())["stages"]["discover"]["cache_hits"] > 0
    )  # it did run again


def test_without_explicit_caches_implicit_caching_is_read_and_priced(gemini_env, tmp_path):
    run_dir = discover(tmp_path, extra="[llm.context_cache]\nenabled = false\n")
    assert gemini_env.cache_calls["create"] == 0
    calls = [e for e in ledger(run_dir) if e["kind"] == "generate"]
    # The calls sent before the server has seen the prefix pay it in full (at most one per concurrent
    # slot); later ones find it cached (implicit caching). The ledger is in finishing order, not sending
    # order, so the uncached calls are counted rather than expected first.
    uncached = [e for e in calls if not e.get("cached_tokens")]
    assert 1 <= len(uncached) <= 8 < len(calls)
    stage = json.loads((run_dir / "manifest.json").read_text())["stages"]["discover"]
    assert stage["cached_prompt_tokens"] > 0.5 * stage["prompt_tokens"] and stage["cache_tokens"] == 0


def test_a_prefix_too_short_to_pay_gets_no_cache(gemini_env, tmp_path):
    discover(tmp_path, extra="[llm.context_cache]\nmin_tokens = 100000\n")
    assert gemini_env.cache_calls["create"] == 0 and not any(r.cached_content for r in gemini_env.requests)


def test_a_refused_cache_leaves_the_stage_to_send_its_prefix(gemini_env, tmp_path, monkeypatch):
    from tests.fake_gemini import FakeGeminiServer, Reply

    monkeypatch.setattr(
        FakeGeminiServer,
        "_context_cache",
        lambda self, method, cache_id, raw: Reply.error(400, "cached content is too small"),
    )
    run_dir = discover(tmp_path)
    sent = [r for r in gemini_env.requests if r.kind == "generate"]
    assert sent and not any(r.cached_content for r in sent) and all("Criteria to annotate" in r.texts[0] for r in sent)
    assert not [e for e in ledger(run_dir) if e["kind"].startswith("cache")]


def test_stage3_prefix_holds_the_taxonomy_and_is_cached(gemini_env, tmp_path):
    toml = write_pipeline(tmp_path, limit=60, extra="[cluster]\nk = 12\n")
    invoke("run", toml, "--provider", "gemini", "--run-dir", tmp_path / "run", "-q", "--no-report")
    tags = [r for r in gemini_env.requests if r.kind == "generate" and responders.kind(r.texts[0]) == "tag"]
    assert tags and all(r.cached_content and "Capability taxonomy:" not in r.sent_texts[0] for r in tags)
    stage = json.loads((tmp_path / "run" / "manifest.json").read_text())["stages"]["tag"]
    assert stage["cached_prompt_tokens"] > 0.5 * stage["prompt_tokens"]
