"""Fuzz: hundreds of malformed corpora and configs, made by mutating the real fixture files, run
through the CLI. Each either works (exit 0) or ends in one `error:` line with exit 2; never a traceback."""

from __future__ import annotations

import gzip
import random
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from taxonomy.cli import app

FIX = Path(__file__).resolve().parent / "fixtures" / "corpus"
COLUMNS = (
    '[corpus.columns]\ntask_id = "task"\ncriterion_id = "id"\ntext = "criterion"\n'
    'weight = "points"\ncategory = "kind"\n'
)
# (file under fixtures/corpus, format, extra corpus keys)
SOURCES = [
    ("criteria.jsonl", "table", COLUMNS),
    ("criteria.csv", "table", COLUMNS),
    ("tasks.jsonl", "tasks_jsonl", ""),
    ("rubric_lists/task_a.json", "rubric_list", ""),
    ("paperbench_mini/papers/toy/rubric.json", "paperbench", ""),
]
CONFIG_KEYS = [
    "labels.min_labels",
    "labels.max_labels",
    "labels.min_words",
    "labels.max_words",
    "tag.min_tags",
    "tag.max_tags",
    "merge.min_caps",
    "merge.max_caps",
    "merge.min_share",
    "merge.max_share",
    "cluster.k",
    "discover.batch_size",
    "corpus.limit",
    "corpus.max_chars",
    "corpus.on_empty",
    "embedding.provider",
    "llm.provider",
    "llm.concurrency",
    "cluster.linkage",
    "audit.none_threshold",
]
BAD_VALUES = ["-1", "0", "1e9", '"abc"', "true", '"[red]x[/red]"', "[1, 2]", "-0.5", "2.5", '""', "{}"]


def _mutate_bytes(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    lines = data.split(b"\n")
    op = rng.randrange(14)
    if op == 0:
        return "truncate", data[: rng.randrange(len(data))]
    if op == 1:
        i = rng.randrange(len(data))
        return "flip byte", data[:i] + bytes([rng.randrange(256)]) + data[i + 1 :]
    if op == 2:
        i = rng.randrange(len(data))
        return "latin-1 byte", data[:i] + b"\xe9\xff" + data[i:]
    if op == 3:
        del lines[rng.randrange(len(lines))]
        return "drop line", b"\n".join(lines)
    if op == 4:
        i = rng.randrange(len(lines))
        return "repeat line", b"\n".join(lines[: i + 1] + lines[i:])
    if op == 5:
        numbers = list(re.finditer(rb"-?\d+(\.\d+)?", data))
        if numbers:
            m = rng.choice(numbers)
            bad = rng.choice([b"-1e309", b'"NaN"', b'"abc"', b"null", b"-0", b"1e400"])
            return "bad number", data[: m.start()] + bad + data[m.end() :]
        return "no number", data
    if op == 6:
        quotes = [m.start() for m in re.finditer(rb'"', data)]
        if quotes:
            i = rng.choice(quotes)
            return "drop quote", data[:i] + data[i + 1 :]
        return "no quote", data
    if op == 7:
        return "empty", b""
    if op == 8:
        return "first line only", lines[0] + b"\n"
    if op == 9:
        i = rng.randrange(len(data))
        return "rich markup", data[:i] + b"[bold]x[/bold] [corpus]" + data[i:]
    if op == 10:
        return "trailing garbage", data + b"\n}}garbage{{"
    if op == 11:
        words = list(re.finditer(rb'"[a-z_]+"\s*:', data))
        if words:
            m = rng.choice(words)
            return "renamed key", data[: m.start()] + b'"zz_' + data[m.start() + 1 :]
        return "no key", data
    if op == 12:
        i = rng.randrange(len(data))
        return "nul bytes", data[:i] + b"\x00\x00" + data[i:]
    return "long text", data.replace(b"The ", b"The " + b"very " * 5000, 1)


def _config(tmp: Path, corpus: Path, fmt: str, extra: str, rng: random.Random, mutate: bool) -> tuple[str, Path]:
    keys = f'name = "fz"\n[corpus]\npath = "{corpus}"\nformat = "{fmt}"\n{extra}'
    sections: dict[str, list[str]] = {}
    what = "config ok"
    if mutate:
        op = rng.randrange(6)
        key = rng.choice(CONFIG_KEYS)
        section, name = key.split(".")
        if op <= 2:
            value = rng.choice(BAD_VALUES)
            sections.setdefault(section, []).append(f"{name} = {value}")
            what = f"{key} = {value}"
        elif op == 3:
            pairs = [
                ("labels", "min_words", "max_words"),
                ("tag", "min_tags", "max_tags"),
                ("merge", "min_caps", "max_caps"),
                ("merge", "min_share", "max_share"),
            ]
            section, low, high = rng.choice(pairs)
            sections.setdefault(section, []).extend(
                [
                    f"{low} = 0.9" if "share" in low else f"{low} = 9",
                    f"{high} = 0.1" if "share" in high else f"{high} = 2",
                ]
            )
            what = f"{section}.{low} > {high}"
        elif op == 4:
            name = rng.choice(['"../../x"', '""', '"a/b"', '".."', '"[x]"', '"ok name"'])
            keys = keys.replace('name = "fz"', f"name = {name}")
            what = f"name = {name}"
        else:
            sections.setdefault(rng.choice(["cluster", "tag", "llm", "nonsense"]), []).append("unknown_key = 1")
            what = "unknown key"
    body = keys + "".join(f"[{s}]\n" + "\n".join(v) + "\n" for s, v in sections.items() if s != "corpus")
    if "corpus" in sections:
        body = body.replace(f'format = "{fmt}"\n', f'format = "{fmt}"\n' + "\n".join(sections["corpus"]) + "\n")
    path = tmp / "fz.toml"
    data = (body + f'[output]\ndir = "{tmp / "out"}"\n').encode()
    if mutate and rng.random() < 0.15:
        what, data = "toml " + _mutate_bytes(data, rng)[0], _mutate_bytes(data, rng)[1]
    path.write_bytes(data)
    return what, path


def cases(n: int, seed: int = 7):
    rng = random.Random(seed)
    for i in range(n):
        source, fmt, extra = SOURCES[i % len(SOURCES)]
        mutate_corpus = rng.random() < 0.65
        yield i, source, fmt, extra, mutate_corpus, (not mutate_corpus) or rng.random() < 0.2, rng.random()


def test_two_hundred_malformed_inputs_never_end_in_a_traceback(offline_env, tmp_path):
    runner = CliRunner()
    outcomes = {0: 0, 2: 0}
    tracebacks = []
    n = 0
    for i, source, fmt, extra, mutate_corpus, mutate_config, r in cases(220):
        rng = random.Random(i)
        case = tmp_path / f"c{i}"
        case.mkdir()
        if fmt == "paperbench":
            shutil.copytree(FIX / "paperbench_mini", case / "pb")
            target, corpus = case / "pb" / "papers" / "toy" / "rubric.json", case / "pb"
        else:
            target = corpus = case / Path(source).name
            shutil.copy(FIX / source, target)
        what = "corpus ok"
        if mutate_corpus:
            what, data = _mutate_bytes(target.read_bytes(), rng)
            if r < 0.15 and fmt != "paperbench":  # the same damage inside a gzip file, sometimes cut short
                packed = gzip.compress(data)
                data = packed[: len(packed) // 2] if r < 0.07 else packed
                target.unlink()
                target = corpus = target.with_name(target.name + ".gz")
                what += " (gz)"
            target.write_bytes(data)
        config_what, toml = _config(case, corpus, fmt, extra, rng, mutate_config)
        result = runner.invoke(app, ["discover", str(toml), "--run-dir", str(case / "run"), "-q"])
        n += 1
        label = f"case {i} [{source}: {what}; {config_what}]"
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            tracebacks.append(f"{label}: {type(result.exception).__name__}: {result.exception}"[:300])
            continue
        assert result.exit_code in (0, 2), f"{label}: exit {result.exit_code}: {result.output[-300:]}"
        if result.exit_code == 2:
            errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
            assert len(errors) == 1 and " fix: " in errors[0] or "Usage:" in result.output, (
                f"{label}: {result.output[-400:]}"
            )
        outcomes[result.exit_code] += 1
    print(f"fuzz: {n} cases, {outcomes[0]} ran, {outcomes[2]} refused with one line, {len(tracebacks)} tracebacks")
    assert n >= 200 and not tracebacks, "\n".join(tracebacks[:20])
    assert outcomes[0] > 10 and outcomes[2] > 100  # both paths were exercised


@pytest.mark.parametrize("name", ["criteria.jsonl", "criteria.csv"])
def test_errors_print_their_brackets_literally(offline_env, tmp_path, name):
    corpus = tmp_path / name
    shutil.copy(FIX / name, corpus)
    toml = tmp_path / "p.toml"
    # a column the file lacks (a TOML's columns are otherwise found by name, as a bare file's are)
    toml.write_text(
        f'name = "p"\n[corpus]\npath = "{corpus}"\n[corpus.columns]\ntext = "body"\n[output]\ndir = "{tmp_path}"\n'
    )
    result = CliRunner().invoke(app, ["discover", str(toml), "-q"])
    assert result.exit_code == 2 and 'set [corpus.columns] text = "<your column>"' in result.output
