"""Judge guidance (the paper's P3): one guidance text per capability, routed to criteria and tasks, and exported
to the graders people run.

A verifier that accepts domain context through a guidance channel (Gandalf's judge guidance,
a prompt grader's custom prompt) grades better and cheaper when that context says, per kind
of check, what to open, what evidence settles a verdict, and which traps cause false passes
(an unmet criterion passed) and false fails (a met criterion rejected). This package drafts
that text per capability with a model; where none runs, each section says so in one line and how to get
it, and carries only the criteria, the grading rule, P2/P3 and a person's `describe` sentence. It writes:

    guidance/<capability>.md     one file per capability
    guidance/routing.csv         criterion_id, task_id, primary, tags, guidance_files, task_file,
                                 needs_native_inspection, needs_domain_conventions (P2/P3: yes, no, unknown)
    guidance/tasks/<task>.md     per task: only the sections its criteria need, as one markdown
                                 document a verifier takes as its judge guidance

Paths in routing.csv are relative to the guidance/ folder that holds it.

Modules: model (the LLM answer and its checks), inputs (criteria joined with tags, examples, the cards
judges read), notes (the domain-note lines relevant to a capability), files (markdown and routing.csv),
principles (P2/P3 as the files and exports word them), draft (drafting and the whole use),
stored (guidance/drafts.json). The exports (`taxonomy export`, `export_run`): routes (what is routed and
the judge text), vally, openjudge, jsonl, and export (the formats written under RUN/export/).
"""

from __future__ import annotations

from taxonomy.guidance.draft import PROMPT, STAGE, draft_guidance, generate_guidance, read_notes
from taxonomy.guidance.export import FORMATS, ExportResult, export_run, parse_formats
from taxonomy.guidance.files import (
    EXAMPLE_MAX_CHARS,
    FOLDER,
    NO_DRAFT,
    GuidanceFiles,
    capability_markdown,
    task_filename,
    task_markdown,
    title,
    write_guidance,
)
from taxonomy.guidance.inputs import judge_view, routed_criteria, select_examples
from taxonomy.guidance.model import (
    MAX_ITEMS,
    MIN_ITEMS,
    GuidanceAnswer,
    GuidanceDrafts,
    GuidanceError,
    validate_guidance,
)
from taxonomy.guidance.notes import (
    NOTES_MAX_CHARS,
    capability_keywords,
    note_lines,
    notes_for_prompt,
    relevant_note_lines,
)
from taxonomy.guidance.routes import ExportError

__all__ = [
    "EXAMPLE_MAX_CHARS",
    "FOLDER",
    "MAX_ITEMS",
    "MIN_ITEMS",
    "NO_DRAFT",
    "NOTES_MAX_CHARS",
    "PROMPT",
    "STAGE",
    "GuidanceAnswer",
    "GuidanceDrafts",
    "GuidanceError",
    "GuidanceFiles",
    "capability_keywords",
    "capability_markdown",
    "draft_guidance",
    "generate_guidance",
    "judge_view",
    "note_lines",
    "notes_for_prompt",
    "read_notes",
    "relevant_note_lines",
    "routed_criteria",
    "select_examples",
    "task_filename",
    "task_markdown",
    "title",
    "validate_guidance",
    "write_guidance",
    "FORMATS",
    "ExportError",
    "ExportResult",
    "export_run",
    "parse_formats",
]
