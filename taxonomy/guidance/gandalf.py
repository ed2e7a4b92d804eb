"""The "gandalf" export, for the paper's verifier: per-task judge guidance markdown and routing.csv under
DIR/gandalf/."""

from __future__ import annotations

from taxonomy.guidance.files import write_guidance
from taxonomy.guidance.routes import ExportInputs, Written
from taxonomy.run import RunDir


def write(inputs: ExportInputs, target: RunDir) -> Written:
    files = write_guidance(target, inputs.taxonomy, inputs.criteria, inputs.tags, inputs.drafts, folder="gandalf")
    return Written(
        [files.routing, *files.capability_files.values(), *files.task_files.values()],
        {"capability_files": len(files.capability_files), "task_files": len(files.task_files)},
    )
