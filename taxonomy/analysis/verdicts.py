"""Verifier verdicts: one frame [criterion_id, verifier, system, verdict] from any source.

`verdict` is True when the criterion was judged met. `system` names the agent rollout
that was judged, so a verifier's verdict is only ever compared with the reference verdict
on the same criterion *and* the same rollout.

Every problem is one line, `<file>: row <n>: <problem>; fix: <fix>`, raised as
`VerdictError`. Rows count from 1 in file order without the header, with the file line in a
CSV, TSV or JSONL file (`row 2 (line 3)`), as the corpus loaders name them (for JSON sources,
in the order the requirements or rubric leaves appear); a problem of the whole file or folder
names no row.
"""

from __future__ import annotations

import io
import json
import logging
import re
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any, Iterator

import polars as pl

from taxonomy.corpus import read_json as _read_json
from taxonomy.corpus.config import data_row
from taxonomy.corpus.jsonio import decode
from taxonomy.corpus.tablefile import csv_problem, record_lines, sniff_separator

log = logging.getLogger("taxonomy.analysis")
SCHEMA = {"criterion_id": pl.String, "verifier": pl.String, "system": pl.String, "verdict": pl.Boolean}
COLUMNS = tuple(SCHEMA)

DEVAI_VERIFIERS = {  # folder under judgment/<system>/ -> verifier name
    "human_as_a_judge": "human",
    "agent_as_a_judge/gray_box": "agent_as_a_judge",
}

_TRUE = {"true", "1", "1.0", "met", "pass", "passed", "yes", "y", "satisfied"}
_FALSE = {"false", "0", "0.0", "unmet", "not met", "fail", "failed", "no", "n", "unsatisfied"}
_KNOWN = "true/false, 1/0, met/unmet, pass/fail, yes/no"


class VerdictError(ValueError):
    """A verdict source that cannot be read, reported on one line ending in `fix: ...`."""


def _err(where: Path | str, row: int | str | None, problem: str, fix: str) -> VerdictError:
    place = data_row(row) if isinstance(row, int) else row
    return VerdictError(f"{where}: {'' if place is None else f'{place}: '}{problem}; fix: {fix}")


def read_json(path: Path) -> Any:
    """Read `path`, or `path.gz` when only the compressed copy exists."""
    return _read_json(Path(path))


def _load_json(path: Path) -> Any:
    try:
        return read_json(path)
    except (OSError, ValueError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise _err(path, None, f"unreadable JSON ({msg})", "restore the file from the upstream benchmark") from None


def _json_files(folder: Path) -> list[Path]:
    return sorted([*folder.glob("*.json"), *folder.glob("*.json.gz")])


def _stem(path: Path) -> str:
    name = path.name
    return name[: -len(".json.gz")] if name.endswith(".json.gz") else path.stem


def parse_verdict(value: Any, where: Path | str, row: int | str) -> bool:
    """Map the usual spellings of met/unmet to a bool; anything else names its row."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        key = value.strip().lower()
        if key in _TRUE:
            return True
        if key in _FALSE:
            return False
    raise _err(where, row, f"verdict {value!r} is not a known value", f"use one of {_KNOWN}")


def _frame(rows: list[tuple[str, str, str, bool]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=SCHEMA, orient="row")


# ---- DevAI -------------------------------------------------------------------------
def load_devai_judgments(root: Path) -> pl.DataFrame:
    """Human and Agent-as-a-Judge (gray box) verdicts of the DevAI benchmark.

    `root` is the DevAI data folder holding `judgment/<system>/...`. The criterion id is
    `<task file stem>/<requirement_id>`, as in the DevAI corpus loader.
    """
    root = Path(root)
    systems = _subfolders(root, "judgment", "devai", "per judged agent", "OpenHands")
    rows: list[tuple[str, str, str, bool]] = []
    for system in systems:
        for sub, verifier in DEVAI_VERIFIERS.items():
            for path in _json_files(system / sub):
                rows.extend(_devai_file(path, verifier, system.name))
    if not rows:
        raise _err(
            root / "judgment",
            None,
            "no judgment files under human_as_a_judge/ or agent_as_a_judge/gray_box/",
            "pass the DevAI data folder with its judgment/ tree intact",
        )
    _warn_devai_drift(root)
    return _frame(rows)


def _devai_file(path: Path, verifier: str, system: str) -> Iterator[tuple[str, str, str, bool]]:
    doc = _load_json(path)
    reqs = doc.get("requirements") if isinstance(doc, dict) else None
    if not isinstance(reqs, list):
        raise _err(
            path,
            None,
            "no `requirements` list",
            "use a DevAI judgment file (an instance with `satisfied` per requirement)",
        )
    for i, req in enumerate(reqs, start=1):
        if not isinstance(req, dict) or "requirement_id" not in req:
            raise _err(path, i, "requirement has no `requirement_id`", "restore the file from the upstream benchmark")
        if req.get("satisfied") is None:
            raise _err(path, i, "`satisfied` is missing or null", "set `satisfied` to true or false")
        yield f"{_stem(path)}/{req['requirement_id']}", verifier, system, parse_verdict(req["satisfied"], path, i)


def devai_drift(root: Path, min_similarity: float = 0.75) -> list[str]:
    """Judged criterion ids whose text is not (a light edit of) the task instance's text.

    Upstream, task 52 was judged on a 5-requirement draft while its instance file has 4,
    so its requirement ids point at different text: a join on ids alone would give those
    verdicts the wrong criterion and the wrong capability. About 20 other judged texts
    differ only by quotes, backticks or a word, which the similarity floor lets through.
    """
    root = Path(root)
    instances = root / "devai" / "instances"
    if not instances.is_dir():
        return []
    texts = {}
    for path in _json_files(instances):
        for req in _load_json(path).get("requirements", []):
            texts[f"{_stem(path)}/{req['requirement_id']}"] = _norm(req.get("criteria"))
    drift = set()
    for path in sorted((root / "judgment").glob("*/human_as_a_judge/*.json*")):
        for req in _load_json(path).get("requirements", []):
            cid = f"{_stem(path)}/{req.get('requirement_id')}"
            judged = _norm(req.get("criteria"))
            if texts.get(cid) != judged and SequenceMatcher(None, texts.get(cid, ""), judged).ratio() < min_similarity:
                drift.add(cid)
    return sorted(drift)


def _norm(text: str | None) -> str:
    return " ".join(re.sub(r"[\"'`]", "", text or "").lower().split())


def _warn_devai_drift(root: Path) -> None:
    """A fact of the data, said as the corpus loader says its own (a log line), not as a Python warning that
    prints source code to a command-line user."""
    drift = devai_drift(root)
    if drift:
        log.warning(
            f"{root}: {len(drift)} judged requirement(s) have other text than devai/instances "
            f"({', '.join(drift)}); their capability tags describe a different criterion"
        )


def _subfolders(root: Path, folder: str, kind: str, per: str, example: str) -> list[Path]:
    """The sub-folders of a benchmark's root/folder (one `per` judged agent or paper), sorted; a missing root or
    an empty folder is an error that says where the bundled data is."""
    fix = _data_fix(kind, root, f"{folder}/ (one folder {per})")
    if not root.is_dir():
        raise _err(root, None, "no such folder", fix)
    parent = root / folder
    found = sorted(p for p in parent.iterdir() if p.is_dir()) if parent.is_dir() else []
    if not found:
        raise _err(root, None, f"no {folder} folder with one subfolder {per} (e.g. {folder}/{example}/)", fix)
    return found


def _data_fix(kind: str, given: Path, holds: str) -> str:
    """Where the benchmark's data is, said so that it works from any folder: the bundled copy's absolute path
    when this package sits in a clone that has it (a relative path fails outside the clone)."""
    bundled = Path(__file__).resolve().parents[2] / "data" / kind
    what = f"pass the {'DevAI' if kind == 'devai' else 'PaperBench'} data folder, the one that holds {holds}"
    if bundled.is_dir() and bundled.resolve() != given.resolve():
        return f"{what}: the bundled copy is --verdicts {kind}:{bundled}"
    return f"{what}, by its absolute path from any folder"


# ---- PaperBench --------------------------------------------------------------------
def load_paperbench_grades(root: Path) -> pl.DataFrame:
    """Human grades of one submission per paper (`judge_eval/<paper>/expected_result.json`).

    Each rubric leaf carries a binary `score`; the submission is the system, named after
    its paper, and the criterion id is `<paper>/<leaf id>`.
    """
    root = Path(root)
    papers = _subfolders(root, "judge_eval", "paperbench", "per paper", "rice")
    rows: list[tuple[str, str, str, bool]] = []
    for paper in papers:
        path = paper / "expected_result.json"
        if not path.exists() and not path.with_name(path.name + ".gz").exists():
            raise _err(paper, None, "no expected_result.json", "restore the file or remove the folder")
        if not path.exists():
            path = path.with_name(path.name + ".gz")
        seen: set[str] = set()
        for i, leaf in enumerate(_leaves(_load_json(path)), start=1):
            if "id" not in leaf:
                raise _err(path, i, "rubric leaf has no `id`", "restore the file from the upstream benchmark")
            if leaf["id"] in seen:
                raise _err(path, i, f"leaf id {leaf['id']} appears twice", "give every leaf a unique id")
            seen.add(leaf["id"])
            score = leaf.get("score")
            if isinstance(score, bool) or score not in (0, 1):
                raise _err(
                    path,
                    i,
                    f"score {score!r} of leaf {leaf['id']} is not 0 or 1",
                    "grade every leaf 0 (fail) or 1 (pass)",
                )
            rows.append((f"{paper.name}/{leaf['id']}", "human", paper.name, bool(score)))
    return _frame(rows)


def _leaves(node: dict) -> Iterator[dict]:
    kids = node.get("sub_tasks") or []
    if not kids:
        yield node
    for kid in kids:
        yield from _leaves(kid)


# ---- Generic tables ------------------------------------------------------------------
def load_verdict_table(
    path: Path, columns: dict[str, str] | None = None, defaults: dict[str, str] | None = None
) -> pl.DataFrame:
    """A CSV / TSV / JSONL / JSON / parquet file of verdicts.

    `columns` maps our names (criterion_id, verdict, verifier, system) to the file's;
    unmapped names are looked up as themselves. `defaults` gives a constant for a column
    the file lacks (a file of one verifier on one rollout, say).
    """
    path = Path(path)
    columns, defaults = dict(columns or {}), dict(defaults or {})
    unknown = set(columns) - set(COLUMNS)
    if unknown:
        raise _err(path, None, f"unknown column mapping key(s) {sorted(unknown)}", f"map only {', '.join(COLUMNS)}")
    raw, lines = _read_table(path)

    def row(i: int) -> str:
        return data_row(i + 1, lines[i] if lines else None)

    out = {}
    for name in COLUMNS:
        src = columns.get(name, name)
        if src in raw.columns:
            out[name] = raw[src].to_list()
        elif name in defaults:
            out[name] = [defaults[name]] * raw.height
        else:
            raise _err(
                path,
                None,
                f"no column `{src}` for {name} (columns: {', '.join(raw.columns)})",
                _missing_fix(name, path),
            )
    rows = []
    for i in range(raw.height):
        cid, verifier, system = (out[k][i] for k in ("criterion_id", "verifier", "system"))
        for key, val in (("criterion_id", cid), ("verifier", verifier), ("system", system)):
            if val is None or str(val).strip() == "":
                raise _err(path, row(i), f"{key} is empty", f"fill in {key} or drop the row")
        rows.append((str(cid), str(verifier), str(system), parse_verdict(out["verdict"][i], path, row(i))))
    frame = _frame(rows)
    dup = ~frame.select(pl.struct("criterion_id", "verifier", "system").is_first_distinct()).to_series()
    if dup.any():
        i = int(dup.arg_max())
        raise _err(
            path,
            row(i),
            f"second verdict for {rows[i][0]} by {rows[i][1]} on {rows[i][2]}",
            "keep one verdict per criterion, verifier and system",
        )
    return frame


def _read_table(path: Path) -> tuple[pl.DataFrame, list[int] | None]:
    """The table and the file line of each row (None where the file has no lines: Parquet, a JSON list)."""
    if not path.is_file():
        raise _err(path, None, "no such file", "pass an existing .csv, .tsv, .jsonl, .json or .parquet file")
    name = path.name.lower()
    if not name.endswith((".csv", ".tsv", ".jsonl", ".ndjson", ".json", ".parquet")):
        raise _err(path, None, "unknown file type", "use .csv, .tsv, .jsonl, .json or .parquet")
    try:
        if name.endswith(".parquet"):
            return pl.read_parquet(path), None
        text = decode(path.read_bytes())  # UTF-8, or UTF-16/32 with a byte-order mark
        if name.endswith((".jsonl", ".ndjson")):
            numbered = _json_lines(path, text)
            return pl.DataFrame([r for _, r in numbered], infer_schema_length=None), [n for n, _ in numbered]
        if name.endswith(".json"):
            return pl.DataFrame(json.loads(text)), None
        separator = sniff_separator(text, "\t" if name.endswith(".tsv") else ",")
        try:  # strings throughout, so every verdict spelling is parsed alike
            frame = pl.read_csv(io.BytesIO(text.encode()), separator=separator, infer_schema=False)
            lines = record_lines(text, separator)
            return frame, lines if len(lines) == frame.height else None
        except Exception:  # noqa: BLE001 - polars names no line: the csv module finds it
            problem = csv_problem(text, separator)
            if problem is None:
                raise
            raise _err(
                path,
                None,
                f"line {problem[0]}: {problem[1]}",
                "make every row have as many fields as the header (quote a field that holds the separator)",
            ) from None
    except VerdictError:
        raise
    except Exception as exc:  # noqa: BLE001 - any reader failure becomes one line
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise _err(path, None, f"unreadable table ({msg})", "check the file's format matches its extension") from None


def _json_lines(path: Path, text: str) -> list[tuple[int, dict]]:
    rows = []
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            try:
                rows.append((number, json.loads(line)))
            except ValueError as exc:
                raise _err(
                    path, None, f"line {number}: invalid JSON ({exc})", "make each line one complete JSON object"
                ) from None
    return rows


def _missing_fix(name: str, path: Path) -> str:
    """The fix of a missing column, as a command-line user gives it."""
    if name == "verifier":
        return (
            f"add a `verifier` column naming who judged each row, or name the one verifier of the whole file "
            f"on the command line: --verdicts VERIFIER={path} (e.g. human={path})"
        )
    return f"rename the file's column that holds the {name} to `{name}`"


# ---- CLI spec ------------------------------------------------------------------------
VERIFIER_SPEC = re.compile(r"^([A-Za-z0-9_.-]+)=(.+)$")


def load_verdicts(spec: str) -> pl.DataFrame:
    """Parse a `--verdicts` value: `devai:PATH`, `paperbench:PATH`, a table file path, or `VERIFIER=PATH`
    for a table of one verifier's verdicts without a `verifier` column."""
    named = VERIFIER_SPEC.match(spec)
    if named and not Path(spec).exists():
        # Files of one verifier each judge the same rollout unless a `system` column says otherwise.
        return load_verdict_table(Path(named[2]), {}, defaults={"system": "rollout", "verifier": named[1]})
    kind, sep, rest = spec.partition(":")
    if sep and kind in ("devai", "paperbench"):
        if not rest:
            raise _err(spec, None, "no path after the colon", f"write {kind}:PATH, e.g. {kind}:data/{kind}")
        return load_devai_judgments(Path(rest)) if kind == "devai" else load_paperbench_grades(Path(rest))
    path = Path(spec)
    if not path.exists() and sep and "/" not in kind and len(kind) > 1:
        raise _err(
            spec,
            None,
            f"unknown verdict source `{kind}`",
            "use devai:PATH, paperbench:PATH or a .csv/.jsonl/.parquet file",
        )
    # One table is usually one rollout; without a `system` column the file name stands for it.
    system = path.name.split(".")[0]
    return load_verdict_table(path, {}, defaults={"system": system})
