"""Usage in manifest.json is the sum over every process that worked on the run: a run killed and
resumed again and again still accounts for every call paid."""

from __future__ import annotations

import json
import signal
import subprocess
import time

from tests import responders
from tests.conftest import discover_command, write_pipeline
from tests.fake_gemini import FakeGeminiServer


def test_usage_survives_kill_and_resume_cycles(tmp_path):
    toml = write_pipeline(tmp_path)
    toml.write_text(toml.read_text().replace("concurrency = 8", "concurrency = 2"))
    run_dir = tmp_path / "run"
    cycles = 4
    with FakeGeminiServer(responder=responders.model, latency_s=0.08) as server:
        cmd, env = discover_command(server, toml, run_dir)
        for cycle in range(1, cycles + 1):
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.time() + 60
            while server.count() < 6 * cycle and time.time() < deadline:
                time.sleep(0.02)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        before_last = server.count()
        server.latency_s = 0.0  # the wait only had to keep calls in flight at each kill
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        sent = server.requests
    recorded = json.loads((run_dir / "manifest.json").read_text())["stages"]["discover"]
    # Each kill can lose at most the calls in flight (concurrency 2) before their answers arrived.
    assert len(sent) - 2 * cycles <= recorded["calls"] <= len(sent)
    # The old accounting recorded only the last process's calls.
    assert recorded["calls"] > len(sent) - before_last
    tokens = sum(max(1, (sum(map(len, r.texts)) + len(r.system or "")) // 4) for r in sent)
    # Tokens likewise: all but those of the calls in flight at each kill.
    assert tokens * (len(sent) - 2 * cycles) / len(sent) * 0.95 <= recorded["prompt_tokens"] <= tokens
