"""Generated rubrics through the CLI (`taxonomy run FILE`, `taxonomy lint FILE`), key-less: well-formed ones in any
script, format, encoding and size get a taxonomy their distinct criteria allow; a bad row or a bad file ends in one
`error:` line that names the file, the row and a fix, exit 2; nothing ever ends in a traceback.

The examples are drawn from tests/rubrics.py with a fixed seed (derandomize), so CI sees the same rubrics on every
run; a failure prints the smallest rubric Hypothesis shrank it to. `-m slow` draws many more."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from taxonomy.cli import app
from tests.rubrics import file_faults, folded, row_faults, row_places, rubrics, write

# database=None: no .hypothesis/ folder is left in the checkout (CI checks it is left as found); the examples
# are the same on every run anyway (derandomize).
FAST = settings(
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=False,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
PAPER_BOUNDS = (8, 10, 0.02, 0.40)  # the merge's default capability count and share bounds


def _invoke(*args) -> tuple[int, str]:
    """Exit code and everything printed; a Python exception escaping the command fails the property at once."""
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output, result.output[-2000:]
    return result.exit_code, result.output


def _one_error_line(output: str, path: Path) -> str:
    errors = [line for line in output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, output[-2000:]
    assert path.name in errors[0] and "; fix: " in errors[0], errors[0]
    return errors[0]


def _names_row(line: str, path: Path, rubric, row: int) -> None:
    """The error line's place (`error: FILE: PLACE: ...`) is this data row, by its row, line or JSON pointer."""
    where = line.removeprefix(f"error: {path}: ").split(":", 1)[0]
    assert any(place in where.split(" (") or f"({place})" in where for place in row_places(rubric, row)), (row, line)


def _run(path: Path, folder: Path, *extra: str) -> tuple[int, str]:
    return _invoke("run", path, "--provider", "offline", "--no-report", "-q", "--run-dir", folder / "run", *extra)


def _fits(sizes: list[int], k: int, low: float, high: float) -> bool:
    """Whether largest-first packing of these groups into k capabilities keeps every share within [low, high]."""
    if len(sizes) < k:
        return False
    bins = [0] * k
    for size in sorted(sizes, reverse=True):
        bins[bins.index(min(bins))] += size
    n = sum(sizes)
    return all(low * n - 1e-9 <= b <= high * n + 1e-9 for b in bins)


def bounds_allowed(rubric) -> bool:
    """Whether the rubric's distinct criteria can make 8-10 capabilities of 2-40%: a packing of its groups of
    criteria that read alike (case, spaces, punctuation ignored) meets them. A packing found proves the bounds can
    be met; a rubric for which largest-first finds none is not held to them (it may still meet them)."""
    groups: dict[str, int] = {}
    for _, text, _ in rubric.kept_rows():
        groups[folded(text)] = groups.get(folded(text), 0) + 1
    low_k, high_k, low, high = PAPER_BOUNDS
    return any(_fits(list(groups.values()), k, low, high) for k in range(low_k, high_k + 1))


def _check_taxonomy(rubric, run_dir: Path, output: str) -> None:
    caps = json.loads((run_dir / "taxonomy.json").read_text())["capabilities"]
    tags = pl.read_parquet(run_dir / "stage3_tags.parquet")
    shares = tags["primary"].value_counts(normalize=True)
    held = dict(zip(shares["primary"].to_list(), shares["proportion"].to_list()))
    names = [c["name"] for c in caps]
    assert names and all(held.get(name, 0) > 0 for name in names), f"an empty capability: {names} vs {held}"
    assert len(names) <= len({text for _, text, _ in rubric.kept_rows()}), names
    low_k, high_k, low, high = PAPER_BOUNDS
    within = low_k <= len(names) <= high_k and all(low - 1e-9 <= s <= high + 1e-9 for s in held.values())
    if bounds_allowed(rubric):
        assert within, f"{len(names)} capabilities, shares {sorted(held.values())}: the criteria allow 8-10 of 2-40%"
    if not within:
        said = [line for line in output.splitlines() if line.lstrip().startswith("note:") and "8-10 capabilit" in line]
        assert len(said) == 1, f"bounds not met and not said in one line: {output[-1500:]}"


@settings(FAST, max_examples=12)
@given(rubric=rubrics(max_rows=200))
def test_a_valid_rubric_runs_without_a_traceback(offline_env, rubric):
    """Whatever the merge bounds make of it, every stage reads a valid rubric: exit 0 and a taxonomy."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        code, output = _run(write(rubric, folder), folder, "--accept-violations")
        assert code == 0 and (folder / "run" / "taxonomy.json").is_file(), output[-2000:]


@settings(FAST, max_examples=20)
@given(rubric=rubrics(max_rows=200))
def test_a_valid_rubric_gets_a_taxonomy_its_distinct_criteria_allow(offline_env, rubric):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        code, output = _run(write(rubric, folder), folder)
        assert code == 0, output[-2000:]
        _check_taxonomy(rubric, folder / "run", output)


@settings(FAST, max_examples=25)
@given(case=row_faults(max_rows=60))
def test_a_bad_row_is_refused_in_one_line_naming_the_file_the_row_and_the_fix(offline_env, case):
    rubric, fault = case
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = write(rubric, folder)
        code, output = _run(path, folder)
        assert code == 2, output[-2000:]
        _names_row(_one_error_line(output, path), path, rubric, fault.row)
        assert not (folder / "run" / "taxonomy.json").exists()


# Faults no reading can get past: each is refused as a whole file, in one line.
REFUSED = {"no criterion column", "binary", "empty file", "latin-1 bytes", "utf-16 without bom", "header only"}


@settings(FAST, max_examples=30)
@given(case=file_faults(max_rows=40))
def test_a_damaged_file_is_read_or_refused_in_one_line(offline_env, case):
    rubric, fault, data = case
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = write(rubric, folder, data)
        code, output = _run(path, folder, "--accept-violations")
        assert code in (0, 2), output[-2000:]
        if fault.kind in ("list in a field", "object in a field") and fault.detail["column"] == rubric.text_column:
            assert code == 2, f"a criterion that is a JSON {fault.kind.split()[0]} was read: {output[-1500:]}"
            _names_row(_one_error_line(output, path), path, rubric, fault.detail["rows"][0])
        if code == 2:
            _one_error_line(output, path)
        else:
            assert fault.kind not in REFUSED, output[-2000:]
            assert (folder / "run" / "taxonomy.json").is_file()


@settings(FAST, max_examples=60)
@given(
    case=st.one_of(
        rubrics(max_rows=120).map(lambda r: (r, None)),
        row_faults(max_rows=60).map(lambda c: (c[0], None)),
        file_faults(max_rows=60).map(lambda c: (c[0], c[2])),
    ),
    fmt=st.sampled_from(["text", "json", "sarif", "github"]),
)
def test_lint_never_crashes(offline_env, case, fmt):
    rubric, data = case
    with tempfile.TemporaryDirectory() as tmp:
        path = write(rubric, Path(tmp), data)
        code, output = _invoke("lint", path, "--format", fmt)
        assert code in (0, 1, 2), output[-2000:]
        if code == 2:
            _one_error_line(output, path)


@pytest.mark.slow
@settings(FAST, max_examples=150)  # benchmarks/fuzz.py runs more of the same generators
@given(case=st.one_of(rubrics().map(lambda r: (r, None)), file_faults().map(lambda c: (c[0], c[2]))))
def test_many_generated_files_run_or_are_refused_in_one_line(offline_env, case):
    rubric, data = case
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = write(rubric, folder, data)
        code, output = _run(path, folder, "--accept-violations")
        assert code in (0, 2), output[-2000:]
        if code == 2:
            _one_error_line(output, path)
