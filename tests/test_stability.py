"""How sure a run is: each capability's stability figure and each criterion's agreement, computed by resampling
the criteria through Stage 2a with the run's cached embeddings, on both paths, never served stale."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from taxonomy.schemas import DISSOLVED, Taxonomy
from taxonomy.taxonomy_io import load_taxonomy
from tests.conftest import invoke, llm_devai_run, offline_devai_run, write_pipeline


def _figures(run: Path) -> dict[str, float | None]:
    return {c["name"]: c["stability"] for c in json.loads((run / "taxonomy.json").read_text())["capabilities"]}


def _check_written(run: Path) -> None:
    """The figures in taxonomy.json, the agreement per criterion, and the column with its note in taxonomy.md."""
    taxonomy = load_taxonomy(run / "taxonomy.json")
    figures = taxonomy.stability_figures()
    assert figures is not None and taxonomy.stability.resamples == 20
    assert all(v is None or 0.0 <= v <= 1.0 for v in figures.values())
    assert sum(v is not None for v in figures.values()) >= len(figures) - 1
    agreement = pl.read_parquet(run / "stage3_stability.parquet")
    tags = pl.read_parquet(run / "stage3_tags.parquet")
    assert set(agreement["criterion_id"]) <= set(tags["criterion_id"])
    assert agreement.height >= 0.9 * tags.height
    assert agreement["agreement"].drop_nulls().is_between(0, 1).all()
    md = (run / "taxonomy.md").read_text()
    assert "| stability |" in md and "Stability: how sure the run is" in md
    assert "0.75 or more: stable" in md and "below 0.5: dissolved" in md


def test_offline_run_says_how_sure_it_is(tmp_path, offline_env):
    run = offline_devai_run(tmp_path)
    _check_written(run)
    notes = json.loads((run / "manifest.json").read_text())["stages"]["tag"]["notes"]
    assert any(n.startswith("stability over 20 resamples") for n in notes)


def test_llm_run_says_how_sure_it_is_and_resampling_asks_no_model(tmp_path, gemini_env):
    run = llm_devai_run(tmp_path)
    _check_written(run)
    toml = tmp_path / "devai.toml"
    before = gemini_env.count()
    tagged = json.loads((run / "manifest.json").read_text())["stages"]["tag"]["finished"]
    old = load_taxonomy(run / "taxonomy.json").stability
    toml.write_text(toml.read_text() + "\n[stability]\nseed = 7\n")
    result = invoke("run", toml, "--provider", "gemini", "--run-dir", run, "-q", "--no-report")
    assert "stability over 20 resamples" in result.output
    assert gemini_env.count() == before  # only the figures were recomputed: no request, no re-tag
    assert json.loads((run / "manifest.json").read_text())["stages"]["tag"]["finished"] == tagged
    new = load_taxonomy(run / "taxonomy.json").stability
    assert (old.seed, new.seed) == (0, 7)


def test_a_capability_of_members_that_do_not_belong_together_gets_a_low_figure(tmp_path, offline_env):
    """Plant a grab-bag: one micro-cluster taken from each other capability into the last one, then re-tag.
    Its criteria lie nearer the capabilities their micro-clusters came from, so it dissolves; the rest stay."""
    run = offline_devai_run(tmp_path)
    raw = json.loads((run / "taxonomy.json").read_text())
    micro = {m["name"]: m for m in json.loads((run / "micro_capabilities.json").read_text())}
    caps = raw["capabilities"]
    planted = caps[-1]
    for cap in caps[:-1]:
        if len(cap["members"]) >= 2:
            planted["members"].append(cap["members"].pop())
    assert len(planted["members"]) >= 4
    for cap in caps:
        cap["labels"] = sorted({lab for m in cap["members"] for lab in micro[m]["member_labels"]})
    (run / "taxonomy.json").write_text(json.dumps(raw))
    invoke("tag", run, "-q")
    figures = _figures(run)
    coherent = [v for n, v in figures.items() if n != planted["name"] and v is not None]
    assert figures[planted["name"]] < min(DISSOLVED, *coherent)
    assert sorted(coherent)[len(coherent) // 2] >= 0.75  # the capabilities left whole stay stable
    md = (run / "taxonomy.md").read_text()
    assert f"| `{planted['name']}` |" in md and "dissolved" in md.split(planted["name"])[1].split("\n")[0]


def test_figures_of_another_membership_are_never_shown(tmp_path, offline_env):
    """After `edit merge` the figures describe capabilities that no longer exist: taxonomy.md and the report leave
    them out; the next `taxonomy run` computes them for the edited taxonomy."""
    run = offline_devai_run(tmp_path)
    names = [c["name"] for c in json.loads((run / "taxonomy.json").read_text())["capabilities"]]
    invoke("edit", run, "merge", names[-2], names[-1], "--allow-violations", "-q")
    assert load_taxonomy(run / "taxonomy.json").stability_figures() is None
    assert "| stability |" not in (run / "taxonomy.md").read_text()
    invoke("report", run)
    assert 'id="stability-note"' not in (run / "report.html").read_text()
    invoke("run", tmp_path / "devai.toml", "--run-dir", run, "-q", "--no-report")
    assert load_taxonomy(run / "taxonomy.json").stability_figures() is not None
    invoke("report", run)
    html = (run / "report.html").read_text()
    assert 'id="stability-note"' in html and html.count('class="num stability') == len(names) - 1


def test_a_rename_keeps_the_figures(tmp_path, offline_env):
    run = offline_devai_run(tmp_path)
    before = _figures(run)
    old = next(iter(before))
    invoke("edit", run, "rename", old, "check_renamed_by_hand_capability", "-q")
    after = load_taxonomy(run / "taxonomy.json").stability_figures()
    assert after is not None and after["check_renamed_by_hand_capability"] == before[old]


@pytest.mark.parametrize("resamples", [0])
def test_resamples_zero_turns_it_off(tmp_path, offline_env, resamples):
    toml = write_pipeline(tmp_path, extra=f"[stability]\nresamples = {resamples}\n")
    run = offline_devai_run(tmp_path, pipeline=toml)
    assert load_taxonomy(run / "taxonomy.json").stability is None
    assert not (run / "stage3_stability.parquet").exists()
    assert "| stability |" not in (run / "taxonomy.md").read_text()


def test_a_taxonomy_json_without_figures_loads_with_the_same_hash(tmp_path, offline_env):
    run = offline_devai_run(tmp_path)
    raw = json.loads((run / "taxonomy.json").read_text())
    with_figures = Taxonomy.model_validate(raw).compute_hash()
    raw.pop("stability")
    for cap in raw["capabilities"]:
        cap.pop("stability")
    (tmp_path / "old.json").write_text(json.dumps(raw))
    old = load_taxonomy(tmp_path / "old.json")
    assert old.stability is None and old.content_hash == with_figures


def test_report_shows_the_figures_and_the_least_sure_criteria_in_chromium(tmp_path, offline_env):
    from tests.chromium import Browser, find_chromium

    run = offline_devai_run(tmp_path, ("report",))
    html = (run / "report.html").read_text()
    figures = _figures(run)
    assert html.count('class="num stability') == len(figures)
    if find_chromium() is None:
        pytest.skip("Chromium not installed (apt-get install chromium); the browser check needs it")
    with Browser(tmp_path / "profile", width=1280, height=900) as b:
        b.send("Runtime.enable")
        b.open((run / "report.html").resolve().as_uri())
        cells = b.eval(
            "Array.from(document.querySelectorAll('td.stability')).map(t => [parseFloat(t.textContent),"
            " getComputedStyle(t).display])"
        )
        assert sorted(v for v, _ in cells) == sorted(round(v, 2) for v in figures.values() if v is not None)
        assert {d for _, d in cells} == {"table-cell"}
        note = b.eval("document.getElementById('stability-note').textContent")
        assert "how sure the run is" in note and "criteria stayed in their primary capability" in note
