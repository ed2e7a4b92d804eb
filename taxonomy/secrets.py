"""Keys never reach logs, caches, reports or outputs: anything we print or store passes through redact()."""

from __future__ import annotations

import os

SECRET_ENVS = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_API_KEY", "GOOGLE_VERTEX_ACCESS_TOKEN")


def secret_values() -> list[str]:
    names = set(SECRET_ENVS) | {k for k in os.environ if k.endswith(("_API_KEY", "_TOKEN", "_SECRET"))}
    # Short values would redact ordinary words; real keys are long.
    return sorted({os.environ[k] for k in names if len(os.environ.get(k, "")) >= 8}, key=len, reverse=True)


def redact(text: str) -> str:
    for value in secret_values():
        text = text.replace(value, "***")
    return text
