"""Every bad input the issue lists: one line naming the file, the row or key, and the fix; exit 2;
nothing written before is lost."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from taxonomy.cli import app
from tests.conftest import ROOT, refused, write_pipeline

GOOD = [{"task_id": "t", "text": f"The report states the accuracy value for experiment number {i}."} for i in range(8)]
SMALL = "[cluster]\nk = 2\n[merge]\nmin_caps = 1\nmax_caps = 3\nmin_share = 0\n"


def pipeline(
    tmp: Path, corpus: Path | str, fmt: str = "table", extra: str = "", name: str = "p", corpus_keys: str = ""
) -> Path:
    toml = tmp / "p.toml"
    toml.write_text(
        f'name = "{name}"\n[corpus]\npath = "{corpus}"\nformat = "{fmt}"\n{corpus_keys}[output]\ndir = '
        f'"{tmp / "out"}"\n{extra}'
    )
    return toml


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(autouse=True)
def _offline(offline_env):
    return offline_env


@pytest.mark.parametrize(
    "name, data, where",
    [
        ("bad.jsonl", b'{"text": "ok"}\n{"text": "caf\xe9"}\n', "bad.jsonl: line 2: not UTF-8"),
        ("bad.csv", b"text\nfine\ncaf\xe9\n", "bad.csv: line 3: not UTF-8"),
        ("bad.jsonl.gz", b"\x1f\x8b\x08\x00garbage", "bad.jsonl.gz: not a readable gzip file"),
        ("bad.csv.gz", b"\x1f\x8b\x08\x00garbage", "bad.csv.gz: not a readable gzip file"),
        ("head.csv", b"text,weight\n", "head.csv: no criteria in it"),
    ],
)
def test_unreadable_corpus_files(tmp_path, name, data, where):
    (tmp_path / name).write_bytes(data)
    assert where in refused("run", pipeline(tmp_path, tmp_path / name))


def test_json_with_trailing_garbage(tmp_path):
    (tmp_path / "r.json").write_text('[{"criteria": "The value is reported.", "weight": 1}] trailing')
    assert "r.json: line 1: invalid JSON at column" in refused(
        "run", pipeline(tmp_path, tmp_path / "r.json", "rubric_list")
    )


def test_non_utf8_toml(tmp_path):
    (tmp_path / "p.toml").write_bytes(b'name = "caf\xe9"\n')
    assert "p.toml: line 1: not UTF-8" in refused("run", tmp_path / "p.toml")


def test_corpus_empty_after_filtering(tmp_path):
    corpus = write_jsonl(tmp_path / "c.jsonl", [{"text": "  "}])
    error = refused("run", pipeline(tmp_path, corpus, corpus_keys='on_empty = "skip"\n'))
    assert "c.jsonl: no criteria left after filtering" in error


@pytest.mark.parametrize(
    "args, where",
    [
        (("--limit", "0"), "--limit 0: must be 1 or more"),
        (("--limit", "-3"), "--limit -3: must be 1 or more"),
    ],
)
def test_numeric_flags(tmp_path, args, where):
    assert where in refused("run", pipeline(tmp_path, write_jsonl(tmp_path / "c.jsonl", GOOD)), *args)


@pytest.mark.parametrize(
    "extra, where",
    [
        ("[labels]\nmin_words = 9\nmax_words = 3\n", "key labels: min_words = 9 is above max_words = 3"),
        ("[labels]\nmin_labels = 4\n", "key labels: min_labels = 4 is above max_labels = 3"),
        ("[tag]\nmin_tags = 4\nmax_tags = 2\n", "key tag: min_tags = 4 is above max_tags = 2"),
        ("[merge]\nmin_caps = 12\nmax_caps = 8\n", "key merge: min_caps = 12 is above max_caps = 8"),
        ("[merge]\nmin_share = 0.5\nmax_share = 0.4\n", "key merge: min_share = 0.5 is above max_share = 0.4"),
        ("[labels]\nmin_labels = -1\n", "key labels.min_labels: Input should be greater than or equal to 1"),
        ("[tag]\nbatch_size = -2\n", "key tag.batch_size"),
    ],
)
def test_contradictory_and_negative_settings(tmp_path, extra, where):
    assert where in refused("run", pipeline(tmp_path, write_jsonl(tmp_path / "c.jsonl", GOOD), extra=extra))


@pytest.mark.parametrize("name", ["../../x", "", "a/b", ".."])
def test_unsafe_pipeline_names_write_nothing(tmp_path, name):
    toml = pipeline(tmp_path, write_jsonl(tmp_path / "c.jsonl", GOOD), name=name)
    assert "key name:" in refused("run", toml) and not (tmp_path / "out").exists()


def test_oversized_criterion_is_refused_or_truncated_never_sent(tmp_path):
    rows = [{"task_id": "t", "text": "The value " + "x" * 1_000_000}] + GOOD
    corpus = write_jsonl(tmp_path / "big.jsonl", rows)
    assert (
        "big.jsonl: row 1 (line 1): criterion text is 1,000,010 characters, above corpus.max_chars = 20,000"
        in refused("run", pipeline(tmp_path, corpus))
    )
    toml = pipeline(tmp_path, corpus, corpus_keys='on_long = "truncate"\n', extra=SMALL)
    result = CliRunner().invoke(app, ["discover", str(toml), "--run-dir", str(tmp_path / "run"), "-q"])
    assert result.exit_code == 0, result.output
    import polars as pl

    assert pl.read_parquet(tmp_path / "run" / "criteria.parquet")["text"].str.len_chars().max() == 20_000
    warnings = json.loads((tmp_path / "run" / "manifest.json").read_text())["corpus"]["warnings"]
    assert any("truncated 1 criteria to corpus.max_chars" in w for w in warnings)


@pytest.fixture
def finished_run(tmp_path) -> tuple[Path, Path]:
    toml = write_pipeline(tmp_path, limit=60, extra="[cluster]\nk = 8\n")
    result = CliRunner().invoke(app, ["run", str(toml), "--run-dir", str(tmp_path / "run"), "-q"])
    assert result.exit_code == 0, result.output
    return toml, tmp_path / "run"


def _verdicts(tmp_path: Path) -> str:
    return f"devai:{ROOT / 'data' / 'devai'}"


@pytest.mark.parametrize(
    "artifact, damage",
    [
        ("criteria.parquet", "truncate"),
        ("stage1_labels.parquet", "garbage"),
        ("stage3_tags.parquet", "truncate"),
        ("label_embeddings.npy", "garbage"),
        ("manifest.json", "truncate"),
    ],
)
def test_damaged_artifacts_from_run_report_breakdown_guidance(tmp_path, finished_run, artifact, damage):
    toml, run = finished_run
    path = run / artifact
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if damage == "truncate" else b"\x93NUMPY" + b"\x00" * 40)
    commands = [
        ("report", run),
        ("breakdown", run, "--verdicts", _verdicts(tmp_path), "--boot", "0"),
        ("guidance", run, "-q"),
        ("run", toml, "--run-dir", run, "-q"),
    ]
    hit = 0
    for command in commands:
        result = CliRunner().invoke(app, [str(a) for a in command])
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            f"{command[0]}: {result.exception!r}"
        )
        if result.exit_code == 2:  # a command that never reads this artifact may succeed
            hit += 1
            assert f"{artifact}: damaged" in result.output and "fix: " in result.output, result.output
        else:
            assert result.exit_code == 0, result.output
    assert hit >= 2


def test_breakdown_unknown_column_and_negative_boot(tmp_path, finished_run):
    _, run = finished_run
    verdicts = _verdicts(tmp_path)
    assert "--by nope: no such column in" in refused("breakdown", run, "--verdicts", verdicts, "--by", "nope")
    assert "--boot -1: must be 0 or more" in refused("breakdown", run, "--verdicts", verdicts, "--boot", "-1")


def test_a_failed_invocation_loses_nothing_written_before(tmp_path, finished_run):
    toml, run = finished_run
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    toml.write_text(toml.read_text().replace("[cluster]", "[cluster]\nk = -1\nnot_a_key = 2\n[unused]"))
    assert "key cluster.not_a_key: not a setting" in refused("run", toml, "--run-dir", run, "-q")
    after = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    assert after == before


def test_run_from_a_newer_version_is_refused(tmp_path, finished_run):
    toml, run = finished_run
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["run_format"] = 99
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert "written by a newer rubric-taxonomy" in refused("report", run)


def test_bare_corpus_with_spaces_in_its_name_gets_a_safe_pipeline_name(tmp_path, monkeypatch):
    corpus = write_jsonl(tmp_path / "my rubric (v2).jsonl", GOOD)
    shutil.copy(corpus, tmp_path / "copy.jsonl")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # outputs go to ./outputs of the folder the command runs in: never the checkout
    result = CliRunner().invoke(app, ["tag", str(corpus), "--taxonomy", str(tmp_path / "none.json"), "-q"])
    assert result.exit_code == 2 and "key name" not in result.output and "none.json" in result.output
    assert list(work.iterdir()) == []  # a refused command writes nothing, not even a pipeline TOML
