"""Batch mode (`llm.mode = "batch"`, `--batch`): the runner's jobs go through the Gemini Batch API.

Half the online price and no per-minute limits, for hours of latency. What it keeps from online:
every answer goes through the same cache key, parsing, validation and re-ask (jobs.Conversation)
and the same accounting, at the batch price. The rounds: every open conversation's next request
goes into one job; answers that need a re-ask, and items the job could not answer, form the next
round, which goes online once fewer than `llm.batch.online_below` remain.

Resume: before a job is created its display name and request keys are written to
`batch_jobs.json` in the run directory, and its name right after; a killed run finds the job there
(or by display name in `batches.list` if it died between the two writes) and polls it instead of
submitting again. Answers are cached as soon as a job's results arrive, so nothing is paid twice.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from taxonomy.llm.base import Completion, PermanentError, TransientError, Turn, json_schema
from taxonomy.llm.jobs import Answer, Conversation, Job, Usage
from taxonomy.llm.providers import ProviderError, gemini_completion
from taxonomy.secrets import redact

# `runner` below is a taxonomy.llm.runner.Runner: this module uses its public methods (request_key,
# complete_online, paid) and attributes, and never imports it, so the dependency runs one way.
Runner = Any

log = logging.getLogger("taxonomy.llm")
JOBS_FILE = "batch_jobs.json"
_FAILED_ENDS = ("JOB_STATE_FAILED", "JOB_STATE_EXPIRED", "JOB_STATE_CANCELLED")


class BatchJobError(PermanentError):
    """A batch job that ended without results: one line with what to do."""


def check_batch_backend(backend: str) -> None:
    """Batch mode needs the Gemini API: Vertex batch prediction reads and writes Cloud Storage or BigQuery."""
    if backend != "gemini":
        why = (
            "Vertex batch prediction needs Cloud Storage or BigQuery buckets this tool does not manage"
            if backend == "vertex"
            else f"the {backend} backend has no Gemini Batch API"
        )
        raise ProviderError(
            f"batch mode works with --provider gemini only ({why}); fix: run in online mode "
            f'(drop --batch, or set llm.mode = "online")'
        )


@dataclass
class _ItemError:
    message: str


def run_batch(runner: Runner, stage: str, jobs: list[Job], description: str, usage: Usage) -> list[Answer]:
    talks = [Conversation(job) for job in jobs]
    errors = [0] * len(talks)
    while True:
        open_ = [i for i, t in enumerate(talks) if t.answer is None]
        if not open_:
            return [t.answer for t in talks]
        first = all(t.attempts == 0 for t in talks) and not any(errors)
        got = _complete_round(runner, stage, [talks[i] for i in open_], usage, description, first)
        for i, result in zip(open_, got):
            if isinstance(result, _ItemError):
                errors[i] += 1
                usage.retries += 1
                if errors[i] > runner.cfg.max_retries:
                    raise TransientError(
                        f"{result.message} (an item failed {errors[i]} times); fix: check the quota or the model, "
                        "then run the same command again: answers already received are cached"
                    )
            elif talks[i].take(result.text, runner.cfg.reask_attempts):
                usage.reasks += 1


def _complete_round(
    runner: Runner, stage: str, talks: list, usage: Usage, description: str, first: bool
) -> list[Completion | _ItemError]:
    """The next answer of each conversation: from the cache, a batch job, or online for a few follow-ups."""
    keys = [runner.request_key(t.turns, t.job) for t in talks]
    out: list[Completion | _ItemError | None] = [None] * len(talks)
    missing: dict[str, tuple[list[Turn], Job]] = {}
    for i, (talk, key) in enumerate(zip(talks, keys)):
        cached = runner.cache.get(key)
        if cached is not None:
            usage.cache_hits += 1
            out[i] = Completion(cached[0], 0, 0)
        else:
            missing.setdefault(key, (talk.turns, talk.job))
    answers: dict[str, Completion | _ItemError] = {}
    if missing and (first or len(missing) >= runner.cfg.batch.online_below):
        answers = BatchSession(runner, stage, usage, description).answer(missing)
    elif missing:
        answers = dict(zip(missing, runner.complete_online(stage, list(missing.values()), usage)))
    for i, key in enumerate(keys):
        if out[i] is None:
            out[i] = answers[key]
    return out  # type: ignore[return-value]


class BatchSession:
    """One round's job: submit (or find the recorded one), poll, collect, cache and account."""

    def __init__(self, runner: Runner, stage: str, usage: Usage, description: str):
        self.runner, self.stage, self.usage, self.description = runner, stage, usage, description
        self.cfg = runner.cfg
        self.client = runner.provider.client()
        self.store = _JobStore(runner.batch_dir)

    def answer(self, requests: dict[str, tuple[list[Turn], Job]]) -> dict[str, Completion | _ItemError]:
        job, record = self._job(requests, self._submit)
        results = self._results(job)
        out: dict[str, Completion | _ItemError] = {}
        for key in requests:
            result = results.get(key)
            if isinstance(result, Completion):
                # Into the ledger (at the batch price), then cached at once, so a crash after this point never pays
                # for it again.
                self.runner.paid(self.stage, result, self.usage, kind="batch")
                self.runner.cache.put(key, self.stage, result.text, result.prompt_tokens, result.output_tokens)
            out[key] = (
                result if result is not None else _ItemError(f"batch job {record['name']}: no result for an item")
            )
        self.store.update(record, state="collected")
        return out

    def embed(self, model: str, texts: dict[str, str]) -> dict[str, list[float]]:
        """Embeddings of texts (by cache key) through the SDK's batch embedding; items that fail are left out."""
        job, record = self._job(texts, lambda requests: self._submit_embeddings(model, requests))
        answers = job.dest.inlined_embed_content_responses if job.dest is not None else None
        out = {}
        for key, item in zip(record["keys"], answers or []):
            if item.response is not None and item.response.embedding is not None and item.response.embedding.values:
                out[key] = list(item.response.embedding.values)
        self.store.update(record, state="collected")
        return out

    def _job(self, requests: dict, submit):
        """The finished job for these requests: a recorded one still worth polling, else a new one."""
        record = self.store.find(self.stage, set(requests))
        if record is not None and not record.get("name"):  # killed between the record and the job's name
            record = self._adopt(record)
        record = record or submit(requests)
        try:
            return self._poll(record), record
        except _Gone:  # the recorded job was deleted (or aged out) on the server: nothing from it was received
            self.store.update(record, state="gone")
            record = submit(requests)
            return self._poll(record), record

    # -- submission ----------------------------------------------------------------------------------

    def _record(self, keys: list[str]) -> dict:
        """Written before the job exists, so a run killed while creating it finds it by display name."""
        digest = hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()
        return self.store.add(
            {
                "stage": self.stage,
                "display_name": f"taxonomy-{self.stage}-{digest[:20]}",
                "keys": keys,
                "state": "submitting",
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
        )

    def _submit_embeddings(self, model: str, texts: dict[str, str]) -> dict:
        # lazy, here and in every google import below: google-genai takes about 0.5 s to import, and the runner
        # loads this module for every session, offline ones included
        from google.genai import types

        record = self._record(list(texts))  # results come back in this order
        src = types.EmbeddingsBatchJobSource(inlined_requests=types.EmbedContentBatch(contents=list(texts.values())))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # google-genai marks create_embeddings experimental
            job = self._call(
                lambda: self.client.batches.create_embeddings(
                    model=model, src=src, config={"display_name": record["display_name"]}
                )
            )
        self.store.update(record, name=job.name, state="submitted", requests=len(texts))
        return record

    def _submit(self, requests: dict[str, tuple[list[Turn], Job]]) -> dict:
        from google.genai import types

        record = self._record(list(requests))
        lines = [
            json.dumps({"key": key, "request": _rest_request(turns, job, self.cfg.temperature)})
            for key, (turns, job) in requests.items()
        ]
        size_mb = sum(map(len, lines)) / 1e6
        provider = self.runner.provider
        if size_mb <= self.cfg.batch.inline_max_mb:
            src: Any = [
                types.InlinedRequest(
                    contents=provider.contents(turns),
                    config=provider.generation_config(job.system, job.schema, self.cfg.temperature),
                    metadata={"key": key},
                )
                for key, (turns, job) in requests.items()
            ]
        else:
            data = ("\n".join(lines) + "\n").encode()
            uploaded = self._call(
                lambda: self.client.files.upload(
                    file=io.BytesIO(data),
                    config=types.UploadFileConfig(mime_type="jsonl", display_name=record["display_name"]),
                )
            )
            self.store.update(record, input_file=uploaded.name)
            src = uploaded.name
        job = self._call(
            lambda: self.client.batches.create(
                model=provider.model, src=src, config={"display_name": record["display_name"]}
            )
        )
        self.store.update(record, name=job.name, state="submitted", requests=len(requests), input_mb=round(size_mb, 3))
        log.info("batch job %s submitted with %d requests (%.1f MB)", job.name, len(requests), size_mb)
        return record

    # -- polling -------------------------------------------------------------------------------------

    def _poll(self, record: dict):
        name, total = record["name"], len(record["keys"])
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        try:
            with Progress(*columns, disable=not self.runner.show_progress, transient=False) as progress:
                bar = progress.add_task(f"{self.description}: batch", total=total)
                while True:
                    job = self._call(lambda: self.client.batches.get(name=name))
                    state = job.state.name if job.state is not None else "JOB_STATE_UNSPECIFIED"
                    stats = self._stats(name)
                    progress.update(
                        bar,
                        description=f"{self.description}: batch {name} {state.removeprefix('JOB_STATE_').lower()}"
                        + (f" ({stats[1]} failed)" if stats and stats[1] else ""),
                        completed=total if job.done else (stats[0] + stats[1] if stats else 0),
                    )
                    if job.done:
                        break
                    time.sleep(self.cfg.batch.poll_s)
        except KeyboardInterrupt:
            self._cancel(record)
            raise
        if job.state is None or job.state.name != "JOB_STATE_SUCCEEDED":
            state = job.state.name.removeprefix("JOB_STATE_") if job.state is not None else "UNKNOWN"
            self.store.update(record, state=state.lower())
            raise BatchJobError(
                f"batch job {name} ended {state}{self._reason(job)}; nothing from it was cached. fix: run the same "
                f'command again to submit a new job, or run online (drop --batch, or set llm.mode = "online")'
            )
        return job

    def _adopt(self, record: dict) -> dict | None:
        """The recorded job by its display name, or None when it was never created (submitting pays nothing twice)."""
        for job in self._call(lambda: list(self.client.batches.list(config={"page_size": 100}))):
            if job.display_name == record["display_name"]:
                self.store.update(record, name=job.name, state="submitted")
                return record
        self.store.update(record, state="lost")
        return None

    def _stats(self, name: str) -> tuple[int, int] | None:
        """(succeeded, failed) so far. google-genai drops batchStats from BatchJob, so this reads the raw
        resource; progress is only display, so any surprise here just hides the counts."""
        try:
            raw = self.client._api_client.request("get", f"batches/{name.split('/')[-1]}", {})
            stats = json.loads(raw.body).get("metadata", {}).get("batchStats", {})
            return int(stats.get("successfulRequestCount", 0)), int(stats.get("failedRequestCount", 0))
        except Exception:  # noqa: BLE001 - display only
            return None

    def _reason(self, job) -> str:
        message = getattr(job.error, "message", None) if job.error is not None else None
        return f" ({redact(str(message))[:200]})" if message else ""

    def _cancel(self, record: dict) -> None:
        try:
            self.client.batches.cancel(name=record["name"])
            self.store.update(record, state="cancelled")
            log.warning("cancelled batch job %s", record["name"])
        except Exception as exc:  # noqa: BLE001 - the interrupt is what the user asked for; say what is left
            log.warning(
                "could not cancel batch job %s (%s); cancel it in AI Studio", record["name"], redact(str(exc))[:200]
            )

    # -- results -------------------------------------------------------------------------------------

    def _results(self, job) -> dict[str, Completion | _ItemError]:
        from google.genai import types

        dest = job.dest
        out: dict[str, Completion | _ItemError] = {}
        if dest is not None and dest.file_name:
            data = self._call(lambda: self.client.files.download(file=dest.file_name))
            for line in data.decode().splitlines():
                if line.strip():
                    item = json.loads(line)
                    response = (
                        types.GenerateContentResponse.model_validate(item["response"]) if item.get("response") else None
                    )
                    out[str(item.get("key"))] = _completion(response, item.get("error"))
        elif dest is not None:
            for item in dest.inlined_responses or []:
                key = str((item.metadata or {}).get("key"))
                out[key] = _completion(item.response, item.error.model_dump() if item.error else None)
        return out

    def _call(self, fn):
        """One Batch/Files API call, retried like online calls on 429, 5xx and dropped connections."""
        from google.genai import errors

        delay = self.cfg.backoff_initial_s
        for attempt in range(self.cfg.max_retries + 1):
            try:
                return fn()
            except errors.APIError as exc:
                code = exc.code or 0
                if code == 404:
                    raise _Gone(str(exc.message)) from None
                if not (code == 429 or code >= 500 or code == 408) or attempt == self.cfg.max_retries:
                    raise PermanentError(
                        f"gemini batch {code} {exc.status or ''}: {redact(str(exc.message or ''))[:300]}"
                    ) from None
            except OSError as exc:
                if attempt == self.cfg.max_retries:
                    raise TransientError(
                        f"gemini batch: {type(exc).__name__}: {exc}; fix: run the same command again"
                    ) from None
            time.sleep(min(delay, self.cfg.backoff_max_s))
            delay *= 2
        raise AssertionError("unreachable")


class _Gone(PermanentError):
    """A 404 from the Batch or Files API."""


def _completion(response, error: dict | None) -> Completion | _ItemError:
    if response is None:
        error = error or {}
        return _ItemError(f"batch item error {error.get('code', '')}: {redact(str(error.get('message', '')))[:200]}")
    return gemini_completion(response)


def _rest_request(turns: list[Turn], job: Job, temperature: float) -> dict:
    """A GenerateContentRequest as a JSONL batch file carries it (the REST shape the SDK sends online)."""
    request: dict[str, Any] = {
        "contents": [{"role": t.role, "parts": [{"text": t.text}]} for t in turns],
        "generationConfig": {
            "temperature": temperature,
            "responseMimeType": "application/json",
            "responseJsonSchema": json_schema(job.schema),
        },
    }
    if job.system:
        request["systemInstruction"] = {"parts": [{"text": job.system}]}
    return request


class _JobStore:
    """batch_jobs.json in the run directory: every job this run submitted, with its request keys."""

    def __init__(self, folder: Path | None):
        self.path = None if folder is None else Path(folder) / JOBS_FILE
        self.records: list[dict] = []
        if self.path is not None and self.path.exists():
            self.records = json.loads(self.path.read_text())

    def find(self, stage: str, keys: set[str]) -> dict | None:
        """A job still worth polling that holds every request asked for now (answered ones are cached)."""
        for record in reversed(self.records):
            if (
                record["stage"] == stage
                and record["state"] in ("submitting", "submitted")
                and keys <= set(record["keys"])
            ):
                return record
        return None

    def add(self, record: dict) -> dict:
        self.records.append(record)
        self._save()
        return record

    def update(self, record: dict, **fields: Any) -> None:
        record.update(fields)
        self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{JOBS_FILE}.", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(self.records, f, indent=1)
        os.replace(tmp, self.path)


def embed_in_batch(runner: Runner, model: str, texts: dict[str, str]) -> dict[str, list[float]] | None:
    """Batch embedding for the cluster stage where google-genai offers it (Gemini API); None: embed online."""
    if not texts or runner.cfg.mode != "batch" or runner.provider.name != "gemini":
        return None
    if not hasattr(runner.provider.client().batches, "create_embeddings"):
        return None
    # Usage() stays empty: GeminiEmbedder puts the job's embedding tokens into the ledger, as online.
    session = BatchSession(runner, "cluster", Usage(), "embed labels")
    return session.embed(model, texts)
