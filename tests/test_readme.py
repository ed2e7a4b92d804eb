"""Every output the README quotes comes from a run this test repeats.

A ```console block starts with `$ taxonomy ...`; the lines after it are what the command prints, where a
line `…` stands for lines left out. A ```markdown block whose info string names a file (```markdown
outputs/x/taxonomy.md) quotes that file as the commands before it wrote it. The blocks run in order in
one empty folder holding copies of the repository files they name, with no key set (the offline backend).
Times, memory and the folder's own path are the only parts allowed to differ.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```", re.S | re.M)
VARIABLE = [
    (re.compile(r"seconds=[\d.]+"), "seconds=…"),
    (re.compile(r"Done in [\d.]+ s \(peak memory \d+ MB\)"), "Done in … s (peak memory … MB)"),
]


def _blocks() -> list[tuple[str, str, str]]:
    return [
        (kind, info.strip(), body)
        for kind, info, body in FENCE.findall((ROOT / "README.md").read_text())
        if kind == "console" or (kind == "markdown" and info.strip())
    ]


def _normal(text: str, folder: Path | None = None) -> str:
    text = text.replace(str(folder), "~") if folder else text
    for pattern, fixed in VARIABLE:
        text = pattern.sub(fixed, text)
    return text


def _contains_in_order(actual: str, quoted: str, where: str) -> None:
    chunks, chunk = [], []
    for line in _normal(quoted).rstrip("\n").splitlines():
        if line.strip() == "…":
            chunks.append(chunk)
            chunk = []
        else:
            chunk.append(line)
    chunks.append(chunk)
    pos = 0
    for part in filter(None, chunks):
        text = "\n".join(part)
        found = actual.find(text, pos)
        assert found >= 0, f"{where}: the README quotes\n{text}\nbut the run gave\n{actual[pos : pos + 3000]}"
        pos = found + len(text)


def _run(command: str, folder: Path) -> str:
    args = shlex.split(command)
    assert args[0] == "taxonomy", command
    for arg in args[1:]:  # repository files the command names are copied in, so it runs as a user's would
        source = ROOT / arg
        if not arg.startswith("-") and source.is_file() and not (folder / arg).exists():
            (folder / arg).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, folder / arg)
    env = {k: v for k, v in os.environ.items() if k not in ("GEMINI_API_KEY", "GOOGLE_API_KEY")}
    env["COLUMNS"] = "200"
    done = subprocess.run(
        [sys.executable, "-m", "taxonomy", *args[1:]],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    return _normal(done.stdout, folder)


def test_the_readme_quotes_what_the_commands_print(tmp_path):
    blocks = _blocks()
    assert any(kind == "console" for kind, _, _ in blocks), "the README quotes no command output"
    for kind, info, body in blocks:
        if kind == "console":
            command, _, quoted = body.partition("\n")
            assert command.startswith("$ "), command
            _contains_in_order(_run(command[2:], tmp_path), quoted, command)
        else:
            _contains_in_order(_normal((tmp_path / info).read_text(), tmp_path), body, info)
