"""The stage declarations (taxonomy/stagedefs.py): every declared stage is whole (a step, an estimator, a command),
and what the rest of the package knows of the stages is derived from them."""

from __future__ import annotations

import dataclasses

import typer

from taxonomy import estimate, pipeline, provenance, run
from taxonomy.cli import app
from taxonomy.config import load_config
from taxonomy.prompts import PROMPTS_DIR
from taxonomy.stagedefs import DECLARED, StageDef
from tests.conftest import ROOT


def _commands() -> set[str]:
    return set(typer.main.get_command(app).commands)


def half_declared(declared: tuple[StageDef, ...]) -> dict[str, list[str]]:
    """Per declared stage, what it lacks: its step, its estimator or its command."""
    commands = _commands()
    parts = {"step": pipeline.STEPS, "estimator": estimate.ESTIMATORS, "command": commands}
    lacking = {d.name: [part for part, have in parts.items() if d.name not in have] for d in declared}
    return {name: missing for name, missing in lacking.items() if missing}


def test_every_declared_stage_has_its_step_estimator_and_command():
    assert half_declared(DECLARED) == {}
    assert set(pipeline.STEPS) == set(estimate.ESTIMATORS) == {d.name for d in DECLARED}


def test_a_stage_declared_without_its_code_is_caught():
    extra = dataclasses.replace(DECLARED[-1], name="summarize", inputs=("tag",))
    assert half_declared((*DECLARED, extra)) == {"summarize": ["step", "estimator", "command"]}


def test_the_stage_tables_are_derived_from_the_declarations():
    assert run.STAGES == tuple(d.name for d in DECLARED)
    assert run.STAGE_FILES == {d.name: d.files for d in DECLARED}
    assert run.PROMPTS == {d.name: d.prompt for d in DECLARED if d.prompt}
    assert provenance.STAGE_CONFIG == {d.name: d.config for d in DECLARED}
    assert provenance.STAGE_INPUTS == {d.name: d.inputs for d in DECLARED}


def test_a_declaration_names_only_what_exists():
    cfg = load_config(ROOT / "pipelines" / "devai.toml")
    seen: list[str] = []
    for d in DECLARED:
        assert set(d.inputs) <= set(seen), f"{d.name} reads a stage declared after it"
        seen.append(d.name)
        assert d.prompt is None or (PROMPTS_DIR / d.prompt).is_file()
        for key in d.config:
            section, _, field = key.partition(".")
            assert hasattr(cfg, section) and (not field or hasattr(getattr(cfg, section), field)), key
    files = [f for d in DECLARED for f in d.files]
    assert len(files) == len(set(files))
