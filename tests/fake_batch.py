"""The Gemini Batch API and Files API, as google-genai calls them, for the local test server.

Served (any of v1, v1beta, v1alpha):
  POST   models/{model}:batchGenerateContent     inline requests or an uploaded JSONL file
  POST   models/{model}:asyncBatchEmbedContent   inline embedding requests
  GET    batches/{id}  ·  GET batches  ·  POST batches/{id}:cancel  ·  DELETE batches/{id}
  POST   upload/{v}/files                         resumable upload: start, then upload/finalize chunks
  GET    files/{id}  ·  GET files/{id}:download?alt=media  ·  DELETE files/{id}

A job is PENDING for ``pending_s``, RUNNING for ``running_s`` (answering its items a share at a
time as it is polled), then SUCCEEDED, or FAILED / EXPIRED when scripted. Items are answered by the
server's own responder and scripted faults (``server.fail_next`` gives one item an error), so batch
and online answers are the same. ``items_answered`` counts what Google would bill; ``answered_keys``
counts each request key, so a test sees an item paid twice.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from tests.fake_gemini import Reply, _parse

if TYPE_CHECKING:
    from tests.fake_gemini import FakeGeminiServer

_V = r"/(?:v1|v1beta|v1alpha)"
_CREATE = re.compile(rf"^{_V}/models/(?P<model>[^/:]+):(?P<action>batchGenerateContent|asyncBatchEmbedContent)$")
_BATCH = re.compile(rf"^{_V}/batches/(?P<id>[^/:]+)(?::(?P<verb>cancel))?$")
_BATCHES = re.compile(rf"^{_V}/batches$")
_UPLOAD = re.compile(rf"^/upload{_V}/files$")
_FILE = re.compile(rf"^{_V}/files/(?P<id>[^/:]+)(?::(?P<verb>download))?$")
_ENDED = {"BATCH_STATE_SUCCEEDED", "BATCH_STATE_FAILED", "BATCH_STATE_CANCELLED", "BATCH_STATE_EXPIRED"}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())


@dataclass
class _Job:
    id: str
    model: str
    kind: str  # "generate" | "embed"
    display_name: str
    items: list[tuple[str, dict]]  # (key, REST request body)
    from_file: bool
    created: float
    create_time: str
    end: tuple[str, str] | None = None  # scripted ("FAILED" | "EXPIRED", message)
    results: list[dict | None] = field(default_factory=list)
    cancelled: bool = False
    deleted: bool = False
    output_file: str | None = None


class FakeBatchService:
    def __init__(self, fake: FakeGeminiServer, pending_s: float = 0.0, running_s: float = 0.0) -> None:
        self.fake = fake
        self.pending_s = pending_s
        self.running_s = running_s
        self.clock = time.monotonic  # a test can drive the jobs' progress with its own clock
        self.jobs: dict[str, _Job] = {}
        self.files: dict[str, dict] = {}  # id -> {"meta": {...}, "data": bytes}
        self.items_answered = 0
        self.answered_keys: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()  # "create", "get", "list", "cancel", "delete", "upload", "download"
        self._uploads: dict[str, dict] = {}
        self._ends: list[tuple[str, str]] = []
        self._lock = threading.RLock()

    # -- scripting ---------------------------------------------------------------------------------

    def end_next_job(self, state: str = "FAILED", message: str = "scripted batch failure") -> None:
        """The next job created ends in ``state`` (FAILED or EXPIRED) instead of SUCCEEDED."""
        self._ends.append((state, message))

    def state(self, job_id: str) -> str:
        with self._lock:
            return self._state(self.jobs[job_id.split("/")[-1]])

    # -- routing -----------------------------------------------------------------------------------

    def dispatch(self, method: str, target: str, headers: dict, raw: bytes) -> Reply | None:
        """A Reply for batch and file paths; None hands the request on to the online routes."""
        parts = urlsplit(target)
        path, query = parts.path, parse_qs(parts.query)
        with self._lock:
            if method == "POST" and (m := _CREATE.match(path)):
                return self._create(m["model"], m["action"], json.loads(raw or b"{}"))
            if m := _BATCH.match(path):
                return self._batch(method, m["id"], m["verb"])
            if method == "GET" and _BATCHES.match(path):
                return self._list(query)
            if method == "POST" and _UPLOAD.match(path):
                return self._upload(headers, raw, query)
            if m := _FILE.match(path):
                return self._file(method, m["id"], m["verb"])
        return None

    # -- batches -----------------------------------------------------------------------------------

    def _create(self, model: str, action: str, body: dict) -> Reply:
        self.calls["create"] += 1
        batch = body.get("batch") or {}
        source = batch.get("inputConfig") or {}
        kind = "embed" if action == "asyncBatchEmbedContent" else "generate"
        if "fileName" in source:
            entry = self.files.get(source["fileName"].split("/")[-1])
            if entry is None:
                return Reply.error(404, f"file {source['fileName']} not found")
            items = []
            for n, line in enumerate(entry["data"].decode().splitlines()):
                if line.strip():
                    obj = json.loads(line)
                    items.append((str(obj.get("key", n)), obj["request"]))
        else:
            inlined = (source.get("requests") or {}).get("requests") or []
            items = [
                (str((r.get("metadata") or {}).get("key", n)), r.get("request") or {}) for n, r in enumerate(inlined)
            ]
        if not items:
            return Reply.error(400, "batch has no requests")
        job_id = uuid.uuid4().hex[:12]
        job = _Job(
            job_id,
            model,
            kind,
            batch.get("displayName") or "",
            items,
            "fileName" in source,
            self.clock(),
            _now(),
            end=self._ends.pop(0) if self._ends else None,
        )
        self.jobs[job_id] = job
        return self._json(self._operation(job))

    def _batch(self, method: str, job_id: str, verb: str | None) -> Reply:
        job = self.jobs.get(job_id)
        if job is None or job.deleted:
            return Reply.error(404, f"batches/{job_id} not found")
        if method == "GET" and verb is None:
            self.calls["get"] += 1
            return self._json(self._operation(job))
        if method == "POST" and verb == "cancel":
            self.calls["cancel"] += 1
            if self._state(job) not in _ENDED:
                job.cancelled = True
            return self._json({})
        if method == "DELETE" and verb is None:
            self.calls["delete"] += 1
            job.deleted = True
            return self._json({"name": f"batches/{job_id}", "done": True})
        return Reply.error(404, f"unsupported {method} on batches/{job_id}")

    def _list(self, query: dict) -> Reply:
        self.calls["list"] += 1
        live = [j for j in self.jobs.values() if not j.deleted]
        size = int((query.get("pageSize") or ["50"])[0])
        start = int((query.get("pageToken") or ["0"])[0])
        page = {"operations": [self._operation(j) for j in live[start : start + size]]}
        if start + size < len(live):
            page["nextPageToken"] = str(start + size)
        return self._json(page)

    def _state(self, job: _Job) -> str:
        """Moves the job along with the clock; answering items as it runs, as Google would."""
        if job.cancelled:
            return "BATCH_STATE_CANCELLED"
        age = self.clock() - job.created
        if age < self.pending_s:
            return "BATCH_STATE_PENDING"
        share = 1.0 if self.running_s <= 0 else min(1.0, (age - self.pending_s) / self.running_s)
        if job.end is not None and share >= 1.0:
            return f"BATCH_STATE_{job.end[0]}"
        if job.end is None:  # a job scripted to fail answers nothing
            self._answer(job, int(len(job.items) * share))
        return "BATCH_STATE_SUCCEEDED" if share >= 1.0 else "BATCH_STATE_RUNNING"

    def _answer(self, job: _Job, upto: int) -> None:
        while len(job.results) < upto:
            key, request = job.items[len(job.results)]
            job.results.append(self._answer_one(job, key, request))
            self.items_answered += 1
            self.answered_keys[key] += 1

    def _answer_one(self, job: _Job, key: str, request: dict) -> dict:
        fake = self.fake
        if job.kind == "embed":
            req = _parse("gemini", "embedContent", job.model, f"batches/{job.id}", {}, request)
        else:
            req = _parse("gemini", "generateContent", job.model, f"batches/{job.id}", {}, request)
        req.mode = "batch"
        out = fake._record_and_answer(req)
        if isinstance(out, Reply) and out.body is not None:
            err = json.loads(out.body).get("error") if out.status >= 400 else None
            item: dict = {"error": err or {"code": 500, "message": "unreadable item reply"}}
        elif job.kind == "embed":
            item = {"response": json.loads(fake._embed_reply(req, "embedContent", out).body)}
        else:
            reply = out if isinstance(out, Reply) else Reply.text(out if isinstance(out, str) else json.dumps(out))
            item = {"response": json.loads(fake._generate_reply(req, "generateContent", reply).body)}
        return item

    def _operation(self, job: _Job) -> dict:
        state = self._state(job)
        done = sum(1 for r in job.results if r and "response" in r)
        failed = sum(1 for r in job.results if r and "error" in r)
        kind = "EmbedContentBatch" if job.kind == "embed" else "GenerateContentBatch"
        metadata: dict[str, Any] = {
            "@type": f"type.googleapis.com/google.ai.generativelanguage.v1beta.{kind}",
            "model": f"models/{job.model}",
            "displayName": job.display_name,
            "state": state,
            "createTime": job.create_time,
            "updateTime": _now(),
            "batchStats": {
                "requestCount": str(len(job.items)),
                "successfulRequestCount": str(done),
                "failedRequestCount": str(failed),
                "pendingRequestCount": str(len(job.items) - done - failed),
            },
        }
        op: dict[str, Any] = {"name": f"batches/{job.id}", "metadata": metadata, "done": state in _ENDED}
        if state == "BATCH_STATE_SUCCEEDED":
            metadata["endTime"] = _now()
            metadata["output"] = self._output(job)
        elif state in ("BATCH_STATE_FAILED", "BATCH_STATE_EXPIRED"):
            op["error"] = {"code": 13 if job.end[0] == "FAILED" else 4, "message": job.end[1]}
        return op

    def _output(self, job: _Job) -> dict:
        if job.from_file:
            if job.output_file is None:
                lines = [json.dumps({"key": key, **result}) for (key, _), result in zip(job.items, job.results)]
                job.output_file = self._store(
                    f"batch-{job.id}", ("\n".join(lines) + "\n").encode(), "application/jsonl", source="GENERATED"
                )
            return {"responsesFile": job.output_file}
        responses = [{**result, "metadata": {"key": key}} for (key, _), result in zip(job.items, job.results)]
        return {"inlinedResponses": {"inlinedResponses": responses}}

    # -- files -------------------------------------------------------------------------------------

    def _store(self, file_id: str, data: bytes, mime: str, source: str = "UPLOADED", display: str = "") -> str:
        name = f"files/{file_id}"
        meta = {
            "name": name,
            "displayName": display,
            "mimeType": mime,
            "sizeBytes": str(len(data)),
            "createTime": _now(),
            "updateTime": _now(),
            "state": "ACTIVE",
            "source": source,
            "uri": f"{self.fake.url}/v1beta/{name}",
        }
        if source == "GENERATED":
            meta["downloadUri"] = f"{self.fake.url}/v1beta/{name}:download?alt=media"
        self.files[file_id] = {"meta": meta, "data": data}
        return name

    def _upload(self, headers: dict, raw: bytes, query: dict) -> Reply:
        command = headers.get("x-goog-upload-command", "")
        if "upload_id" not in query:  # start: the body describes the file, the reply names the session URL
            if command != "start" or headers.get("x-goog-upload-protocol") != "resumable":
                return Reply.error(400, "expected a resumable upload start")
            upload_id = uuid.uuid4().hex
            meta = json.loads(raw or b"{}").get("file") or {}
            self._uploads[upload_id] = {
                "meta": meta,
                "size": int(headers.get("x-goog-upload-header-content-length", 0)),
                "mime": headers.get("x-goog-upload-header-content-type") or meta.get("mimeType", ""),
                "data": bytearray(),
            }
            # The SDK posts the chunks to this URL as given, so it names this server.
            url = f"{self.fake.url}/upload/v1beta/files?upload_id={upload_id}&upload_protocol=resumable"
            return Reply(body=b"{}", headers={"x-goog-upload-url": url, "x-goog-upload-status": "active"})
        session = self._uploads.get(query["upload_id"][0])
        if session is None:
            return Reply.error(404, "unknown upload session")
        if int(headers.get("x-goog-upload-offset", -1)) != len(session["data"]):
            return Reply.error(400, f"upload offset {headers.get('x-goog-upload-offset')} != {len(session['data'])}")
        session["data"] += raw
        if "finalize" not in command:
            return Reply(body=b"", headers={"x-goog-upload-status": "active"})
        if len(session["data"]) != session["size"]:
            return Reply.error(400, f"uploaded {len(session['data'])} bytes, announced {session['size']}")
        self.calls["upload"] += 1
        del self._uploads[query["upload_id"][0]]
        file_id = (session["meta"].get("name") or "").split("/")[-1] or uuid.uuid4().hex[:12]
        name = self._store(
            file_id, bytes(session["data"]), session["mime"], display=session["meta"].get("displayName", "")
        )
        return Reply(
            body=json.dumps({"file": self.files[name.split("/")[-1]]["meta"]}).encode(),
            headers={"x-goog-upload-status": "final"},
        )

    def _file(self, method: str, file_id: str, verb: str | None) -> Reply:
        entry = self.files.get(file_id)
        if entry is None:
            return Reply.error(404, f"files/{file_id} not found")
        if method == "GET" and verb == "download":
            self.calls["download"] += 1
            return Reply(body=entry["data"], content_type="application/octet-stream")
        if method == "GET":
            return self._json(entry["meta"])
        if method == "DELETE":
            del self.files[file_id]
            return self._json({})
        return Reply.error(404, f"unsupported {method} on files/{file_id}")

    @staticmethod
    def _json(payload: Any) -> Reply:
        return Reply(body=json.dumps(payload).encode())
