"""A bare corpus file through the CLI, the TOML it gets, where outputs land,
and the defects a new user met there (each fixed with a test here)."""

from __future__ import annotations

import json
import tomllib

import polars as pl
import pytest

from taxonomy.config import load_config
from taxonomy.corpus import CorpusConfig, load_corpus
from tests.conftest import refused, ROOT, invoke, offline_devai_run


@pytest.fixture(autouse=True)
def _offline(offline_env):
    return offline_env


def devai_rows(n: int | None = None) -> pl.DataFrame:
    """The bundled DevAI criteria under the column names a user's own file would have."""
    frame = load_corpus(CorpusConfig(path=str(ROOT / "data" / "devai"), format="devai"), ROOT).frame
    frame = frame.select(
        pl.col("task_id").alias("Task"),
        pl.col("text").alias("criterion"),
        pl.lit(2).alias("points"),
        pl.col("category"),
        pl.col("brief").alias("prompt"),
    )
    return frame if n is None else frame.head(n)


def test_run_a_bare_csv_detects_columns_writes_its_toml_and_resumes_from_it(here):
    devai_rows().write_csv(here / "support.csv")
    first = invoke("run", "support.csv", "-q", "--no-report")
    # which columns it used, by their names in the file
    assert (
        'columns used: text = "criterion", task_id = "Task", weight = "points", category = "category", brief = "prompt"'
        in first.output
    )
    run = here / "outputs" / "support" / "offline"
    assert (run / "taxonomy.md").is_file() and (run / "stage3_tags.parquet").is_file()
    assert sorted(p.name for p in here.iterdir()) == ["outputs", "support.csv"]  # nothing else, nowhere else
    criteria = pl.read_parquet(run / "criteria.parquet")
    assert criteria["weight"].unique().to_list() == [2.0] and criteria["brief"].str.len_chars().max() > 0
    # the TOML it used is in the run directory; it loads, and running it resumes this very run
    toml = run / "pipeline.toml"
    cfg = load_config(toml)
    assert cfg.corpus.columns.text == "criterion" and cfg.corpus.columns.task_id == "Task"
    again = invoke("run", toml, "-q", "--no-report")
    assert again.output.count("already on disk and up to date, skipped") == 5, again.output
    # tuned: a changed knob rebuilds from the stage that reads it
    toml.write_text(toml.read_text().replace("# [cluster]\n", "[cluster]\n").replace('# k = "auto"', "k = 30"))
    tuned = invoke("run", toml, "-q", "--no-report")
    assert "cluster: recomputing" in tuned.output and "discover: already on disk" in tuned.output


def test_init_writes_the_toml_without_running(here):
    devai_rows(40).write_csv(here / "it.tsv", separator="\t")
    result = invoke("init", "it.tsv")
    assert "Wrote it.toml (40 criteria)" in result.output and "taxonomy run it.toml" in result.output
    assert sorted(p.name for p in here.iterdir()) == ["it.toml", "it.tsv"]  # nothing run, no outputs/
    text = (here / "it.toml").read_text()
    raw = tomllib.loads(text)
    assert raw["corpus"] == {
        "path": "it.tsv",
        "format": "table",
        "columns": {
            "task_id": "Task",
            "text": "criterion",
            "weight": "points",
            "category": "category",
            "brief": "prompt",
        },
    }
    cluster = '# [cluster]\n# unit = "criteria"\n# label_weight = 0.3\n# k = "auto"\n'
    assert cluster in text and "# [llm.prices]" in text  # every other key, with its default
    assert "\n[merge]" not in text  # 40 criteria can make 8-10 capabilities of 2-40%: the paper's bounds stand
    assert load_config(here / "it.toml").corpus.columns.weight == "points"
    assert "already exists" in refused("init", "it.tsv")
    invoke("init", "it.tsv", "--force")


@pytest.mark.parametrize("suffix", ["csv", "tsv", "jsonl", "json", "parquet", "csv.gz"])
def test_every_corpus_format_is_detected(here, suffix):
    frame = devai_rows(60)
    path = here / f"c.{suffix}"
    if suffix == "parquet":
        frame.write_parquet(path)
    elif suffix == "jsonl":
        frame.write_ndjson(path)
    elif suffix == "json":
        path.write_text(json.dumps(frame.to_dicts()))
    elif suffix == "csv.gz":
        import gzip

        path.write_bytes(gzip.compress(frame.write_csv().encode()))
    else:
        frame.write_csv(path, separator="\t" if suffix == "tsv" else ",")
    result = invoke("init", path.name)
    assert 'text = "criterion", task_id = "Task", weight = "points"' in result.output
    assert "(60 criteria)" in result.output


def test_rubric_list_and_healthbench_files_get_their_own_format(here):
    (here / "r.json").write_text(json.dumps([{"criteria": "The total is stated.", "weight": 2}]))
    assert "format rubric_list" in invoke("init", "r.json").output
    (here / "hb.jsonl").write_text(
        json.dumps(
            {
                "prompt_id": "p",
                "prompt": [{"role": "user", "content": "hi"}],
                "rubrics": [{"criterion": "Greets back.", "points": 1}],
            }
        )
        + "\n"
    )
    assert "format healthbench" in invoke("init", "hb.jsonl").output


def test_a_file_that_is_neither_pipeline_nor_corpus_says_what_was_expected(here):
    (here / "notes.txt").write_text("hello")
    line = refused("run", "notes.txt")
    assert (
        "notes.txt: not a corpus or pipeline file" in line
        and "a pipeline TOML (.toml), a corpus file (.csv, .tsv" in line
    )
    assert "no such file" in refused("run", "missing.csv")
    (here / "c.csv").write_text("id,question\n1,What?\n")
    line = refused("run", "c.csv")
    assert (
        "no criterion column: none of criterion, criteria, text, requirement, rubric among its columns (id, question)"
        in line
    )
    assert list(here.glob("outputs")) == []


def test_tag_and_audit_take_a_bare_csv_whose_column_is_criterion(here, tmp_path):
    run = offline_devai_run(tmp_path)
    devai_rows(50).write_csv(here / "new.csv")
    tagged = invoke("tag", "new.csv", "--taxonomy", run / "taxonomy.json", "-q")
    assert 'text = "criterion"' in tagged.output
    out = next((here / "outputs" / "new").glob("offline-taxonomy-*"))
    assert pl.read_parquet(out / "stage3_tags.parquet").height == 50 and (out / "pipeline.toml").is_file()
    audited = invoke("audit", "new.csv", "--taxonomy", run / "taxonomy.json", "-q")
    assert "Audit:" in audited.output and (out / "audit").is_dir()


def test_outputs_go_to_the_folder_the_command_runs_in_not_beside_the_toml(here):
    (here / "pipelines").mkdir()
    devai_rows(60).write_csv(here / "pipelines" / "c.csv")
    (here / "pipelines" / "p.toml").write_text(
        'name = "p"\n[corpus]\npath = "c.csv"\n[corpus.columns]\ntext = "criterion"\n'
    )
    invoke("run", "pipelines/p.toml", "-q", "--no-report")
    assert (here / "outputs" / "p" / "offline" / "taxonomy.json").is_file()
    assert not (here.parent / "outputs").exists()  # the old default, ../outputs relative to the TOML
    # the TOML still decides when it says so (relative to the TOML)
    (here / "pipelines" / "q.toml").write_text(
        'name = "q"\n[corpus]\npath = "c.csv"\n[corpus.columns]\ntext = "criterion"\n[output]\ndir = "out"\n'
    )
    invoke("run", "pipelines/q.toml", "-q", "--no-report")
    assert (here / "pipelines" / "out" / "q" / "offline" / "taxonomy.json").is_file()


def test_row_numbers_follow_one_convention(here):
    (here / "w.csv").write_text("criterion,points\nThe total is stated.,1\nThe date is given.,heavy\n")
    assert "w.csv: row 2 (line 3): weight (column 'points') 'heavy' is not a number" in refused("run", "w.csv")
    (here / "w.jsonl").write_text('{"criterion": "The total is stated."}\n\n{"criterion": "x", "weight": "heavy"}\n')
    assert "w.jsonl: row 2 (line 3): weight 'heavy'" in refused("run", "w.jsonl")
    (here / "e.csv").write_text("")
    line = refused("run", "e.csv")
    assert "row -" not in line and line.startswith("error: e.csv: ")


def test_estimate_without_a_key_says_a_run_would_stop(here):
    devai_rows(30).write_csv(here / "c.csv")
    result = invoke("estimate", "c.csv", "--provider", "gemini")
    assert "| total |" in result.output
    assert "A run would stop before its first call, for lack of credentials: gemini: no API key" in result.output
    as_json = json.loads(invoke("estimate", "c.csv", "--provider", "gemini", "--json").stdout)
    assert "no API key" in as_json["run_would_stop"]


def test_estimate_with_a_key_says_nothing_about_stopping(here, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "k")
    devai_rows(30).write_csv(here / "c.csv")
    assert "would stop" not in invoke("estimate", "c.csv", "--provider", "gemini").output


def test_summary_table_keeps_whole_names_when_not_a_terminal(tmp_path):
    run = offline_devai_run(tmp_path)
    result = invoke("tag", run, "-q")  # CliRunner's output is not a terminal
    names = [c["name"] for c in json.loads((run / "taxonomy.json").read_text())["capabilities"]]
    for name in names:
        assert f"| {name} |" in result.output
    assert "…" not in result.output


def test_rename_rewrites_the_old_name_in_the_description_and_split_keeps_it(tmp_path):
    run = offline_devai_run(tmp_path)
    caps = json.loads((run / "taxonomy.json").read_text())["capabilities"]
    big = max(caps, key=lambda c: len(c["members"]))
    old, new = big["name"], "check_hand_named_thing_capability"
    invoke("edit", run, "rename", old, new)
    after = {c["name"]: c for c in json.loads((run / "taxonomy.json").read_text())["capabilities"]}
    card = after[new]
    assert old not in card["description"] and card["title"] == big["title"]  # the corpus's phrases still describe it
    assert not any(old in ne for c in after.values() for ne in c["non_examples"])
    result = invoke("edit", run, "split", new)
    assert "its largest part keeps the name" in result.output
    split = {c["name"]: c for c in json.loads((run / "taxonomy.json").read_text())["capabilities"]}
    assert new in split and len(split) == len(after) + 1
    tags = pl.read_parquet(run / "stage3_tags.parquet")
    assert tags.filter(pl.col("primary") == new).height > 0


@pytest.mark.parametrize("name", ["c.csv", "p.toml"])
def test_tag_without_a_taxonomy_names_the_option_and_makes_no_folder(here, name):
    devai_rows(30).write_csv(here / "c.csv")
    (here / "p.toml").write_text('name = "p"\n[corpus]\npath = "c.csv"\n[corpus.columns]\ntext = "criterion"\n')
    before = sorted(p.name for p in here.iterdir())
    error = refused("tag", name)
    assert "--taxonomy" in error.split("fix: ")[1] and f"taxonomy run {name}" in error
    assert sorted(p.name for p in here.iterdir()) == before
