"""The runner's request and token limits, through the library API and the real SDK."""

from __future__ import annotations

import time

import pytest

from taxonomy.config import LLMConfig
from taxonomy.llm.cache import Cache
from taxonomy.llm.providers import GeminiProvider
from taxonomy.llm.runner import Job, Runner
from taxonomy.schemas import TagAnswer


def run_jobs(tmp_path, n: int, **limits) -> float:
    cfg = LLMConfig(concurrency=8, **limits)
    runner = Runner(
        GeminiProvider(cfg, vertex=False), cfg, Cache(tmp_path / "c.sqlite"), show_progress=False, rate_period_s=1.0
    )
    jobs = [Job(prompt=f"job {i} " + "x" * 396, schema=TagAnswer, validate=lambda a: []) for i in range(n)]
    start = time.perf_counter()
    answers = runner.run("limits", jobs)
    assert all(a.ok for a in answers) and runner.usage["limits"].calls == n
    return time.perf_counter() - start


@pytest.fixture
def quiet_server(gemini_env):
    gemini_env.responder = lambda req: {"items": []}
    return gemini_env


def test_requests_per_period_are_capped(quiet_server, tmp_path):
    # 2 requests per (shrunk) minute of 1 s: 6 requests need at least 2 s after the first burst.
    assert run_jobs(tmp_path, 6, requests_per_minute=2) >= 1.8


def test_tokens_per_period_are_capped(quiet_server, tmp_path):
    # Each prompt is about 100 tokens; 200 tokens per period lets 2 through per second.
    assert run_jobs(tmp_path, 6, tokens_per_minute=200) >= 1.8


def test_generous_limits_do_not_slow_anything(quiet_server, tmp_path):
    assert run_jobs(tmp_path, 6) < 1.0
