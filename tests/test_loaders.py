"""Corpus files as a user hands them to `taxonomy lint` and `taxonomy run`: JSON fields holding lists or objects,
the separator of a .csv, a gzip or binary file under any name; what loads, and the one line when it cannot."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from taxonomy.cli import app
from taxonomy.corpus import CorpusConfig, load_corpus
from taxonomy.config import load_config
from tests.conftest import devai_frame, invoke, refused

FEE = "The agent refunds the fee."


@pytest.fixture(autouse=True)
def _here(offline_env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path


def loaded(path: Path) -> pl.DataFrame:
    return load_corpus(CorpusConfig(path=str(path)), Path.cwd()).frame


@pytest.mark.parametrize("field", ["brief", "context"])
def test_a_list_of_strings_in_a_text_field_is_its_lines(tmp_path, field):
    path = write(tmp_path / "r.json", [{"criterion": FEE, field: ["a", "b"]}])
    assert loaded(path)[field].to_list() == ["a\nb"]
    result = CliRunner().invoke(app, ["lint", str(path), "--fail-on", "never"])
    assert result.exit_code == 0 and result.exception is None, result.output


def test_a_list_among_strings_in_a_text_field_of_jsonl(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(
        json.dumps({"criterion": "The agent names the fee.", "brief": "one", "note": "x"})
        + "\n"
        + json.dumps({"criterion": FEE, "brief": ["a", "b"], "note": {"k": 1}})
        + "\n"
    )
    frame = loaded(path)
    assert frame["brief"].to_list() == ["one", "a\nb"]
    assert frame["note"].to_list() == ["x", '{"k": 1}']  # an extra column mixing both keeps the object as JSON


@pytest.mark.parametrize(
    "row, said",
    [
        ({"criterion": [FEE, "x"]}, 'r.json: row 1: criterion is a list (["The agent refunds the fee.", "x"])'),
        ({"criterion": {"text": FEE}}, 'r.json: row 1: criterion is an object ({"text": "The agent refunds'),
        ({"criterion": FEE, "brief": {"a": 1}}, "r.json: row 1: brief is an object"),
        ({"criterion": FEE, "context": [["a"]]}, "r.json: row 1: context is a list"),
        ({"criterion": FEE, "task_id": ["t1", "t2"]}, "r.json: row 1: task_id is a list"),
    ],
)
def test_a_list_or_object_where_one_value_belongs_is_one_line(tmp_path, row, said):
    path = write(tmp_path / "r.json", [row])
    for command in ("lint", "run"):
        error = refused(command, path)
        assert said in error and "fix: " in error
    assert not (tmp_path / "runs").exists()


def test_never_stored_as_python_text(tmp_path):
    path = write(tmp_path / "r.json", [{"criterion": "The agent names the fee."}, {"criterion": [FEE, "x"]}])
    assert "r.json: row 2: criterion is a list" in refused("lint", path)


ROWS = [("tA", "The response is polite, and brief.", "1"), ("tB", "The response names the fee.", "-1")]


@pytest.mark.parametrize("separator", [";", "\t", "|"])
def test_a_csv_separated_otherwise_than_by_commas_loads(tmp_path, separator):
    path = tmp_path / "r.csv"
    path.write_text("\n".join(separator.join(r) for r in [("task_id", "criterion", "weight"), *ROWS]) + "\n")
    frame = loaded(path)
    assert frame["text"].to_list() == [r[1] for r in ROWS] and frame["weight"].to_list() == [1.0, -1.0]
    assert CliRunner().invoke(app, ["lint", str(path), "--fail-on", "never"]).exit_code == 0


def test_a_one_column_csv_keeps_the_punctuation_of_its_criteria(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("criterion\nThe response is polite; and brief.\nThe fee is named; the date | too.\n")
    assert loaded(path)["text"].to_list() == ["The response is polite; and brief.", "The fee is named; the date | too."]


@pytest.mark.parametrize("name", ["r.csv", "r.jsonl"])
def test_gzip_is_read_by_its_first_bytes_whatever_the_name(tmp_path, name):
    text = (
        "".join(json.dumps({"task_id": t, "criterion": c, "weight": w}) + "\n" for t, c, w in ROWS)
        if name.endswith(".jsonl")
        else "task_id,criterion,weight\n" + "".join(f'{t},"{c}",{w}\n' for t, c, w in ROWS)
    )
    path = tmp_path / name
    path.write_bytes(gzip.compress(text.encode()))
    assert loaded(path)["text"].to_list() == [r[1] for r in ROWS]


@pytest.mark.parametrize(
    "data, said, fix",
    [
        (bytes(range(256)) * 8, "r.csv: a binary file, not a text table", "give a text file"),
        (b"PK\x03\x04" + bytes(range(200)), "r.csv: a ZIP archive (an .xlsx workbook is one)", "save the sheet as CSV"),
        (b"PAR1" + bytes(200), "r.csv: a Parquet file", "name it .parquet"),
    ],
)
def test_a_binary_file_is_called_binary(tmp_path, data, said, fix):
    (tmp_path / "r.csv").write_bytes(data)
    error = refused("lint", tmp_path / "r.csv")
    assert said in error and fix in error.split("fix: ")[1]
    assert "UTF-8" not in error.split("fix: ")[0] and "iconv" not in error


@pytest.mark.parametrize("command", [["lint"], ["init", "--out", "p.toml"]])
def test_utf16_without_a_mark_is_still_told_as_utf16_with_a_fix_that_keeps_it(tmp_path, command):
    (tmp_path / "r.csv").write_bytes("criterion\nThe response is polite.\n".encode("utf-16-le"))
    error = refused(command[0], tmp_path / "r.csv", *command[1:])
    assert "r.csv: line 1: holds NUL bytes: UTF-16 or UTF-32 written without a byte-order mark" in error
    assert "iconv -f utf-16le -t utf-8" in error and "latin1" not in error


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32", "utf-32-le"])
@pytest.mark.parametrize("suffix", ["csv", "jsonl"])
def test_utf16_and_utf32_files_with_a_bom_are_read(tmp_path, encoding, suffix):
    rows = [("t1", f"The report states the measured accuracy of experiment {i}.") for i in range(6)]
    text = (
        "task_id,criterion\n" + "".join(f'{t},"{c}"\n' for t, c in rows)
        if suffix == "csv"
        else "".join(json.dumps({"task_id": t, "criterion": c}) + "\n" for t, c in rows)
    )
    # "utf-16"/"utf-32" write a native-order mark; the -be/-le codecs write none, so it is added by hand.
    data = text.encode(encoding) if encoding.count("-") == 1 else ("\ufeff" + text).encode(encoding)
    corpus = tmp_path / f"r.{suffix}"
    corpus.write_bytes(data)
    toml = tmp_path / "p.toml"
    toml.write_text(f'name = "p"\n[corpus]\npath = "{corpus}"\n', encoding="utf-16")
    result = invoke("init", corpus, "--out", tmp_path / "init.toml")
    assert "(6 criteria)" in result.output
    frame = load_corpus(load_config(toml).corpus, toml.parent).frame
    assert frame["text"].to_list() == [c for _, c in rows]


@pytest.mark.parametrize(
    "name, data, where",
    [
        (
            "extra.csv",
            "task_id,criterion\nt,The report states one value.\nt,The report states two,extra\nt,Three.\n",
            "extra.csv: line 3: 3 fields where the header (line 1) has 2",
        ),
        (
            "extra.tsv",
            'task_id\tcriterion\nt\tOne value.\nt\t"A quoted\nfield"\nt\tTwo\textra\n',
            "extra.tsv: line 5: 3 fields where the header (line 1) has 2",
        ),
        (
            "open.csv",
            'task_id,criterion\nt,The report states one value.\nt,"The report states two\nt,three\n',
            "open.csv: line 3: a quoted field starts on this line and its closing quote never comes",
        ),
    ],
)
def test_a_table_parse_error_names_its_line(tmp_path, name, data, where):
    (tmp_path / name).write_text(data)
    error = refused("init", tmp_path / name, "--out", tmp_path / "p.toml")
    assert where in error and "fix: make every row have as many fields as the header" in error


def test_a_carriage_return_inside_a_field_is_read(tmp_path):
    """Old Mac line ends inside an unquoted field: polars keeps them as text; the line finder must not stop the run."""
    (tmp_path / "cr.csv").write_bytes(
        b"task_id,criterion\r\nt,The report states one value.\r\nt,The report states \rtwo\r\nt,three\r\n"
    )
    assert "(3 criteria)" in invoke("init", tmp_path / "cr.csv", "--out", tmp_path / "p.toml").output


@pytest.mark.slow  # a full run in a process of its own
def test_repeated_near_duplicate_and_overlong_rows_are_said_once_and_repeats_collapsed(here):
    base = devai_frame().head(40)
    rows = [
        {"task_id": r["task_id"], "criterion": r["text"] + ("  " if k == 2 else ""), "weight": 1}
        for r in base.iter_rows(named=True)
        for k in range(3)
    ]  # each criterion three times
    rows += [
        {"task_id": "t1", "criterion": "The agent greets the customer.", "weight": 1},
        {"task_id": "t1", "criterion": "THE AGENT greets  the customer", "weight": 1},
        {"task_id": "t1", "criterion": "The agent explains the refund policy. " * 525, "weight": 1},
    ]
    pl.DataFrame(rows).write_csv(here / "support.csv")
    env = {k: v for k, v in os.environ.items() if k not in ("GEMINI_API_KEY", "GOOGLE_API_KEY")}
    done = subprocess.run(
        [sys.executable, "-m", "taxonomy", "run", "support.csv", "-q", "--no-report"],
        cwd=here,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    said = [
        line for line in done.stderr.splitlines() if "support.csv: " in line and "taxonomy lint support.csv" in line
    ]
    assert len(said) == 3, done.stderr  # once each, though the command reads the corpus twice
    repeats, near, long = said
    assert "80 criteria repeat" in repeats and "collapsed" in repeats and "43 criteria left" in repeats
    assert "1 criterion differs" in near and "case, spaces" in near
    assert "1 criterion is over 5,000 characters" in long and "the longest 19,950" in long
    criteria = pl.read_parquet(here / "outputs" / "support" / "offline" / "criteria.parquet")
    assert criteria.height == 43 and criteria["text"].n_unique() == 43
