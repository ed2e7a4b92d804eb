"""vally export: one stimulus per task, one `type: prompt` grader per capability its criteria need.

Each grader's prompt is that capability's guidance, then the task's criteria tagged with it (numbered,
with weights and penalty signs), then the grading rules. A prompt over `max_prompt_chars` is split into
several graders of the same capability. The file is checked against the JSON Schema in schemas/
(written from vally's documented fields) before it is written.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from taxonomy.config import ExportConfig
from taxonomy.guidance.files import title
from taxonomy.guidance.model import GuidanceAnswer
from taxonomy.guidance import principles
from taxonomy.guidance.routes import (
    BINARY,
    RULES,
    UNTAGGED,
    Criterion,
    ExportError,
    ExportInputs,
    Task,
    Written,
    criteria_block,
    criterion_line,
    guidance_text,
)
from taxonomy.run import RunDir
from taxonomy.schemas import Taxonomy

SCHEMA_PATH = Path(__file__).parent / "schemas" / "vally_eval.schema.json"


@cache
def vally_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def validate_eval(doc: Any) -> list[str]:
    """Schema violations of a parsed eval.yaml, each as `path: message` (empty when valid)."""
    validator = jsonschema.Draft202012Validator(vally_schema())
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
        for e in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    ]


def grader_prompt(
    task: Task,
    capability: str,
    cap_title: str,
    guidance: str,
    criteria: list[Criterion],
    part: tuple[int, int] = (1, 1),
) -> str:
    split = f" (part {part[0]} of {part[1]})" if part[1] > 1 else ""
    kind = f"{cap_title} (`{capability}`)" if capability != UNTAGGED else "criteria with no capability tag"
    return (
        "\n".join(
            [
                f"You are grading an AI agent's work on task `{task.task_id}` against {len(criteria)} of its "
                f"{len(task.criteria)} criteria, all needing one kind of check: {kind}{split}.",
                "",
                f"## How to check: {cap_title}",
                "",
                guidance,
                "",
                "## Criteria",
                "",
                criteria_block(criteria),
                "",
                "## How to grade",
                "",
                RULES,
                BINARY,
            ]
        )
        + "\n"
    )


def _chunks(
    task: Task, capability: str, cap_title: str, guidance: str, criteria: list[Criterion], limit: int
) -> list[list[Criterion]]:
    """Criteria packed in order into as few prompts of at most `limit` characters as fit."""
    # The fixed text with the longest possible "part i of m" note, so the packed prompts stay under the limit.
    fixed = len(grader_prompt(task, capability, cap_title, guidance, [], (len(criteria), len(criteria))))
    chunks: list[list[Criterion]] = [[]]
    size = fixed
    for c in criteria:
        line = len(criterion_line(len(criteria), c)) + 1
        if fixed + line > limit:
            raise ExportError(
                f"vally: criterion {c.criterion_id} of task {task.task_id} with the {capability} guidance makes a "
                f"{fixed + line}-character prompt, over export.max_prompt_chars "
                f"= {limit}; fix: raise export.max_prompt_chars "
                "in the pipeline TOML"
            )
        if chunks[-1] and size + line > limit:
            chunks.append([])
            size = fixed
        chunks[-1].append(c)
        size += line
    return chunks


def build_eval(
    tasks: list[Task], taxonomy: Taxonomy, drafts: dict[str, GuidanceAnswer], cfg: ExportConfig
) -> dict[str, Any]:
    caps = {c.name: c for c in taxonomy.capabilities}
    order = {n: i for i, n in enumerate(caps)}
    guidance = {n: guidance_text(caps[n], drafts[n]) for n in caps} | {UNTAGGED: guidance_text(None, None)}
    stimuli = []
    for task in tasks:
        graders = []
        for capability, criteria in task.groups(order):
            cap_title = title(capability, caps[capability].title) if capability != UNTAGGED else "no capability tag"
            chunks = _chunks(task, capability, cap_title, guidance[capability], criteria, cfg.max_prompt_chars)
            for i, chunk in enumerate(chunks, 1):
                config: dict[str, Any] = {
                    "prompt": grader_prompt(task, capability, cap_title, guidance[capability], chunk, (i, len(chunks)))
                }
                if cfg.judge_model:
                    config["model"] = cfg.judge_model
                config |= {"scoring": "binary", "threshold": cfg.threshold}
                graders.append({"type": "prompt", "config": config})
        stimuli.append({"name": task.task_id, "prompt": task.brief, "graders": graders})
    return {"stimuli": stimuli}


# libyaml's emitter and parser when PyYAML has them: about 10x faster on a corpus-sized eval.yaml.
_SafeDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Dumper(_SafeDumper):  # type: ignore[misc, valid-type]
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    # Multi-line prompts as literal blocks, so the file reads like the prompt the judge gets.
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _str)


def eval_yaml(doc: dict[str, Any], header: str) -> str:
    """The YAML text, checked by parsing it back and validating it against the schema."""
    body = yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100_000)
    text = "".join(f"# {line}\n" for line in header.splitlines()) + body
    parsed = yaml.load(text, Loader=_SafeLoader)
    if parsed != doc:
        raise ExportError("vally: eval.yaml does not read back as written; fix: report this as a bug")
    problems = validate_eval(parsed)
    if problems:
        raise ExportError(
            f"vally: the eval.yaml built does not match {SCHEMA_PATH.name}: {problems[0]}; fix: report this as a bug"
        )
    return text


def write(inputs: ExportInputs, target: RunDir) -> Written:
    """DIR/vally/eval.yaml: one stimulus per task, one prompt grader per capability it needs."""
    doc = build_eval(inputs.tasks, inputs.taxonomy, inputs.drafts, inputs.cfg)
    header = (
        f"vally eval written by rubric-taxonomy (`taxonomy export`) from run {inputs.run_name}, "
        f"taxonomy {inputs.taxonomy_hash} (taxonomy.json's content hash): {len(inputs.tasks)} tasks, "
        f"{inputs.criteria.height} criteria.\n{principles.summary(inputs.taxonomy.capabilities)}"
    )
    target.write_text("vally/eval.yaml", eval_yaml(doc, header))
    return Written(
        [target.path / "vally/eval.yaml"],
        {"stimuli": len(doc["stimuli"]), "graders": sum(len(s["graders"]) for s in doc["stimuli"])},
    )
