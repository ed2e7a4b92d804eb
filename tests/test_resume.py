"""A run killed midway (crash or Ctrl-C) resumes without paying any call twice."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time

import polars as pl
import pytest

from tests import responders
from tests.conftest import discover_command, write_pipeline
from tests.fake_gemini import FakeGeminiServer


def cached_answers(path) -> int:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT COUNT(*) FROM answers").fetchone()[0]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_killed_run_resumes_paying_no_call_twice(tmp_path, sig):
    toml = write_pipeline(tmp_path, extra="")
    toml.write_text(toml.read_text().replace("concurrency = 8", "concurrency = 2"))
    run_dir = tmp_path / "run"
    with FakeGeminiServer(responder=responders.model, latency_s=0.15) as server:
        cmd, env = discover_command(server, toml, run_dir)
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while server.count() < 8 and time.time() < deadline:
            time.sleep(0.05)
        proc.send_signal(sig)
        output = proc.communicate(timeout=30)[0].decode()
        assert proc.returncode != 0 and not (run_dir / "stage1_labels.parquet").exists()
        if sig == signal.SIGINT:
            assert "run the same command again to resume" in output
        paid_first = {r.texts[0] for r in server.requests}
        cached = cached_answers(tmp_path / "outputs" / "devai" / "cache.sqlite")
        assert cached >= 1
        server.reset()
        server.latency_s = 0.0  # the wait only had to keep calls in flight at the kill
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        paid_second = [r.texts[0] for r in server.requests]
    labels = pl.read_parquet(run_dir / "stage1_labels.parquet")
    assert labels.height == 365 and labels["status"].to_list() == ["ok"] * 365
    total_batches = len(paid_first | set(paid_second))
    # Every answer that reached the cache before the kill was not paid for again.
    assert len(paid_second) == total_batches - cached
