"""Content-addressed SQLite cache of LLM answers and embeddings.

The key is a hash of the exact request (provider identity, model, turns, system, schema,
generation settings), so a re-run of a finished run sends nothing, and a crash loses at
most the calls in flight. Identities never hold secrets, so neither does the cache.
"""

from __future__ import annotations

import errno
import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any


def request_key(request: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(request, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class Cache:
    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            # Survives a crash or Ctrl-C of this process; only an OS crash could lose the last answers.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, "
                "kind TEXT, value TEXT, prompt_tokens INT, output_tokens INT)"
            )
        except sqlite3.OperationalError as exc:
            # sqlite says "unable to open database file" or "readonly database"; the folder's own check says why.
            if "readonly" in str(exc) or "unable to open" in str(exc):
                raise PermissionError(errno.EACCES, f"cannot open the answer cache ({exc})", str(self.path)) from None
            raise

    def get(self, key: str) -> tuple[str, int, int] | None:
        with self._lock:
            row = self._db.execute(
                "SELECT value, prompt_tokens, output_tokens FROM answers WHERE key=?", (key,)
            ).fetchone()
        return None if row is None else (row[0], row[1], row[2])

    def put(self, key: str, kind: str, value: str, prompt_tokens: int = 0, output_tokens: int = 0) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?)",
                (key, kind, value, prompt_tokens, output_tokens),
            )

    def close(self) -> None:
        with self._lock:
            self._db.close()
