"""Batch mode (`--batch`): the real google-genai SDK against the test server's Batch and Files API."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import polars as pl
import pytest

from tests import responders
from tests.conftest import API_KEY, discover_command, invoke, write_pipeline
from tests.fake_gemini import FakeGeminiServer, Reply

FAST = "[llm.batch]\npoll_s = 0.02\n"


def online_generates(server) -> int:
    return sum(1 for r in server.requests if r.kind == "generate" and r.mode == "gemini")


def manifest(run_dir) -> dict:
    return json.loads((run_dir / "manifest.json").read_text())


def test_devai_run_in_batch_mode_pays_each_item_once_at_the_batch_price(tmp_path, gemini_env):
    server = gemini_env
    run_dir = tmp_path / "run"
    toml = write_pipeline(tmp_path, extra=FAST)
    result = invoke("run", toml, "--provider", "gemini", "--batch", "--run-dir", run_dir, "-q", "--no-report")
    assert "Taxonomy:" in result.output
    assert online_generates(server) == 0  # everything went through batch jobs
    assert (
        server.batch.calls["create"] == 6
    )  # discover, cluster (embeddings), canonicalize, merge membership and boundaries, tag
    assert max(server.batch.answered_keys.values()) == 1
    stages = manifest(run_dir)["stages"]
    calls = sum(stages[s].get("calls", 0) for s in ("discover", "canonicalize", "merge", "tag"))
    assert calls == server.count("generate", mode="batch")
    tags = pl.read_parquet(run_dir / "stage3_tags.parquet")
    assert tags.height == 365 and set(tags["status"]) == {"ok"}
    # Charged at half the online price (the default batch price), from the tokens the server reported.
    d = stages["discover"]
    assert d["batch_calls"] == d["calls"] and d["batch_prompt_tokens"] == d["prompt_tokens"] > 0
    # Prompt tokens the server served from its (implicit) cache at half the cached price.
    assert 0 < d["batch_cached_prompt_tokens"] == d["cached_prompt_tokens"] < d["prompt_tokens"]
    expected = (
        (d["prompt_tokens"] - d["cached_prompt_tokens"]) * 0.25
        + d["cached_prompt_tokens"] * 0.025
        + d["output_tokens"] * 1.50
    ) / 1e6
    assert d["cost_usd"] == pytest.approx(expected, abs=1e-6)  # the manifest rounds to 6 decimals
    jobs = json.loads((run_dir / "batch_jobs.json").read_text())
    assert {j["stage"] for j in jobs} == {"discover", "cluster", "canonicalize", "merge", "tag"}
    assert server.count("embed", mode="gemini") == 0  # labels were embedded by a batch embedding job
    assert all(j["name"].startswith("batches/") and j["state"] == "collected" for j in jobs)
    # A second run pays nothing: every answer is cached, batch or online alike.
    before = server.batch.calls["create"]
    invoke("run", toml, "--provider", "gemini", "--batch", "--run-dir", tmp_path / "again", "-q", "--no-report")
    assert server.batch.calls["create"] == before and online_generates(server) == 0


def test_large_jobs_go_up_as_a_file_and_results_come_down_as_one(tmp_path, gemini_env):
    server = gemini_env
    toml = write_pipeline(tmp_path, extra="[llm.batch]\npoll_s = 0.02\ninline_max_mb = 0.001\n")
    invoke("discover", toml, "--provider", "gemini", "--batch", "--run-dir", tmp_path / "run", "-q")
    assert server.batch.calls["upload"] == 1 and server.batch.calls["download"] == 1
    labels = pl.read_parquet(tmp_path / "run" / "stage1_labels.parquet")
    assert labels.height == 365 and set(labels["status"]) == {"ok"}
    assert max(server.batch.answered_keys.values()) == 1


def _bad_then_good(req):
    """First answers miss the label suffix; re-asks (three turns) are answered well."""
    answer = responders.model(req)
    if len(req.texts) == 1 and responders.kind(req.texts[0]) == "discover":
        for item in answer["items"]:
            item["capabilities"] = ["criterion_check"]
    return answer


@pytest.mark.parametrize("online_below, follow_up", [(0, "batch"), (10_000, "gemini")])
def test_invalid_answers_are_reasked_in_a_follow_up_batch_or_online(tmp_path, monkeypatch, online_below, follow_up):
    with FakeGeminiServer(responder=_bad_then_good) as server:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
        monkeypatch.setenv("GEMINI_API_KEY", API_KEY)
        toml = write_pipeline(tmp_path, extra=f"[llm.batch]\npoll_s = 0.02\nonline_below = {online_below}\n")
        invoke("discover", toml, "--provider", "gemini", "--batch", "--run-dir", tmp_path / "run", "-q")
        reasks = [r for r in server.requests if len(r.texts) == 3]
        first = [r for r in server.requests if len(r.texts) == 1]
    assert reasks and {r.mode for r in reasks} == {follow_up}
    assert {r.mode for r in first} == {"batch"}
    labels = pl.read_parquet(tmp_path / "run" / "stage1_labels.parquet")
    assert set(labels["status"]) == {"ok"} and set(labels["attempts"]) == {2}


def test_items_the_job_could_not_answer_are_asked_again(tmp_path, gemini_env):
    server = gemini_env
    server.fail_next(500, times=3)
    toml = write_pipeline(tmp_path, extra="[llm.batch]\npoll_s = 0.02\nonline_below = 0\n")
    result = invoke("discover", toml, "--provider", "gemini", "--batch", "--run-dir", tmp_path / "run", "-q")
    assert "retries=3" in result.output
    labels = pl.read_parquet(tmp_path / "run" / "stage1_labels.parquet")
    assert labels.height == 365 and set(labels["status"]) == {"ok"}
    assert server.batch.calls["create"] == 2  # the three errored items went into one follow-up job


def test_a_failed_job_says_what_to_do_and_the_same_command_then_finishes(tmp_path, gemini_env):
    server = gemini_env
    server.batch.end_next_job("FAILED", "internal error in the batch backend")
    toml = write_pipeline(tmp_path, extra=FAST)
    args = ("discover", toml, "--provider", "gemini", "--batch", "--run-dir", tmp_path / "run", "-q")
    result = invoke(*args, ok=False)
    assert result.exit_code == 2
    line = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
    assert (
        len(line) == 1 and "ended FAILED" in line[0] and "run the same command again" in line[0] and "online" in line[0]
    )
    assert not (tmp_path / "run" / "stage1_labels.parquet").exists()
    invoke(*args)
    assert server.batch.calls["create"] == 2
    assert pl.read_parquet(tmp_path / "run" / "stage1_labels.parquet").height == 365


def test_vertex_with_batch_mode_is_refused_in_one_line_naming_online_mode(tmp_path, monkeypatch):
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "p")
    monkeypatch.setenv("GOOGLE_VERTEX_ACCESS_TOKEN", "token")
    toml = write_pipeline(tmp_path)
    result = invoke("discover", toml, "--provider", "vertex", "--batch", "-q", ok=False)
    assert result.exit_code == 2
    errors = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "--provider gemini only" in errors[0] and "online mode" in errors[0]


def _start(tmp_path, server, toml, run_dir):
    cmd, env = discover_command(server, toml, run_dir, "--batch")
    return cmd, env, subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _wait_polling(server, proc, polls: int = 2) -> None:
    deadline = time.time() + 60
    while server.batch.calls["get"] < polls and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    assert server.batch.calls["get"] >= polls, proc.communicate()[0].decode()


def test_kill_9_while_polling_then_the_same_command_polls_the_same_job(tmp_path):
    toml = write_pipeline(tmp_path, extra=FAST)
    run_dir = tmp_path / "run"
    with FakeGeminiServer(responder=responders.model) as server:
        server.batch.pending_s, server.batch.running_s = 1.5, 0.5  # still pending when killed after two polls
        cmd, env, proc = _start(tmp_path, server, toml, run_dir)
        _wait_polling(server, proc)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        recorded = json.loads((run_dir / "batch_jobs.json").read_text())
        assert len(recorded) == 1 and recorded[0]["name"].startswith("batches/")
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert server.batch.calls["create"] == 1  # the restarted run polled the recorded job
        assert server.batch.items_answered == len(server.batch.answered_keys)  # no item paid twice
        assert max(server.batch.answered_keys.values()) == 1
        assert online_generates(server) == 0
    assert pl.read_parquet(run_dir / "stage1_labels.parquet").height == 365


def test_ctrl_c_while_polling_cancels_the_job(tmp_path):
    toml = write_pipeline(tmp_path, extra=FAST)
    with FakeGeminiServer(responder=responders.model) as server:
        server.batch.pending_s = 30
        cmd, env, proc = _start(tmp_path, server, toml, tmp_path / "run")
        _wait_polling(server, proc)
        proc.send_signal(signal.SIGINT)
        output = proc.communicate(timeout=30)[0].decode()
        assert proc.returncode != 0 and "run the same command again" in output
        assert server.batch.calls["cancel"] == 1
        (job_id,) = server.batch.jobs
        assert server.batch.state(job_id) == "BATCH_STATE_CANCELLED" and server.batch.items_answered == 0
    recorded = json.loads((tmp_path / "run" / "batch_jobs.json").read_text())
    assert recorded[0]["state"] == "cancelled"


def test_batch_prices_default_to_half_and_can_be_set():
    from taxonomy.config import Prices
    from taxonomy.llm.runner import Usage

    u = Usage(
        calls=2,
        prompt_tokens=3_000_000,
        output_tokens=1_000_000,
        batch_calls=1,
        batch_prompt_tokens=1_000_000,
        batch_output_tokens=1_000_000,
    )
    assert u.cost(Prices(input=1.0, output=4.0)) == pytest.approx(2 * 1.0 + 0.5 + 2.0)
    assert u.cost(Prices(input=1.0, output=4.0, batch_input=0.1, batch_output=0.2)) == pytest.approx(2.0 + 0.1 + 0.2)


def test_an_item_error_reply_is_not_cached(tmp_path, gemini_env):
    """A per-item error is asked again, never stored as an answer."""
    server = gemini_env
    server.push(Reply.error(429, "quota"), times=1)
    toml = write_pipeline(tmp_path, extra="[llm.batch]\npoll_s = 0.02\nonline_below = 1000\n")
    invoke("discover", toml, "--provider", "gemini", "--batch", "--run-dir", tmp_path / "run", "-q")
    assert online_generates(server) == 1  # the one errored item, asked again online
    assert pl.read_parquet(tmp_path / "run" / "stage1_labels.parquet")["status"].to_list() == ["ok"] * 365


def test_a_recorded_job_deleted_on_the_server_is_submitted_again(tmp_path, gemini_env):
    server = gemini_env
    toml = write_pipeline(tmp_path, extra=FAST)
    run_dir = tmp_path / "run"
    invoke("discover", toml, "--provider", "gemini", "--batch", "--run-dir", run_dir, "--limit", "40", "-q")
    # As if killed while polling: the record says submitted, the answers never reached the cache.
    jobs = json.loads((run_dir / "batch_jobs.json").read_text())
    jobs[0]["state"] = "submitted"
    (run_dir / "batch_jobs.json").write_text(json.dumps(jobs))
    (run_dir / "stage1_labels.parquet").unlink()
    for path in (tmp_path / "outputs" / "devai").glob("cache.sqlite*"):
        path.unlink()
    server.batch.jobs[jobs[0]["name"].split("/")[-1]].deleted = True
    invoke("discover", toml, "--provider", "gemini", "--batch", "--run-dir", run_dir, "--limit", "40", "-q")
    assert server.batch.calls["create"] == 2
    states = [j["state"] for j in json.loads((run_dir / "batch_jobs.json").read_text())]
    assert states == ["gone", "collected"]


def test_batch_mode_does_not_import_the_runner():
    """The dependency runs one way: runner.py uses batch.py; batch.py builds on jobs.py, never on runner.py."""
    import subprocess

    code = (
        "import sys, taxonomy.llm.batch; assert 'taxonomy.llm.runner' not in sys.modules, 'batch imported the runner'"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    from pathlib import Path

    import taxonomy.llm.batch as batch

    import re

    assert not re.search(
        r"^\s*(from taxonomy\.llm\.runner|from taxonomy\.llm import runner|import taxonomy\.llm\.runner)",
        Path(batch.__file__).read_text(),
        re.M,
    )  # not even inside a function


def test_a_batch_stage_leaves_no_job_in_the_runner(tmp_path, gemini_env):
    """The runner keys each job's first request once per run() call; batch mode must drop that memo
    too, or every job of every stage (prompts included) stays alive as long as the runner."""
    from taxonomy.config import load_config
    from taxonomy.pipeline import open_session, step_discover

    cfg = load_config(write_pipeline(tmp_path, extra=FAST, limit=40))
    cfg.llm.mode = "batch"
    s = open_session(cfg, provider="gemini", run_dir=tmp_path / "run", show_progress=False)
    step_discover(s)
    assert s.runner.usage["discover"].batch_calls > 0  # the stage did go through a batch job
    assert s.runner._keys == {}
