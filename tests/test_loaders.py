"""Corpus files as a user hands them to `taxonomy lint` and `taxonomy run`: JSON fields holding lists or objects,
the separator of a .csv, a gzip or binary file under any name; what loads, and the one line when it cannot."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from taxonomy.cli import app
from taxonomy.corpus import CorpusConfig, load_corpus
from tests.conftest import refused

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


def test_utf16_without_a_mark_is_still_told_as_utf16(tmp_path):
    (tmp_path / "r.csv").write_bytes("criterion\nThe response is polite.\n".encode("utf-16-le"))
    assert "UTF-16 or UTF-32 written without a byte-order mark" in refused("lint", tmp_path / "r.csv")
