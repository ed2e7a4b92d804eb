"""The fake server is driven by the real google-genai and openai SDKs, over HTTP."""

from __future__ import annotations

import asyncio
import json
import math
import time
import urllib.error
import urllib.request

import google.oauth2.credentials
import openai
import pytest
from google import genai
from google.genai import errors, types
from pydantic import BaseModel

from tests.fake_gemini import FakeGeminiServer, RecordedRequest, Reply, fake_embedding


class Items(BaseModel):
    items: list[str]


ITEMS = {"items": ["alpha", "beta"]}


@pytest.fixture
def server():
    with FakeGeminiServer(responder=lambda req: ITEMS) as s:
        yield s


def gemini(server: FakeGeminiServer) -> genai.Client:
    return genai.Client(api_key="test-key", http_options=types.HttpOptions(base_url=server.url))


def vertex(server: FakeGeminiServer) -> genai.Client:
    return genai.Client(
        vertexai=True,
        project="p",
        location="us-central1",
        credentials=google.oauth2.credentials.Credentials(token="test"),
        http_options=types.HttpOptions(base_url=server.url),
    )


JSON_CONFIG = types.GenerateContentConfig(
    response_mime_type="application/json",
    response_schema=Items,
    system_instruction="You list things.",
    temperature=0,
)


def post(url: str, body: dict) -> tuple[int, dict, dict]:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, dict(r.headers), json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read())


def test_gemini_generate_json_schema(server):
    client = gemini(server)  # keep a reference: a collected Client closes its HTTP connection pool
    r = client.models.generate_content(model="gemini-2.5-flash", contents="list two", config=JSON_CONFIG)

    assert r.parsed == Items(**ITEMS)
    assert r.usage_metadata.prompt_token_count >= 1
    assert r.usage_metadata.total_token_count == (
        r.usage_metadata.prompt_token_count + r.usage_metadata.candidates_token_count
    )
    (req,) = server.requests
    assert (req.mode, req.kind, req.model) == ("gemini", "generate", "gemini-2.5-flash")
    assert req.path == "/v1/models/gemini-2.5-flash:generateContent"
    assert req.headers["x-goog-api-key"] == "test-key"
    assert (req.texts, req.roles, req.system) == (["list two"], ["user"], "You list things.")
    assert req.schema["type"] == "OBJECT" and "items" in req.schema["properties"]
    assert req.body["generationConfig"]["temperature"] == 0


def test_gemini_generate_async_and_multiturn(server):
    contents = [
        types.Content(role="user", parts=[types.Part(text="hi")]),
        types.Content(role="model", parts=[types.Part(text="hello")]),
        types.Content(role="user", parts=[types.Part(text="list "), types.Part(text="two")]),
    ]
    client = gemini(server)
    r = asyncio.run(client.aio.models.generate_content(model="m", contents=contents, config=JSON_CONFIG))

    assert r.parsed.items == ["alpha", "beta"]
    (req,) = server.requests
    assert req.texts == ["hi", "hello", "list two"]
    assert req.roles == ["user", "model", "user"]


def test_vertex_generate_and_stream(server):
    client = vertex(server)
    r = client.models.generate_content(model="gemini-2.5-flash", contents="x", config=JSON_CONFIG)
    chunks = list(client.models.generate_content_stream(model="gemini-2.5-flash", contents="x"))

    assert r.parsed == Items(**ITEMS)
    assert json.loads("".join(c.text for c in chunks)) == ITEMS
    req = server.requests[0]
    assert req.mode == "vertex" and req.model == "gemini-2.5-flash"
    assert req.path.endswith(
        "/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent"
    )
    assert req.headers["authorization"] == "Bearer test"
    assert server.count(kind="generate", mode="vertex") == 2


def test_embeddings_gemini_and_vertex():
    with FakeGeminiServer(embed_dim=16) as server:
        gc, vc = gemini(server), vertex(server)
        g = gc.models.embed_content(model="gemini-embedding-001", contents=["a", "b"])
        v1 = vc.models.embed_content(model="gemini-embedding-001", contents="a")
        vn = vc.models.embed_content(model="gemini-embedding-001", contents=["a", "b"])
        p = vc.models.embed_content(
            model="text-embedding-005", contents=["a", "b"], config=types.EmbedContentConfig(output_dimensionality=8)
        )

        assert [e.values for e in g.embeddings] == [fake_embedding("a", 16), fake_embedding("b", 16)]
        assert v1.embeddings[0].values == g.embeddings[0].values == vn.embeddings[0].values
        assert math.isclose(sum(x * x for x in g.embeddings[1].values), 1.0)
        assert [len(e.values) for e in p.embeddings] == [8, 8]
        actions = [r.path.rsplit(":", 1)[1] for r in server.requests]
        assert actions == ["batchEmbedContents", "embedContent", "batchEmbedContents", "predict"]
        assert all(r.kind == "embed" for r in server.requests) and server.requests[3].texts == ["a", "b"]


def test_custom_embedder():
    with FakeGeminiServer(embedder=lambda texts: [[float(len(t)), 0.0] for t in texts]) as server:
        client = gemini(server)
        r = client.models.embed_content(model="e", contents=["abc"])
        assert r.embeddings[0].values == [3.0, 0.0]


def test_scripted_faults_fifo(server):
    client = gemini(server)
    server.fail_next(429, retry_after=7)
    server.fail_next(500)
    server.fail_next(503, kind="embed")

    with pytest.raises(errors.ClientError) as e429:
        client.models.generate_content(model="m", contents="x")
    with pytest.raises(errors.ServerError) as e500:
        client.models.generate_content(model="m", contents="x")
    assert e429.value.code == 429 and e429.value.status == "RESOURCE_EXHAUSTED"
    assert e500.value.code == 500
    assert client.models.generate_content(model="m", contents="x").text == json.dumps(ITEMS)

    with pytest.raises(errors.ServerError):  # the embed fault waited for an embed request
        client.models.embed_content(model="e", contents="x")
    assert server.count() == 4 and server.count(kind="embed") == 1

    server.fail_next(429, retry_after=7)
    status, headers, body = post(f"{server.url}/v1/models/m:generateContent", {"contents": []})
    assert (status, headers["Retry-After"]) == (429, "7")
    assert body["error"] == {"code": 429, "message": "scripted 429", "status": "RESOURCE_EXHAUSTED"}


def test_malformed_push_and_reply_helpers(server):
    client = gemini(server)
    server.malformed_next()
    server.push(lambda req: Reply.text(req.texts[-1].upper(), prompt_tokens=11, output_tokens=3), times=2)
    server.push("plain")

    bad = client.models.generate_content(model="m", contents="x", config=JSON_CONFIG)
    assert bad.text == '{"items": [' and bad.parsed is None
    for _ in range(2):
        r = client.models.generate_content(model="m", contents="shout")
        assert r.text == "SHOUT" and r.usage_metadata.prompt_token_count == 11
        assert r.usage_metadata.total_token_count == 14
    assert client.models.generate_content(model="m", contents="x").text == "plain"
    assert client.models.generate_content(model="m", contents="x").parsed is None  # responder again
    server.reset()
    assert server.requests == []


def test_default_responder_and_unknown_path():
    with FakeGeminiServer() as server:
        client = gemini(server)
        assert client.models.generate_content(model="m", contents="x").text == "{}"
        status, _, body = post(f"{server.url}/v1/nowhere", {})
        assert status == 404 and body["error"]["status"] == "NOT_FOUND"
        assert server.count() == 1


def test_concurrent_requests_are_served_in_parallel():
    with FakeGeminiServer(responder=lambda req: req.texts[0], latency_s=0.2) as server:
        client = gemini(server)

        async def run():
            calls = [client.aio.models.generate_content(model="m", contents=f"q{i}") for i in range(32)]
            return await asyncio.gather(*calls)

        t0 = time.perf_counter()
        results = asyncio.run(run())
        elapsed = time.perf_counter() - t0

    assert [r.text for r in results] == [f"q{i}" for i in range(32)]
    assert elapsed < 2.0, elapsed  # serial would be 6.4 s


def test_openai_sdk_chat_and_embeddings(server):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0)
    schema = Items.model_json_schema()
    r = client.chat.completions.create(
        model="local-model",
        messages=[{"role": "system", "content": "sys"}, {"role": "user", "content": "list two"}],
        response_format={"type": "json_schema", "json_schema": {"name": "Items", "schema": schema}},
        temperature=0,
    )
    assert json.loads(r.choices[0].message.content) == ITEMS
    assert r.choices[0].finish_reason == "stop" and r.model == "local-model"
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    req: RecordedRequest = server.requests[0]
    assert (req.mode, req.system, req.roles, req.schema) == ("openai", "sys", ["system", "user"], schema)
    assert req.headers["authorization"] == "Bearer k"

    default = client.embeddings.create(model="emb", input=["a", "b"])  # the SDK asks for base64
    floats = client.embeddings.create(model="emb", input="a", encoding_format="float")
    assert default.data[1].embedding == pytest.approx(fake_embedding("b"), abs=1e-6)
    assert floats.data[0].embedding == fake_embedding("a")
    assert server.count(kind="embed", mode="openai") == 2

    server.fail_next(429, retry_after=1)
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
