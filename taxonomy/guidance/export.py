"""`taxonomy export`: the taxonomy's guidance and routing in the formats graders read.

    DIR/vally/eval.yaml           vally: one stimulus per task, one prompt grader per capability it needs
    DIR/openjudge/graders.json    OpenJudge: one LLMGrader config per capability (+ inputs.jsonl)
    DIR/gandalf/                  the paper's verifier: per-task judge guidance markdown + routing.csv
    DIR/routing.jsonl             any other verifier: one line per criterion (+ guidance_sections.jsonl)

DIR defaults to RUN/export/. The guidance text is the run's own (guidance/drafts.json, as `taxonomy
guidance` drafted it); when that is missing, or was drafted from other inputs, it is drafted again first.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from taxonomy.guidance import gandalf, jsonl, openjudge, vally
from taxonomy.guidance.draft import generate_guidance, read_notes
from taxonomy.guidance.inputs import judge_view
from taxonomy.guidance.model import GuidanceDrafts
from taxonomy.guidance.routes import ExportError, ExportInputs, Written, load_tasks
from taxonomy.guidance.stored import inputs_fingerprint, load_drafts
from taxonomy.run import CRITERIA, TAGS, TAXONOMY, RunDir, RunError, record_use, taxonomy_in_use
from taxonomy.taxonomy_io import load_taxonomy

# One writer per format, each in its own module; the order is the one `--to all` writes and lists them in.
WRITERS: dict[str, Callable[[ExportInputs, RunDir], Written]] = {
    "vally": vally.write,
    "openjudge": openjudge.write,
    "gandalf": gandalf.write,
    "jsonl": jsonl.write,
}
FORMATS = tuple(WRITERS)
DEFAULT_FOLDER = "export"


def parse_formats(values: list[str]) -> list[str]:
    """`--to` values (repeatable, comma-separated, or `all`) in canonical order."""
    asked = {v.strip().lower() for value in values for v in str(value).split(",") if v.strip()}
    unknown = sorted(asked - set(FORMATS) - {"all"})
    if unknown or not asked:
        raise ExportError(
            f"--to {', '.join(unknown) or '(nothing)'}: unknown export "
            f"format; fix: use one or more of {', '.join(FORMATS)}, or all"
        )
    return list(FORMATS) if "all" in asked else [f for f in FORMATS if f in asked]


@dataclass
class ExportResult:
    folder: Path
    files: dict[str, list[Path]] = field(default_factory=dict)  # format → files written
    seconds: dict[str, float] = field(default_factory=dict)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    guidance: str = "reused"  # "reused" (the run's guidance/drafts.json) or "drafted"
    unrecorded: str | None = None  # why the run's manifest does not list this export (a folder it cannot write)

    def bytes(self, fmt: str) -> int:
        return sum(p.stat().st_size for p in self.files[fmt])

    def as_dict(self) -> dict[str, Any]:
        return {
            "folder": str(self.folder),
            "guidance": self.guidance,
            "formats": {
                f: {
                    "files": [str(p) for p in self.files[f]],
                    "bytes": self.bytes(f),
                    "seconds": self.seconds[f],
                    **self.counts[f],
                }
                for f in self.files
            },
        }


def _drafts(session: Any, fingerprint: str, notes_path: Path | None) -> tuple[GuidanceDrafts, str]:
    run: RunDir = session.run
    notes = read_notes(notes_path)
    drafts = load_drafts(run, fingerprint, notes, check_notes=notes_path is not None)
    if drafts is not None:
        return drafts, "reused"
    run.record("guidance", generate_guidance(session, notes_path))
    record_use(run, "guidance", taxonomy_in_use(run, "export"))
    drafts = load_drafts(run, fingerprint, notes, check_notes=notes_path is not None)
    if drafts is None:  # generate_guidance writes them; anything else is a bug, never silently ignored
        raise ExportError(f"{run.path / 'guidance'}: drafts were not written; fix: report this as a bug")
    return drafts, "drafted"


def export_run(
    session: Any, formats: list[str], out: Path | None = None, notes_path: Path | None = None
) -> ExportResult:
    """Write the asked formats under `out` (default RUN/export/) and record them in the run's manifest."""
    run: RunDir = session.run
    cfg = session.cfg.export
    used = taxonomy_in_use(run, "export")  # refuses tags made with another taxonomy than taxonomy.json
    taxonomy = load_taxonomy(run.need(TAXONOMY, "merge"), session.cfg.labels)
    criteria = run.read_parquet(CRITERIA, "discover")
    tags = run.read_parquet(TAGS, "tag")
    tasks = load_tasks(taxonomy, criteria, tags)  # checked before any guidance is (re)drafted
    drafts, how = _drafts(session, inputs_fingerprint(taxonomy, criteria, tags), notes_path)
    inputs = ExportInputs(
        run.path.name,
        used,
        tasks,
        judge_view(taxonomy),
        drafts,
        criteria,
        tags,
        cfg,
        cfg.judge_model or session.cfg.llm.model,
    )
    target = RunDir(Path(out) if out is not None else run.path / DEFAULT_FOLDER)
    result = ExportResult(target.path, guidance=how)
    for fmt in formats:
        if fmt not in WRITERS:
            raise ExportError(f"--to {fmt}: unknown export format; fix: use one of {', '.join(FORMATS)}")
        start = time.perf_counter()
        written = WRITERS[fmt](inputs, target)
        result.files[fmt], result.counts[fmt] = written.files, written.counts
        result.seconds[fmt] = round(time.perf_counter() - start, 3)
    _record(run, result, used, elsewhere=out is not None and not _inside(Path(out), run.path))
    return result


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder.resolve())


def _record(run: RunDir, result: ExportResult, used: str, elsewhere: bool) -> None:
    """The export in the run's manifest. Written elsewhere (--out) from a run folder the user cannot write, the
    export is whole without that record: said, not refused."""
    try:
        run.record("export", result.as_dict())
        record_use(run, "export", used)
    except RunError as exc:
        if not elsewhere:
            raise
        result.unrecorded = str(exc).split("; fix:", 1)[0]
