"""The test server's Batch and Files API, driven through the real google-genai SDK."""

from __future__ import annotations

import io
import json
import time
import warnings

import pytest
from google import genai
from google.genai import errors, types

from tests.fake_gemini import FakeGeminiServer


@pytest.fixture
def srv():
    with FakeGeminiServer(responder=lambda req: {"echo": req.texts[0]}) as server:
        yield server


def client(server) -> genai.Client:
    return genai.Client(api_key="k", http_options=types.HttpOptions(base_url=server.url))


def inline(i: int) -> types.InlinedRequest:
    return types.InlinedRequest(
        contents=[types.Content(role="user", parts=[types.Part(text=f"q{i}")])],
        config=types.GenerateContentConfig(
            system_instruction="sys", response_mime_type="application/json", response_json_schema={"type": "object"}
        ),
        metadata={"key": f"k{i}"},
    )


def wait(c: genai.Client, job: types.BatchJob) -> tuple[types.BatchJob, list[str]]:
    seen = []
    deadline = time.time() + 10
    while not job.done and time.time() < deadline:
        job = c.batches.get(name=job.name)
        seen.append(job.state.name)
        time.sleep(0.02)
    return job, seen


def test_inline_job_moves_pending_running_succeeded_and_answers_each_item(srv):
    now = [0.0]
    srv.batch.clock = lambda: now[0]
    srv.batch.pending_s, srv.batch.running_s = 10, 30
    c = client(srv)
    job = c.batches.create(model="m", src=[inline(i) for i in range(3)], config={"display_name": "mine"})
    assert job.state.name == "JOB_STATE_PENDING" and job.display_name == "mine"
    seen = []
    for t in (5, 20, 30, 45):  # pending, then a third answered, two thirds, then all
        now[0] = t
        seen.append((c.batches.get(name=job.name).state.name, srv.batch.items_answered))
    assert seen == [
        ("JOB_STATE_PENDING", 0),
        ("JOB_STATE_RUNNING", 1),
        ("JOB_STATE_RUNNING", 2),
        ("JOB_STATE_SUCCEEDED", 3),
    ]
    job, _ = wait(c, job)
    out = job.dest.inlined_responses
    assert [r.metadata["key"] for r in out] == ["k0", "k1", "k2"]
    assert [json.loads(r.response.text)["echo"] for r in out] == ["q0", "q1", "q2"]
    assert out[0].response.usage_metadata.prompt_token_count >= 1
    # The model saw the same request an online call would carry: system and schema included.
    assert [r.system for r in srv.requests] == ["sys"] * 3 and srv.requests[0].schema == {"type": "object"}
    assert srv.batch.items_answered == 3 and set(srv.batch.answered_keys.values()) == {1}


def test_per_item_error_leaves_the_other_items_answered(srv):
    srv.fail_next(500)
    c = client(srv)
    job, _ = wait(c, c.batches.create(model="m", src=[inline(i) for i in range(2)]))
    first, second = job.dest.inlined_responses
    assert first.error.code == 500 and first.response is None
    assert second.error is None and json.loads(second.response.text) == {"echo": "q1"}


def test_file_input_uploads_in_chunks_and_results_come_back_as_a_file(srv, monkeypatch):
    from google.genai import _api_client

    monkeypatch.setattr(_api_client, "CHUNK_SIZE", 64)  # several resumable chunks from a small file
    lines = [
        json.dumps({"key": f"f{i}", "request": {"contents": [{"role": "user", "parts": [{"text": f"file {i}"}]}]}})
        for i in range(5)
    ]
    c = client(srv)
    uploaded = c.files.upload(file=io.BytesIO(("\n".join(lines) + "\n").encode()), config={"mime_type": "jsonl"})
    assert uploaded.name.startswith("files/") and uploaded.size_bytes > 64
    job, _ = wait(c, c.batches.create(model="m", src=uploaded.name))
    results = [json.loads(line) for line in c.files.download(file=job.dest.file_name).decode().splitlines()]
    assert [r["key"] for r in results] == [f"f{i}" for i in range(5)]
    assert json.loads(results[4]["response"]["candidates"][0]["content"]["parts"][0]["text"]) == {"echo": "file 4"}


def test_list_pages_cancel_and_delete(srv):
    srv.batch.pending_s = 5
    c = client(srv)
    names = [c.batches.create(model="m", src=[inline(i)]).name for i in range(3)]
    assert [j.name for j in c.batches.list(config={"page_size": 2})] == names
    c.batches.cancel(name=names[0])
    assert c.batches.get(name=names[0]).state.name == "JOB_STATE_CANCELLED"
    assert srv.batch.items_answered == 0  # cancelled while pending: nothing answered, nothing billed
    c.batches.delete(name=names[1])
    with pytest.raises(errors.ClientError):
        c.batches.get(name=names[1])


@pytest.mark.parametrize("end", ["FAILED", "EXPIRED"])
def test_a_job_scripted_to_fail_ends_so_and_answers_nothing(srv, end):
    srv.batch.end_next_job(end)
    c = client(srv)
    job, _ = wait(c, c.batches.create(model="m", src=[inline(0)]))
    assert job.state.name == f"JOB_STATE_{end}" and job.dest is None
    assert srv.batch.items_answered == 0


def test_embedding_batch(srv):
    c = client(srv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_embeddings is marked experimental
        job = c.batches.create_embeddings(
            model="gemini-embedding-001",
            src=types.EmbeddingsBatchJobSource(
                inlined_requests=types.EmbedContentBatch(
                    contents=["a", "b"], config=types.EmbedContentConfig(output_dimensionality=8)
                )
            ),
        )
    job, _ = wait(c, job)
    vectors = [r.response.embedding.values for r in job.dest.inlined_embed_content_responses]
    assert len(vectors) == 2 and len(vectors[0]) == 8 and vectors[0] != vectors[1]
