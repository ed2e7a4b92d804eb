"""Reading JSON and JSONL corpus files, plain or gzipped."""

from __future__ import annotations

import codecs
import gzip
import json
import zlib
from pathlib import Path
from typing import Any

from taxonomy.corpus.config import CorpusError, show_path


def existing_file(path: Path) -> Path | None:
    """`path` itself, or its gzipped twin: X.json <-> X.json.gz."""
    if path.is_file():
        return path
    twin = path.with_name(path.name[:-3]) if path.name.endswith(".gz") else path.with_name(path.name + ".gz")
    return twin if twin.is_file() else None


GZIP_MAGIC = b"\x1f\x8b"
# What a binary file usually is, by its first bytes, and the way to a text file from it.
BINARY_KINDS = (
    (b"PK\x03\x04", "a ZIP archive (an .xlsx workbook is one)", "save the sheet as CSV (UTF-8), or unzip the archive"),
    (b"PAR1", "a Parquet file", "name it .parquet"),
    (b"%PDF", "a PDF document", "export its rubric as CSV or JSON lines"),
    (b"\xd0\xcf\x11\xe0", "an old Office document (.xls)", "save the sheet as CSV (UTF-8)"),
)


def read_text_file(path: Path) -> str:
    """The text of a corpus file: gzip recognised by its first bytes whatever the name, a binary file said to be
    binary (no encoding makes it text), UTF-8 or UTF-16/32 with a byte-order mark."""
    data = path.read_bytes()
    if data.startswith(GZIP_MAGIC) or path.name.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise CorpusError(
                show_path(path),
                "-",
                f"not a readable gzip file ({exc})",
                "re-compress it with gzip, or give the uncompressed file",
            ) from None
    _refuse_binary(path, data)
    try:
        text = decode(data)
    except UnicodeDecodeError as exc:
        if exc.encoding != "utf-8":
            raise CorpusError(
                show_path(path),
                "-",
                f"not valid {exc.encoding.upper()} although it starts with that byte-order mark ({exc.reason})",
                "save the file again as UTF-8",
            ) from None
        line = data[: exc.start].count(b"\n") + 1
        column = exc.start - data.rfind(b"\n", 0, exc.start)
        raise CorpusError(
            show_path(path),
            line,
            f"not UTF-8 (byte 0x{data[exc.start]:02x} at column {column})",
            "save the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)",
        ) from None
    if "\x00" in text[:4096]:
        # ASCII written as UTF-16 or UTF-32 without a byte-order mark is valid UTF-8 with a NUL after every letter.
        raise CorpusError(
            show_path(path),
            text.count("\n", 0, text.index("\x00")) + 1,
            "holds NUL bytes: UTF-16 or UTF-32 written without a byte-order mark",
            "save it as UTF-8, or as UTF-16 with a byte-order mark (e.g. `iconv -f utf-16le -t utf-8`)",
        )
    return text


def _refuse_binary(path: Path, data: bytes) -> None:
    """CorpusError for a file that is no text in any encoding: a known binary format by its first bytes, or
    control bytes that no text holds. UTF-16/32 text (with or without a byte-order mark) is left to decode."""
    kind = next(((what, fix) for magic, what, fix in BINARY_KINDS if data.startswith(magic)), None)
    head = data[:4096]
    if kind is None and not any(data.startswith(bom) for bom, _ in _BOMS):
        # ASCII as UTF-16/32 without a mark has a NUL in every second byte, which decode reports; binary anywhere.
        utf16_ascii = not head[1::2].strip(b"\x00") or not head[0::2].strip(b"\x00")
        controls = sum(b < 9 or 13 < b < 32 for b in head)
        if controls > len(head) // 100 + 1 and not utf16_ascii:
            kind = ("a binary file", "give a text file (CSV, TSV or JSON lines, UTF-8) or a .parquet file")
    if kind is not None:
        raise CorpusError(show_path(path), "-", f"{kind[0]}, not a text table", kind[1])


# UTF-32's marks first: UTF-32-LE's begins with UTF-16-LE's.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
    (codecs.BOM_UTF8, "utf-8-sig"),
)


def decode(data: bytes) -> str:
    """Text of a file: UTF-8, or UTF-8/16/32 when it starts with that byte-order mark (spreadsheet exports
    write UTF-16). Raises UnicodeDecodeError naming the encoding tried."""
    encoding = next((name for bom, name in _BOMS if data.startswith(bom)), "utf-8")
    return data.decode(encoding)


def read_json(path: str | Path) -> Any:
    """Parse X.json, or X.json.gz when only that exists (either name may be passed)."""
    path = Path(path)
    found = existing_file(path)
    if found is None:
        raise CorpusError(
            show_path(path),
            "-",
            "file not found (nor its .gz twin)",
            "check the path; it resolves to " + str(path.resolve()),
        )
    try:
        return json.loads(read_text_file(found))
    except json.JSONDecodeError as exc:
        raise CorpusError(
            show_path(found),
            exc.lineno,
            f"invalid JSON at column {exc.colno}: {exc.msg}",
            "correct the JSON syntax on that line",
        ) from None
    except (UnicodeDecodeError, OSError, EOFError) as exc:
        raise CorpusError(
            show_path(found),
            "-",
            f"cannot read the file ({exc})",
            "save it as UTF-8 JSON (optionally gzipped as .json.gz)",
        ) from None


def read_jsonl(path: Path) -> list[tuple[int, dict]]:
    """(line number, object) for every non-blank line."""
    out = []
    # Split on "\n" only: str.splitlines also breaks at U+2028 and other separators that JSON
    # allows unescaped inside strings (HealthBench has some).
    for lineno, line in enumerate(read_text_file(path).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusError(
                show_path(path),
                lineno,
                f"invalid JSON at column {exc.colno}: {exc.msg}",
                "make each line one complete JSON object",
            ) from None
        if not isinstance(obj, dict):
            raise CorpusError(
                show_path(path),
                lineno,
                f"expected a JSON object, got {type(obj).__name__}",
                'make each line one JSON object such as {"text": "..."}',
            )
        out.append((lineno, obj))
    return out


def json_files(folder: Path) -> list[tuple[str, Path]]:
    """(name without .gz, path) of the *.json / *.json.gz files in a folder, sorted."""
    files = {f.name.removesuffix(".gz"): f for f in folder.iterdir() if f.name.endswith((".json", ".json.gz"))}
    return sorted(files.items())
