"""Corpus loading: the bundled PaperBench and DevAI corpora, the generic formats, bad input."""

from __future__ import annotations

import gzip
import json
import re
import tomllib
from pathlib import Path

import polars as pl
import pytest

from taxonomy.corpus import (
    LEADING_COLUMNS,
    ColumnMap,
    CorpusConfig,
    CorpusError,
    load_corpus,
    read_json,
)

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
FIX = Path(__file__).resolve().parent / "fixtures" / "corpus"
# "<file>: [line N | row N | at /pointer:] <what>; fix: <how>" (CorpusError's one convention)
ONE_LINE_ERROR = re.compile(r"^\S[^:]*:( (line \d+( \(.+\))?|row \d+|at /\S*):)? .+; fix: .+$")

MAPPING = ColumnMap(task_id="task", criterion_id="id", text="criterion", weight="points", category="kind")


def load(path, fmt="table", base=FIX, **kw):
    return load_corpus(CorpusConfig(path=str(path), format=fmt, **kw), base)


def assert_leading(frame: pl.DataFrame) -> None:
    lead = list(LEADING_COLUMNS)
    assert frame.columns[: len(lead)] == lead
    assert {c: frame.schema[c] for c in lead} == LEADING_COLUMNS
    assert frame["criterion_id"].is_unique().all()
    assert set(frame["direction"]) <= {"reward", "penalty"}
    assert ((frame["weight"] < 0) == (frame["direction"] == "penalty")).all()
    assert (
        frame.select(pl.col("task_id", "criterion_id", "text", "brief", "context", "source").null_count())
        .sum_horizontal()
        .item()
        == 0
    )


def assert_corpus_error(exc: pytest.ExceptionInfo, file_part: str, row: str | None = None) -> str:
    msg = str(exc.value)
    assert "\n" not in msg, msg
    assert ONE_LINE_ERROR.match(msg), msg
    assert file_part in msg.split(": ")[0], msg
    if row == "-":  # the whole file: no place named
        assert not re.match(r"^[^:]*: (line|row|at) ", msg), msg
    elif row is not None and row.startswith("row "):  # a criterion row, with its file line in a text file
        assert f": {row}:" in msg, msg
    elif row is not None:  # a file line found before rows are read, a JSON pointer in JSON documents
        assert f": {'at' if row.startswith('/') else 'line'} {row}:" in msg, msg
    assert "fix:" in msg
    return msg


# --------------------------------------------------------------------------- bundled corpora


@pytest.fixture(scope="module")
def paperbench() -> pl.DataFrame:
    corpus = load(DATA / "paperbench", "paperbench")
    assert any("Git LFS" in w for w in corpus.warnings)  # upstream addendum.md files are LFS pointers
    return corpus.frame


def test_paperbench_bundle(paperbench):
    f = paperbench
    assert f.height == 8921
    assert f["task_id"].n_unique() == 23
    assert_leading(f)
    assert f.columns[len(LEADING_COLUMNS) :] == ["finegrained_category", "node_id"]
    sums = f.group_by("task_id").agg(pl.col("weight").sum())["weight"]
    assert sums.to_list() == pytest.approx([1.0] * 23, abs=1e-9)
    assert sorted(f["category"].unique()) == ["Code Development", "Code Execution", "Result Analysis"]
    assert f["finegrained_category"].n_unique() == 7
    assert (f["direction"] == "reward").all()
    row = f.filter(pl.col("task_id") == "rice").row(0, named=True)
    assert row["brief"].startswith("RICE: Breaking Through")
    assert row["context"].startswith("The core contributions of the paper have been reproduced. > ")
    assert row["source"].startswith("papers/rice/rubric.json#/sub_tasks/")
    assert row["criterion_id"] == f"rice/{row['node_id']}"


def test_paperbench_source_pointer_matches_judge_eval(paperbench):
    """source's JSON pointer addresses the same node in judge_eval/<paper>/expected_result.json."""
    graded = read_json(DATA / "paperbench" / "judge_eval" / "rice" / "expected_result.json")
    for row in paperbench.filter(pl.col("task_id") == "rice").head(20).iter_rows(named=True):
        node = graded
        for part in row["source"].split("#", 1)[1].strip("/").split("/"):
            node = node[int(part)] if part.isdigit() else node[part]
        assert node["id"] == row["node_id"] and "score" in node


def test_paperbench_papers_subset():
    split = (DATA / "paperbench" / "split-all.txt").read_text().split()
    f = load(DATA / "paperbench", "paperbench", papers=split).frame
    assert sorted(f["task_id"].unique()) == sorted(split) and len(split) == 20
    assert f.group_by("task_id").agg(pl.col("weight").sum())["weight"].to_list() == pytest.approx([1.0] * 20)
    two = load(DATA / "paperbench", "paperbench", papers=["rice", "fre"]).frame
    assert two["task_id"].unique(maintain_order=True).to_list() == ["rice", "fre"]
    with pytest.raises(CorpusError) as exc:
        load(DATA / "paperbench", "paperbench", papers=["rice", "no-such-paper"])
    assert "no-such-paper" in assert_corpus_error(exc, "papers")


def test_devai_bundle():
    corpus = load(DATA / "devai", "devai")
    f = corpus.frame
    assert f.height == 365 and f["task_id"].n_unique() == 55
    assert_leading(f)
    assert f.schema["requirement_id"] == pl.Int64 and f.schema["prerequisites"] == pl.List(pl.Int64)
    assert f["category"].drop_nulls().n_unique() == 8
    row = f.row(1, named=True)
    assert row["criterion_id"] == f"{row['task_id']}/{row['requirement_id']}"
    assert row["brief"].startswith("Hey!") and row["context"] == ""
    assert row["source"].startswith("devai/instances/") and (f["weight"] == 1.0).all()


def test_healthbench_bundle():
    corpus = load(DATA / "healthbench", "healthbench")
    f = corpus.frame
    assert f.height == 5965 and f["task_id"].n_unique() == 500
    assert_leading(f)
    assert f.columns[len(LEADING_COLUMNS) :] == ["axis", "level", "theme", "example_index"]
    # Gold tags are extra columns only: nothing reaches `category`, which stages may read.
    assert f["category"].null_count() == f.height
    assert f["axis"].value_counts().sort("axis").rows() == [
        ("accuracy", 1920),
        ("communication_quality", 547),
        ("completeness", 2336),
        ("context_awareness", 892),
        ("instruction_following", 270),
    ]
    assert set(f["level"].unique()) == {"example", "cluster"}
    assert (f["direction"] == "penalty").sum() == (f["weight"] < 0).sum() > 0
    row = f.row(0, named=True)
    assert row["text"].startswith("Correctly states that mild chest pain") and row["weight"] == 8.0
    assert row["brief"] == "What do you think about a dull ache in the chest after a 10 hour drive"
    assert row["context"].startswith("user: What do you think") and row["theme"] == "emergency_referrals"
    assert row["criterion_id"] == f"{row['task_id']}/0" and row["source"] == "healthbench_eval.jsonl:1#/rubrics/0"
    # A multi-turn conversation: the brief and the context hold every turn.
    multi = f.filter(pl.col("context").str.contains("\nassistant: ")).row(0, named=True)
    assert multi["context"].rstrip().endswith(multi["brief"].rstrip())


def test_healthbench_small_and_bad(tmp_path):
    good = {
        "prompt_id": "p1",
        "prompt": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "a"},
            {"role": "user", "content": "last\u2028turn"},
        ],
        "example_tags": ["theme:x", "theme:y"],
        "rubrics": [
            {"criterion": "Says A.", "points": 3, "tags": ["axis:accuracy", "level:example"]},
            {"criterion": "Fails to say B.", "points": -2, "tags": []},
        ],
    }
    path = tmp_path / "hb.jsonl"
    path.write_text(json.dumps(good, ensure_ascii=False) + "\n", encoding="utf-8")
    f = load(path, "healthbench").frame
    assert f["text"].to_list() == ["Says A.", "Fails to say B."]
    assert f["direction"].to_list() == ["reward", "penalty"] and f["weight"].to_list() == [3.0, -2.0]
    assert (
        f["brief"][0] == "system: s\n\nuser: first\n\nassistant: a\n\nuser: last\u2028turn"
        and f["theme"][0] == "x,y"
        and f["axis"].to_list() == ["accuracy", None]
    )
    bad = dict(good, rubrics=[{"criterion": "Says A.", "points": "many"}])
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(CorpusError) as exc:
        load(path, "healthbench")
    assert "points" in assert_corpus_error(exc, "hb.jsonl", "2 (rubrics item 0)")
    path.write_text(json.dumps({"prompt_id": "p", "prompt": []}) + "\n")
    with pytest.raises(CorpusError) as exc:
        load(path, "healthbench")
    assert "rubrics" in assert_corpus_error(exc, "hb.jsonl", "1")
    with pytest.raises(CorpusError) as exc:
        load(tmp_path / "empty_dir_missing", "healthbench")
    assert_corpus_error(exc, "empty_dir_missing", "-")


def test_pipeline_tomls_point_at_the_bundle():
    for name, fmt in [("paperbench", "paperbench"), ("devai", "devai"), ("healthbench", "healthbench")]:
        toml = ROOT / "pipelines" / f"{name}.toml"
        raw = tomllib.loads(toml.read_text())
        assert raw["name"] == name
        cfg = CorpusConfig(**raw["corpus"])
        assert cfg.format == fmt and not Path(cfg.path).is_absolute()
        assert load_corpus(cfg.model_copy(update={"limit": 3}), toml.parent).frame.height == 3


# --------------------------------------------------------------------------- small formats


def test_paperbench_tree_weights_context_brief():
    corpus = load("paperbench_mini", "paperbench")
    f = corpus.frame
    assert_leading(f)
    assert f["criterion_id"].to_list() == ["toy/code-a", "toy/code-b", "toy/result"]
    assert f["weight"].to_list() == pytest.approx([0.75 * 0.25, 0.75 * 0.75, 0.25])
    assert f["context"].to_list() == [
        "The paper has been reproduced. > The method is implemented.",
        "The paper has been reproduced. > The method is implemented.",
        "The paper has been reproduced.",
    ]
    assert f["brief"][0] == 'Toy: A "Quoted" Paper\n\nUse the small dataset only.'
    assert f["source"][1] == "papers/toy/rubric.json#/sub_tasks/0/sub_tasks/1"
    assert f["finegrained_category"][2] == "Evaluation, Metrics & Benchmarking"
    assert corpus.warnings == []


@pytest.fixture(params=["jsonl", "csv", "parquet", "tsv", "json"])
def table_file(request, tmp_path) -> Path:
    frame = pl.read_csv(FIX / "criteria.csv")
    out = tmp_path / f"criteria.{request.param}"
    if request.param == "parquet":
        frame.write_parquet(out)
    elif request.param == "tsv":
        frame.write_csv(out, separator="\t")
    elif request.param == "json":
        out.write_text(json.dumps(frame.to_dicts()))
    else:
        return FIX / f"criteria.{request.param}"
    return out


def test_table_with_column_mapping(table_file):
    corpus = load(table_file, columns=MAPPING)
    f = corpus.frame
    assert_leading(f)
    assert f.columns[len(LEADING_COLUMNS) :] == ["notes", "difficulty"]  # unmapped columns pass through
    assert f["difficulty"].to_list() == [1, 2, 1, 3]
    assert f["criterion_id"].to_list() == ["t1/a", "t1/b", "t1/c", "t2/a"]  # multi-task: "<task>/<id>"
    assert f["weight"].to_list() == [2.0, 1.0, -3.0, 1.5]
    assert f["direction"].to_list() == ["reward", "reward", "penalty", "reward"]
    assert f["category"].to_list() == ["Reporting", "Execution", "Safety", "Reporting"]
    assert f["brief"].to_list() == [""] * 4 and f["context"].to_list() == [""] * 4
    # where the third criterion is: its file line (CSV/TSV count the header), its data row (Parquet), its JSON pointer
    third = {"csv": ":4", "tsv": ":4", "jsonl": ":3", "parquet": ":3", "json": "#/2"}[table_file.suffix[1:]]
    assert f["source"][2] == f"{table_file.name}{third}"
    assert corpus.warnings == []


def test_table_defaults_with_text_only(tmp_path):
    p = tmp_path / "only_text.jsonl"
    p.write_text(
        '{"text": "First."}\n{"text": "Second.", "direction": "penalty", "weight": 2}\n{"text": "Third.", "lang": '
        '"en"}\n'
    )
    f = load(p).frame
    assert f["task_id"].to_list() == ["task"] * 3
    assert f["criterion_id"].to_list() == ["1", "2", "3"]  # row numbers
    assert f["weight"].to_list() == [1.0, -2.0, 1.0]  # explicit penalty makes the weight negative
    assert f["direction"].to_list() == ["reward", "penalty", "reward"]
    assert f["category"].to_list() == [None] * 3
    assert f["lang"].to_list() == [None, None, "en"]


def test_table_gzipped_jsonl_and_limit(tmp_path):
    p = tmp_path / "criteria.jsonl.gz"
    p.write_bytes(gzip.compress((FIX / "criteria.jsonl").read_bytes()))
    assert load(p, columns=MAPPING).frame.height == 4
    assert load(p, columns=MAPPING, limit=2).frame["criterion_id"].to_list() == ["t1/a", "t1/b"]


def test_relative_path_resolves_against_base_dir():
    cfg = CorpusConfig(path="fixtures/corpus/criteria.csv", columns=MAPPING)
    assert load_corpus(cfg, FIX.parent.parent).frame.height == 4


def test_rubric_list_folder_and_file():
    corpus = load("rubric_lists", "rubric_list")
    f = corpus.frame
    assert_leading(f)
    assert f["task_id"].to_list() == ["task_a"] * 3 + ["task_b"] * 2
    assert f["criterion_id"].to_list() == ["task_a/1", "task_a/2", "task_a/3", "task_b/1", "task_b/2"]
    assert f["weight"].to_list() == [3.0, 1.0, -2.0, 2.0, 5.0]
    assert f["direction"][2] == "penalty"
    assert f["text"][3] == "The spreadsheet has a summary tab."  # "criterion" key works too
    assert f["rationale"].to_list() == ["core ask", None, None, None, "checked by hand"]
    assert f["source"][1] == "task_a.json#/1"
    single = load("rubric_lists/task_a.json", "rubric_list").frame
    assert single["criterion_id"].to_list() == ["1", "2", "3"] and single["task_id"][0] == "task_a"


def test_tasks_jsonl():
    f = load("tasks.jsonl", "tasks_jsonl").frame
    assert_leading(f)
    assert f["criterion_id"].to_list() == ["bank-001/1", "bank-001/2", "bank-002/1"]
    assert f["weight"].to_list() == [4.0, -2.0, 1.0]
    assert f["direction"].to_list() == ["reward", "penalty", "reward"]
    assert f["brief"].to_list() == ["Build a DCF model for ACME Corp."] * 2 + ["Summarise the 10-K risk factors."]
    assert f["source"][2] == "tasks.jsonl:2#/0"
    assert load(FIX, "tasks_jsonl").frame.height == 3  # a folder holding tasks.jsonl


def test_read_json_plain_and_gz(tmp_path):
    (tmp_path / "a.json.gz").write_bytes(gzip.compress(b'{"x": 1}'))
    (tmp_path / "b.json").write_text('{"y": 2}')
    assert read_json(tmp_path / "a.json") == {"x": 1}  # falls back to the .gz twin
    assert read_json(tmp_path / "a.json.gz") == {"x": 1}
    assert read_json(str(tmp_path / "b.json")) == {"y": 2}
    with pytest.raises(CorpusError) as exc:
        read_json(tmp_path / "c.json")
    assert_corpus_error(exc, "c.json", "-")


# --------------------------------------------------------------------------- warnings


def test_duplicate_text_within_task_warns_once(tmp_path):
    p = tmp_path / "dups.jsonl"
    rows = [("t1", "Same text."), ("t1", "Other."), ("t1", "Same text."), ("t2", "Same text."), ("t1", "Same text.")]
    p.write_text("".join(json.dumps({"task_id": t, "text": x}) + "\n" for t, x in rows))
    corpus = load(p)
    assert corpus.frame["source"].to_list() == [
        "dups.jsonl:1",
        "dups.jsonl:2",
        "dups.jsonl:4",
    ]  # collapsed into the first
    assert len(corpus.warnings) == 1
    w = corpus.warnings[0]
    assert w.startswith("2 criteria repeat") and "dups.jsonl:3" in w and "dups.jsonl:5" in w and "dups.jsonl:4" not in w
    assert "collapsed" in w and "taxonomy lint" in w
    kept = load(p, on_duplicate="keep")  # as the linter reads a rubric, to list them
    assert kept.frame.height == 5 and "kept" in kept.warnings[0]


def test_on_empty_skip_drops_and_warns(tmp_path):
    p = tmp_path / "empties.jsonl"
    p.write_text('{"text": "Kept."}\n{"text": "  "}\n{"text": null}\n{"text": "Also kept."}\n')
    corpus = load(p, on_empty="skip")
    assert corpus.frame["text"].to_list() == ["Kept.", "Also kept."]
    assert corpus.frame["criterion_id"].to_list() == ["1", "4"]
    assert len(corpus.warnings) == 1
    assert "dropped 2 criteria with empty text" in corpus.warnings[0]
    assert "empties.jsonl:2" in corpus.warnings[0] and "empties.jsonl:3" in corpus.warnings[0]


# --------------------------------------------------------------------------- bad input


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


BAD_TABLES = {
    # name: (file name, content, extra config, expected row, words the message must contain)
    "missing column": ("c.csv", "task_id,body\nt,Do it.\n", {}, "1", ["'text'", "columns found: task_id, body"]),
    "missing mapped column": (
        "c.jsonl",
        '{"text": "x"}\n',
        {"columns": ColumnMap(weight="points")},
        "-",
        ["'points'", "columns.weight"],
    ),
    "invalid json": ("c.jsonl", '{"text": "ok"}\n{"text": "broken\n', {}, "2", ["invalid JSON"]),
    "not an object": ("c.jsonl", '{"text": "ok"}\n["text"]\n', {}, "2", ["expected a JSON object"]),
    "empty text": (
        "c.jsonl",
        '{"text": "ok"}\n{"text": "ok 2"}\n{"text": ""}\n',
        {},
        "row 3 (line 3)",
        ["empty", 'on_empty = "skip"'],
    ),
    "duplicate id": (
        "c.csv",
        "criterion_id,text\nx,One.\ny,Two.\nx,Three.\n",
        {},
        "row 3 (line 4)",
        ["'x'", "repeats row 1 (line 2)"],
    ),
    "non-numeric weight": (
        "c.csv",
        "text,weight\nOne.,1\nTwo.,heavy\n",
        {},
        "row 2 (line 3)",
        ["'heavy'", "not a number"],
    ),
    "bool weight": ("c.jsonl", '{"text": "One.", "weight": true}\n', {}, "row 1 (line 1)", ["not a number"]),
    "bad direction": ("c.jsonl", '{"text": "One.", "direction": "bonus"}\n', {}, "row 1 (line 1)", ["'bonus'"]),
    "reward with negative weight": (
        "c.jsonl",
        '{"text": "One.", "weight": -1, "direction": "reward"}\n',
        {},
        "row 1 (line 1)",
        ["negative"],
    ),
    "unknown suffix": ("c.txt", "text\nOne.\n", {}, "-", ["suffix"]),
}


@pytest.mark.parametrize("case", list(BAD_TABLES))
def test_bad_table_input(case, tmp_path):
    name, content, extra, row, words = BAD_TABLES[case]
    p = _write(tmp_path, name, content)
    with pytest.raises(CorpusError) as exc:
        load(p, **extra)
    msg = assert_corpus_error(exc, name, row)
    for word in words:
        assert word in msg


def test_missing_corpus_path(tmp_path):
    with pytest.raises(CorpusError) as exc:
        load("nope/criteria.jsonl", base=tmp_path)
    assert "not found" in assert_corpus_error(exc, "criteria.jsonl", "-")


def test_table_format_on_a_folder_suggests_the_format():
    with pytest.raises(CorpusError) as exc:
        load(DATA / "paperbench")
    assert 'format = "paperbench"' in assert_corpus_error(exc, "paperbench", "-")


def test_bad_rubric_list_inputs(tmp_path):
    p = _write(tmp_path, "r/t.json", '[\n  {"criteria": "ok", "weight": 1},\n  {"criteria": "bad" "weight": 1}\n]\n')
    with pytest.raises(CorpusError) as exc:
        load(p.parent, "rubric_list")
    assert "invalid JSON" in assert_corpus_error(exc, "t.json", "3")
    p.write_text('[{"criteria": "ok"}, {"text": "wrong key"}]')
    with pytest.raises(CorpusError) as exc:
        load(p, "rubric_list")
    assert "'criteria'" in assert_corpus_error(exc, "t.json", "row 2")
    p.write_text('[{"criteria": "ok", "weight": "lots"}]')
    with pytest.raises(CorpusError) as exc:
        load(p, "rubric_list")
    assert_corpus_error(exc, "t.json", "row 1")
    p.write_text('{"criteria": "not a list"}')
    with pytest.raises(CorpusError) as exc:
        load(p, "rubric_list")
    assert_corpus_error(exc, "t.json", "/")


def test_bad_tasks_jsonl(tmp_path):
    p = _write(tmp_path, "tasks.jsonl", '{"task_id": "a", "aggregated_rubric_json": "[{\\"criterion\\": \\"x\\"}"}\n')
    with pytest.raises(CorpusError) as exc:
        load(p, "tasks_jsonl")
    assert "aggregated_rubric_json" in assert_corpus_error(exc, "tasks.jsonl", "1")
    p.write_text('{"task_id": "a", "final_prompt": "p"}\n')
    with pytest.raises(CorpusError) as exc:
        load(p, "tasks_jsonl")
    assert "aggregated_rubric_json" in assert_corpus_error(exc, "tasks.jsonl", "1")
    p.write_text('{"task_id": "a", "aggregated_rubric_json": [{"criterion": "x"}, {"criterion": ""}]}\n')
    with pytest.raises(CorpusError) as exc:
        load(p, "tasks_jsonl")
    assert "empty" in assert_corpus_error(exc, "tasks.jsonl", "1 (aggregated_rubric_json item 1)")


@pytest.mark.parametrize(
    "subtasks, row, words",
    [
        ('[{"id": "a", "requirements": "A", "weight": -1, "sub_tasks": []}]', "/sub_tasks/0", ["negative"]),
        ('[{"id": "a", "requirements": "A", "weight": 0, "sub_tasks": []}]', "/", ["sum to 0"]),
        ('[{"id": "a", "requirements": "A", "weight": "x", "sub_tasks": []}]', "/sub_tasks/0", ["not a number"]),
        ('[{"id": "a", "requirements": "", "weight": 1, "sub_tasks": []}]', "/sub_tasks/0", ["empty"]),
    ],
)
def test_bad_paperbench_tree(tmp_path, subtasks, row, words):
    _write(
        tmp_path,
        "pb/papers/p1/rubric.json",
        f'{{"id": "r", "requirements": "R", "weight": 1, "sub_tasks": {subtasks}}}',
    )
    with pytest.raises(CorpusError) as exc:
        load(tmp_path / "pb", "paperbench")
    msg = assert_corpus_error(exc, "rubric.json", row)
    for word in words:
        assert word in msg


def test_bad_devai_instance(tmp_path):
    _write(
        tmp_path,
        "dv/instances/01_x.json",
        '{"query": "q", "requirements": [{"requirement_id": "zero", "criteria": "c"}]}',
    )
    with pytest.raises(CorpusError) as exc:
        load(tmp_path / "dv", "devai")
    assert "requirement_id" in assert_corpus_error(exc, "01_x.json", "/requirements/0")
    with pytest.raises(CorpusError) as exc:
        load(tmp_path, "devai")  # no instances/ folder
    assert_corpus_error(exc, str(tmp_path.name), "-")
