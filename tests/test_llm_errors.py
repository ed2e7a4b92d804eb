"""A model provider that refuses, cannot be reached or never answers: a refused key, a bad request or a host
that cannot be reached ends the run at once with one line naming the provider and the fix, said once; only 429,
5xx and timeouts are retried, and a server that never answers is given up on within the configured bounds."""

from __future__ import annotations

import logging
import socket
import threading
import time
from contextlib import contextmanager

import pytest

from tests import responders
from tests.conftest import API_KEY, invoke, write_pipeline
from tests.fake_gemini import FakeGeminiServer, Reply

pytestmark = pytest.mark.slow  # each drives Stage 1 through the SDK

# At most 10 s are asked for; a run stops in about 1-3 s here, and the bound leaves room for a loaded
# 2-core machine. Retrying would take over a minute (backoff 1 + 2 + ... + 32 s).
LIMIT_S = 20


def _pipeline(tmp_path, concurrency: int = 8, limit: int = 25):
    """The project's own backoff (not the test TOML's milliseconds): a retried error would cost a minute."""
    toml = write_pipeline(tmp_path, limit=limit)
    toml.write_text(
        toml.read_text().replace(
            "backoff_initial_s = 0.01\nbackoff_max_s = 0.05\nconcurrency = 8\n", f"concurrency = {concurrency}\n"
        )
    )
    return toml


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _discover(toml, run_dir, base_url: str, monkeypatch, caplog):
    """In-process, so the time measured is the run's and not the interpreter's start on a busy machine;
    the retry warnings go through logging, which caplog sees."""
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", base_url)
    monkeypatch.setenv("GEMINI_API_KEY", API_KEY)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        result = invoke("discover", toml, "--provider", "gemini", "--run-dir", run_dir, "-q", ok=False)
    lines = [line for line in result.output.splitlines() if line.strip()] + [
        f"{r.levelname} {r.name}: {r.getMessage()}" for r in caplog.records
    ]
    seconds = time.monotonic() - started
    print(f"{base_url}: exit {result.exit_code} after {seconds:.1f} s")
    return result, lines, seconds


@pytest.mark.parametrize("status, fix", [(401, "GEMINI_API_KEY"), (403, "GEMINI_API_KEY"), (400, "llm.model")])
def test_refused_requests_end_the_run_in_one_line(tmp_path, monkeypatch, caplog, status, fix):
    refusal = "API key not valid. Please pass a valid API key." if status != 400 else "Invalid JSON payload received."
    with FakeGeminiServer(responder=lambda req: Reply.error(status, refusal)) as srv:
        result, lines, seconds = _discover(_pipeline(tmp_path), tmp_path / "run", srv.url, monkeypatch, caplog)
    errors = [line for line in lines if line.startswith("error:")]
    assert result.exit_code == 2 and seconds < LIMIT_S, (seconds, lines)
    assert not any("retrying" in line for line in lines), lines
    assert len(errors) == 1 and f"gemini {status}" in errors[0] and f"{refusal.rstrip('.')}; fix: " in errors[0], lines
    assert fix in errors[0].split("fix:", 1)[1] if "fix:" in errors[0] else False, errors[0]
    assert API_KEY not in "\n".join(lines)


def test_an_unreachable_server_ends_the_run_in_one_line_said_once(tmp_path, monkeypatch, caplog):
    """60 criteria: Stage 1's prompt prefix is long enough for a context cache, whose failure must not say it again."""
    port = _closed_port()
    result, lines, seconds = _discover(
        _pipeline(tmp_path, limit=60), tmp_path / "run", f"http://127.0.0.1:{port}", monkeypatch, caplog
    )
    errors = [line for line in lines if line.startswith("error:")]
    assert result.exit_code == 2 and seconds < LIMIT_S, (seconds, lines)
    assert not any("retrying" in line for line in lines), lines
    assert len(errors) == 1 and [line for line in lines if f"127.0.0.1:{port}" in line] == errors, lines
    assert errors[0].startswith(f"error: gemini: cannot connect to 127.0.0.1:{port} (connection refused)"), errors[0]
    assert "fix: check the network connection" in errors[0] and "SSLContext" not in errors[0]
    assert errors[0].endswith("answers already received are cached"), errors[0]
    assert not any("context cache" in line or "asyncio" in line or "Traceback" in line for line in lines), lines


def test_a_server_error_is_retried_and_said_once(tmp_path, monkeypatch, caplog):
    """503 is worth waiting for: retried, and the warning is printed once however many calls meet it."""
    toml = write_pipeline(tmp_path, limit=25)
    with FakeGeminiServer(responder=responders.model) as srv:
        srv.fail_next(503, times=6)
        result, lines, _ = _discover(toml, tmp_path / "run", srv.url, monkeypatch, caplog)
    assert result.exit_code == 0, lines
    assert sum("retrying after gemini 503" in line for line in lines) == 1, lines


def test_a_refusal_midway_keeps_what_was_already_paid(tmp_path, monkeypatch):
    """Concurrency 1, so the first answer is paid and cached before the key is refused."""
    toml = _pipeline(tmp_path, concurrency=1)
    monkeypatch.setenv("GEMINI_API_KEY", API_KEY)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    seen: list[str] = []

    def first_then_refuse(req):
        seen.append(req.texts[0])
        return responders.model(req) if len(seen) == 1 else Reply.error(401, "API key not valid.")

    with FakeGeminiServer(responder=first_then_refuse) as srv:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", srv.url)
        refused = invoke("discover", toml, "--provider", "gemini", "--run-dir", tmp_path / "run", "-q", ok=False)
    assert refused.exit_code == 2 and len(seen) == 2
    with FakeGeminiServer(responder=responders.model) as srv:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", srv.url)
        invoke("discover", toml, "--provider", "gemini", "--run-dir", tmp_path / "run", "-q")
        asked = [req.texts[0] for req in srv.requests]
    assert seen[1] in asked and seen[0] not in asked  # the refused prompt is asked again, the paid one is not


def test_a_refused_key_at_the_embedding_step_is_one_line_too(tmp_path, monkeypatch):
    """Stage 1 answered (and cached); the key is refused when the labels are embedded."""
    toml = write_pipeline(tmp_path, limit=25)
    monkeypatch.setenv("GEMINI_API_KEY", API_KEY)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with FakeGeminiServer(responder=responders.model) as srv:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", srv.url)
        invoke("discover", toml, "--provider", "gemini", "--run-dir", tmp_path / "run", "-q")
        srv.push(Reply.error(403, "Permission denied on the embedding model."), times=50, kind="embed")
        result = invoke("cluster", tmp_path / "run", "-q", ok=False)
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    (error,) = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert "gemini 403" in error and "fix: check the API key in GEMINI_API_KEY" in error


@contextmanager
def _silent_server():
    """Accepts every connection and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()
        for conn in held:
            conn.close()


def test_a_server_that_never_answers_says_what_timed_out_once(tmp_path, monkeypatch, caplog):
    """The test TOML's millisecond backoff, a one-second timeout."""
    toml = write_pipeline(tmp_path, limit=60)
    toml.write_text(toml.read_text().replace("[llm]\n", "[llm]\ntimeout_s = 1\n"))
    with _silent_server() as url:
        result, lines, seconds = _discover(toml, tmp_path / "run", url, monkeypatch, caplog)
    errors = [line for line in lines if line.startswith("error:")]
    assert result.exit_code == 2 and seconds < 30, (seconds, lines)
    assert len(errors) == 1 and "gemini: no answer within 1 s (llm.timeout_s); no call was answered for" in errors[0], (
        lines
    )
    assert "or raise llm.timeout_s if it is only slow" in errors[0]
    assert not any("ReadTimeout" in line or "TimeoutError" in line or "asyncio" in line for line in lines), lines
    # what ran meanwhile is said as it happens, never as a second copy of the error
    assert all("stopping if no call is answered for 2 s" in line for line in lines if line.startswith("WARNING")), lines
