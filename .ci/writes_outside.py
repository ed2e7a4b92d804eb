"""Paths a traced command wrote outside its folder, from an `strace -f -y` log: opened for writing,
created, renamed, linked or removed. Exit 1 and list them when there is any; nothing is read from
the environment, so the check is the same on every machine.

usage: python3 writes_outside.py STRACE_LOG FOLDER"""

from __future__ import annotations

import os
import re
import sys

WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND")
# Device files any process touches; never a file on disk.
HARMLESS = ("/dev/null", "/dev/tty", "/dev/pts/", "/dev/shm/", "/proc/self/", "/proc/thread-self/")
CALL = re.compile(r"^(?:\d+\s+)?(?P<name>\w+)\((?P<args>.*?)(?:\) += (?P<ret>-?\d+|\?)| <unfinished \.\.\.>)")
STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
DIRFD = re.compile(r"^(?:AT_FDCWD|\d+)(?:<(?P<dir>[^>]*)>)?")


def _paths(name: str, args: str, cwd: str) -> list[str]:
    parts = [a.strip() for a in re.split(r',\s*(?=(?:[^"]*"[^"]*")*[^"]*$)', args)]
    strings = STRING.findall(args)
    if not strings:
        return []
    if name in ("open", "creat", "mkdir", "unlink", "rmdir", "truncate"):
        if name == "open" and not any(f in args for f in WRITE_FLAGS):
            return []
        return [_abs(cwd, None, strings[0])]
    if name in ("openat", "mkdirat", "unlinkat"):
        if name == "openat" and not any(f in args for f in WRITE_FLAGS):
            return []
        return [_abs(cwd, DIRFD.match(parts[0]), strings[0])]
    if name in ("rename", "link", "symlink"):
        return [_abs(cwd, None, strings[-1])] + ([_abs(cwd, None, strings[0])] if name == "rename" else [])
    if name in ("renameat", "renameat2", "linkat"):
        return [_abs(cwd, DIRFD.match(parts[0]), strings[0]), _abs(cwd, DIRFD.match(parts[2]), strings[1])]
    if name == "symlinkat":
        return [_abs(cwd, DIRFD.match(parts[1]), strings[1])]
    return []


def _abs(cwd: str, dirfd: re.Match | None, path: str) -> str:
    path = path.encode().decode("unicode_escape")
    if os.path.isabs(path):
        return os.path.normpath(path)
    base = dirfd.group("dir") if dirfd is not None and dirfd.group("dir") else cwd
    return os.path.normpath(os.path.join(base, path))


def main(log: str, folder: str) -> int:
    folder = os.path.realpath(folder)
    outside = set()
    with open(log, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            m = CALL.match(line.strip())
            if m is None or (m.group("ret") or "").startswith("-"):
                continue  # a call that failed wrote nothing
            for path in _paths(m.group("name"), m.group("args"), folder):
                real = os.path.realpath(path)
                if not (real == folder or real.startswith(folder + os.sep) or real.startswith(HARMLESS)):
                    outside.add(real)
    for path in sorted(outside):
        print(f"written outside {folder}: {path}")
    return 1 if outside else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
