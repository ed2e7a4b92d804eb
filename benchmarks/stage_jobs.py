"""The prompts a stage would send, without sending them: the stage runs against a runner that records its jobs and
stops it before the first call. The token benchmarks size prompts this way (batched, or one criterion per call)."""

from __future__ import annotations

from typing import Any, Callable


class _Stopped(Exception):
    def __init__(self, jobs: list) -> None:
        self.jobs = jobs


class _Recorder:
    """Stands where the stage's runner would; the stage passes its jobs to `run` and never gets answers."""

    def run(self, stage: str, jobs, description: str = "") -> list:
        raise _Stopped(list(jobs))


def capture_jobs(stage: Callable[..., Any], *args: Any) -> list:
    """The jobs `stage(*args, runner)` would hand its runner (each has a `.prompt`); [] when it sends none."""
    try:
        stage(*args, _Recorder())
    except _Stopped as stopped:
        return stopped.jobs
    return []
