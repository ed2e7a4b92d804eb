"""A local HTTP stand-in for the Gemini API, Vertex AI and OpenAI-compatible endpoints.

Tests point the real google-genai and openai SDKs at it (``base_url=server.url``), so what
gets exercised is the wire format the SDKs actually produce and parse, not a mock of them.
Stdlib only, so it works wherever the SDKs are installed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import random
import re
import struct
import sys
import threading
import time
import traceback
import uuid
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Union
from urllib.parse import urlsplit

__all__ = ["FakeGeminiServer", "RecordedRequest", "Reply", "fake_embedding"]

_GOOGLE_ACTION = r"(?P<action>generateContent|streamGenerateContent|embedContent|batchEmbedContents|predict)"
_ROUTES = [
    ("gemini", re.compile(rf"^/(?:v1|v1beta|v1alpha)/models/(?P<model>[^/:]+):{_GOOGLE_ACTION}$")),
    (
        "vertex",
        re.compile(
            r"^/(?:v1|v1beta1)/projects/[^/]+/locations/[^/]+/publishers/google/models/"
            rf"(?P<model>[^/:]+):{_GOOGLE_ACTION}$"
        ),
    ),
    # /v1beta/openai is Gemini's own OpenAI-compatible endpoint.
    ("openai", re.compile(r"^(?:/v1|/v1beta/openai)?/(?P<action>chat/completions|embeddings)$")),
]
_GENERATE_ACTIONS = {"generateContent", "streamGenerateContent", "chat/completions"}

# Google's canonical status names; the SDKs put them into their exceptions.
_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_OPENAI_FINISH = {"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter"}
_MALFORMED_TEXT = '{"items": ['


@dataclass
class RecordedRequest:
    mode: str  # "gemini" | "vertex" | "openai"
    kind: str  # "generate" | "embed"
    model: str
    path: str
    headers: dict[str, str]  # keys lower-cased
    body: Any
    texts: list[str]  # generate: one per turn; embed: the input texts
    roles: list[str]
    system: str | None
    schema: Any  # for OpenAI, the inner ``json_schema.schema``
    dimensions: int | None = None  # requested output dimensionality of an embedding, if any
    # An explicit context cache the request named: ``texts`` then hold what the model reads (the
    # cache's text joined to the first turn), ``sent_texts`` what came over the wire.
    cached_content: str | None = None
    sent_texts: list[str] | None = None


@dataclass
class Reply:
    """What the server sends for one request; build it with the class methods."""

    status: int = 200
    content: str | None = None  # model text, wrapped in the protocol's completion shape
    body: bytes | None = None  # sent verbatim when set (errors, raw replies)
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str = "STOP"  # Gemini spelling; mapped for OpenAI

    @classmethod
    def text(
        cls,
        s: str,
        prompt_tokens: int | None = None,
        output_tokens: int | None = None,
        finish_reason: str = "STOP",
    ) -> Reply:
        return cls(content=s, prompt_tokens=prompt_tokens, output_tokens=output_tokens, finish_reason=finish_reason)

    @classmethod
    def error(cls, status: int, message: str = "fake error", retry_after: float | int | None = None) -> Reply:
        err = {"error": {"code": status, "message": message, "status": _STATUS_NAMES.get(status, "UNKNOWN")}}
        headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
        return cls(status=status, body=json.dumps(err).encode(), headers=headers)

    @classmethod
    def raw(cls, status: int, body_bytes: bytes, content_type: str = "application/json") -> Reply:
        return cls(status=status, body=body_bytes, content_type=content_type)


Responder = Callable[[RecordedRequest], Union[Reply, str, dict, list]]
Embedder = Callable[[list[str]], list[list[float]]]


def fake_embedding(text: str, dim: int = 64) -> list[float]:
    """Deterministic unit vector for ``text``: equal texts embed equally across runs and processes."""
    rng = random.Random(hashlib.sha256(text.encode()).digest())
    v = [rng.gauss(0.0, 1.0) for _ in range(dim)]
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / norm for x in v]


def _text(x: Any) -> str:
    """Concatenated text of a Gemini Content/parts list or an OpenAI message content."""
    if isinstance(x, str):
        return x
    if isinstance(x, list):
        return "".join(_text(p) for p in x)
    if isinstance(x, dict):
        return _text(x["text"]) if "text" in x else _text(x.get("parts", []))
    return ""


def _dims(d: dict) -> int | None:
    # Gemini API puts it at the top level; Vertex nests it in embedContentConfig or parameters.
    nested = d.get("embedContentConfig") or d.get("parameters") or {}
    return d.get("outputDimensionality", nested.get("outputDimensionality"))


def _tokens(chars: int) -> int:
    return max(1, chars // 4)


def _parse(mode: str, action: str, model: str, path: str, headers: dict, body: Any) -> RecordedRequest:
    kind = "generate" if action in _GENERATE_ACTIONS else "embed"
    texts: list[str] = []
    roles: list[str] = []
    system = schema = dims = None
    if mode == "openai":
        model = body.get("model", model)
        if kind == "generate":
            for m in body.get("messages", []):
                texts.append(_text(m.get("content")))
                roles.append(m.get("role", "user"))
            system = "\n".join(t for t, r in zip(texts, roles) if r in ("system", "developer")) or None
            fmt = body.get("response_format") or {}
            if fmt.get("type") == "json_schema":
                schema = (fmt.get("json_schema") or {}).get("schema")
        else:
            inp = body.get("input", [])
            texts = [inp] if isinstance(inp, str) else [t if isinstance(t, str) else json.dumps(t) for t in inp]
            dims = body.get("dimensions")
    elif kind == "generate":
        for c in body.get("contents", []):
            texts.append(_text(c))
            roles.append(c.get("role", "user"))
        if body.get("systemInstruction") is not None:
            system = _text(body["systemInstruction"])
        config = body.get("generationConfig") or {}
        schema = config.get("responseSchema", config.get("responseJsonSchema"))
    elif action == "batchEmbedContents":
        requests = body.get("requests", [])
        texts = [_text(r.get("content")) for r in requests]
        dims = _dims(requests[0]) if requests else None
    elif action == "embedContent":
        texts = [_text(body.get("content"))]
        dims = _dims(body)
    else:  # predict
        texts = [_text(i.get("content")) for i in body.get("instances", [])]
        dims = _dims(body)
    return RecordedRequest(mode, kind, model, path, headers, body, texts, roles, system, schema, dims)


_CACHES = re.compile(
    r"^/(?:v1|v1beta|v1alpha|v1beta1)/(?:projects/[^/]+/locations/[^/]+/)?cachedContents(?:/(?P<id>[^/:?]+))?$"
)


def _common_prefix(a: str, b: str) -> int:
    """Length of the common prefix, by bisection on slices (C speed on prompts of tens of kB)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # The default backlog of 5 drops connections under a burst of concurrent clients,
    # which then stall for a SYN retransmit (~1 s) and wreck latency benchmarks.
    request_queue_size = 256
    fake: FakeGeminiServer


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 keep-alive so SDK connection pools reuse sockets as they would against Google.
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle on, the body waits for the client's
    # delayed ACK (about 40 ms per call), which a real endpoint does not add.
    disable_nagle_algorithm = True
    server: _HTTPServer

    def do_POST(self) -> None:
        try:
            self.server.fake._handle(self)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away (a run that stopped on an error): nothing to report

    do_GET = do_PUT = do_DELETE = do_PATCH = do_POST

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep pytest output clean


class FakeGeminiServer:
    """Threaded local server speaking Gemini API, Vertex AI and OpenAI-compatible REST."""

    def __init__(
        self,
        responder: Responder | None = None,
        embed_dim: int = 64,
        latency_s: float = 0.0,
        embedder: Embedder | None = None,
        implicit_cache_min_tokens: int = 1024,
    ) -> None:
        """``implicit_cache_min_tokens``: like Gemini's implicit caching, a prompt whose start repeats an
        earlier prompt's by at least this many tokens reports that start as ``cachedContentTokenCount``
        (0 turns it off). Explicit caches (``cachedContents``) are served as the SDK's ``client.caches`` calls them."""
        self.responder: Responder = responder or (lambda req: {})
        self.implicit_cache_min_tokens = implicit_cache_min_tokens
        self._seen_prompts: list[str] = []
        self.caches: dict[str, dict] = {}  # id -> {"name", "model", "text", "tokens", "display_name"}
        self.cache_calls: Counter[str] = Counter()  # "create", "get", "delete"
        self.embed_dim = embed_dim
        self.latency_s = latency_s
        self.embedder = embedder
        from tests.fake_batch import FakeBatchService  # here: it builds on this module's Reply and parser

        self.batch = FakeBatchService(self)  # Batch API and Files API routes
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._faults: list[list] = []  # [kind, reply_or_callable, remaining], FIFO
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.fake = self
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        # A short poll interval keeps close() fast.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True, name="fake-gemini"
        )
        self._thread.start()

    # -- lifecycle ---------------------------------------------------------------------------------

    def close(self) -> None:
        if self._thread.is_alive():
            self._httpd.shutdown()
            self._thread.join()
        self._httpd.server_close()

    def __enter__(self) -> FakeGeminiServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- inspection --------------------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot, so callers can iterate while handler threads keep appending."""
        with self._lock:
            return list(self._requests)

    def count(self, kind: str | None = None, mode: str | None = None) -> int:
        return sum(1 for r in self.requests if kind in (None, r.kind) and mode in (None, r.mode))

    def reset(self) -> None:
        """Forget recorded requests and any scripted faults not yet consumed."""
        with self._lock:
            self._requests.clear()
            self._faults.clear()
            self._seen_prompts.clear()

    # -- scripting ---------------------------------------------------------------------------------

    def push(self, reply: Reply | str | dict | list | Responder, times: int = 1, kind: str = "generate") -> None:
        """Answer the next ``times`` requests of ``kind`` with ``reply`` before the responder sees them.

        For embed requests a list (or a callable returning one) is taken as the vectors.
        """
        if times > 0:
            with self._lock:
                self._faults.append([kind, reply, times])

    def fail_next(
        self, status: int, times: int = 1, retry_after: float | int | None = None, kind: str = "generate"
    ) -> None:
        self.push(Reply.error(status, f"scripted {status}", retry_after), times, kind)

    def malformed_next(self, times: int = 1, kind: str = "generate") -> None:
        """200 OK carrying truncated JSON: as model text for generate, as the whole body for embed."""
        reply = Reply.text(_MALFORMED_TEXT) if kind == "generate" else Reply.raw(200, b'{"embeddings": [')
        self.push(reply, times, kind)

    def _take_fault(self, kind: str) -> Any:
        with self._lock:
            for entry in self._faults:
                if entry[0] == kind:
                    entry[2] -= 1
                    if entry[2] == 0:
                        self._faults.remove(entry)
                    return entry[1]
        return None

    # -- serving -----------------------------------------------------------------------------------

    def _handle(self, h: _Handler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        path = urlsplit(h.path).path
        try:
            headers = {k.lower(): v for k, v in h.headers.items()}
            reply = self.batch.dispatch(h.command, h.path, headers, raw) or self._dispatch(
                h.command, path, headers, raw
            )
        except Exception as exc:  # a broken responder should fail the test visibly, not hang the SDK
            traceback.print_exc(file=sys.stderr)
            reply = Reply.error(500, f"fake server error: {exc!r}")
        if self.latency_s:
            time.sleep(self.latency_s)
        body = reply.body or b""
        h.send_response(reply.status)
        h.send_header("Content-Type", reply.content_type)
        h.send_header("Content-Length", str(len(body)))
        for k, v in reply.headers.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)

    def _context_cache(self, method: str, cache_id: str | None, raw: bytes) -> Reply:
        """cachedContents: create (POST), get (GET), delete (DELETE), in the REST shape google-genai reads."""
        with self._lock:
            if method == "POST" and cache_id is None:
                body = json.loads(raw or b"{}")
                text = "".join(_text(c) for c in body.get("contents", [])) + _text(body.get("systemInstruction") or {})
                cache_id = uuid.uuid4().hex[:12]
                entry = {
                    "name": f"cachedContents/{cache_id}",
                    "model": body.get("model", ""),
                    "text": text,
                    "tokens": _tokens(len(text)),
                    "display_name": body.get("displayName", ""),
                    "ttl": body.get("ttl", ""),
                }
                self.caches[cache_id] = entry
                self.cache_calls["create"] += 1
            elif cache_id is not None and cache_id in self.caches:
                entry = self.caches[cache_id]
                self.cache_calls["delete" if method == "DELETE" else "get"] += 1
                if method == "DELETE":
                    del self.caches[cache_id]
                    return Reply(body=b"{}")
            else:
                return Reply.error(404, f"CachedContent not found: {cache_id}")
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        return Reply(
            body=json.dumps(
                {
                    "name": entry["name"],
                    "model": entry["model"],
                    "displayName": entry["display_name"],
                    "createTime": now,
                    "updateTime": now,
                    "expireTime": now,
                    "usageMetadata": {"totalTokenCount": entry["tokens"]},
                }
            ).encode()
        )

    def _dispatch(self, method: str, path: str, headers: dict, raw: bytes) -> Reply:
        if m := _CACHES.match(path):
            return self._context_cache(method, m["id"], raw)
        for mode, pattern in _ROUTES:
            m = pattern.match(path)
            if m:
                break
        else:
            return Reply.error(404, f"unknown path {method} {path}")
        if method != "POST":
            return Reply.error(404, f"only POST is served, got {method} {path}")
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return Reply.error(400, "request body is not JSON")
        req = _parse(mode, m["action"], m.groupdict().get("model") or "", path, headers, body)
        if req.kind == "generate" and body.get("cachedContent"):
            cache = self.caches.get(str(body["cachedContent"]).split("/")[-1])
            if cache is None:
                return Reply.error(404, f"CachedContent not found: {body['cachedContent']}")
            # The model reads the cached turn, then the request's: two user turns in a row read as one.
            req.cached_content, req.sent_texts = cache["name"], list(req.texts)
            req.texts = [cache["text"] + (req.texts[0] if req.texts else "")] + req.texts[1:]
        out = self._record_and_answer(req)
        if isinstance(out, Reply) and out.body is not None:
            return out
        if req.kind == "embed":
            if isinstance(out, Reply):
                raise TypeError("embed requests take vectors, Reply.error or Reply.raw, not Reply.text")
            return self._embed_reply(req, m["action"], out)
        if not isinstance(out, Reply):
            out = Reply.text(out if isinstance(out, str) else json.dumps(out))
        return self._generate_reply(req, m["action"], out)

    def _record_and_answer(self, req: RecordedRequest) -> Any:
        """What a scripted fault, else the responder (generate) or the embedder (None), answers."""
        with self._lock:
            self._requests.append(req)
        fault = self._take_fault(req.kind)
        source = fault if fault is not None else (self.responder if req.kind == "generate" else None)
        return source(req) if callable(source) else source

    def _generate_reply(self, req: RecordedRequest, action: str, reply: Reply) -> Reply:
        text = reply.content or ""
        prompt_chars = sum(map(len, req.texts)) + (0 if req.mode == "openai" else len(req.system or ""))
        p = reply.prompt_tokens if reply.prompt_tokens is not None else _tokens(prompt_chars)
        o = reply.output_tokens if reply.output_tokens is not None else _tokens(len(text))
        cached = self._cached_tokens(req) if req.mode != "openai" else 0
        if req.mode == "openai":
            payload: dict = {
                "id": f"chatcmpl-{uuid.uuid4().hex}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": req.model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": _OPENAI_FINISH.get(reply.finish_reason, "stop"),
                        "logprobs": None,
                    }
                ],
                "usage": {"prompt_tokens": p, "completion_tokens": o, "total_tokens": p + o},
            }
        else:
            payload = {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": [{"text": text}]},
                        "finishReason": reply.finish_reason,
                        "index": 0,
                    }
                ],
                "usageMetadata": {
                    "promptTokenCount": p,
                    "candidatesTokenCount": o,
                    "totalTokenCount": p + o,
                    **({"cachedContentTokenCount": min(cached, p)} if cached else {}),
                },
                "modelVersion": req.model,
            }
        data = json.dumps(payload).encode()
        if action == "streamGenerateContent":  # one SSE event carrying the whole answer
            return Reply(status=reply.status, body=b"data: " + data + b"\r\n\r\n", content_type="text/event-stream")
        return Reply(status=reply.status, body=data, headers=reply.headers)

    def _cached_tokens(self, req: RecordedRequest) -> int:
        """An explicit cache's tokens, or (implicit caching) the longest start this prompt shares with an earlier
        one."""
        if req.cached_content is not None:
            return _tokens(len(req.texts[0]) - len(req.sent_texts[0] if req.sent_texts else ""))
        prompt = (req.system or "") + "\x00" + "\x00".join(req.texts)
        with self._lock:
            best = max((_common_prefix(prompt, seen) for seen in self._seen_prompts), default=0)
            self._seen_prompts.append(prompt)
            del self._seen_prompts[:-256]
        tokens = best // 4
        return tokens if self.implicit_cache_min_tokens and tokens >= self.implicit_cache_min_tokens else 0

    def _embed_reply(self, req: RecordedRequest, action: str, vectors: Any) -> Reply:
        if vectors is None:
            if self.embedder is not None:
                vectors = self.embedder(req.texts)
            else:
                vectors = [fake_embedding(t, req.dimensions or self.embed_dim) for t in req.texts]
        vectors = [list(map(float, v)) for v in vectors]
        if req.mode == "openai":
            # The openai SDK asks for base64 unless the caller chose a format; honour it like the real API.
            b64 = req.body.get("encoding_format") == "base64"
            n = _tokens(sum(map(len, req.texts)))
            payload: dict = {
                "object": "list",
                "data": [
                    {
                        "object": "embedding",
                        "index": i,
                        "embedding": base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode() if b64 else v,
                    }
                    for i, v in enumerate(vectors)
                ],
                "model": req.model,
                "usage": {"prompt_tokens": n, "total_tokens": n},
            }
        elif action == "predict":
            payload = {
                "predictions": [
                    {"embeddings": {"values": v, "statistics": {"token_count": _tokens(len(t)), "truncated": False}}}
                    for v, t in zip(vectors, req.texts)
                ]
            }
        elif action == "embedContent":
            payload = {"embedding": {"values": vectors[0]}}
        else:
            payload = {"embeddings": [{"values": v} for v in vectors]}
        return Reply(body=json.dumps(payload).encode())
