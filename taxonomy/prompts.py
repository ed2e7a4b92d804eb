"""Jinja2 environment over prompts/. StrictUndefined: a missing variable is a bug, not an empty string.

The repository's prompts/ folder is installed as the package `taxonomy_prompts` (pyproject.toml), so a
wheel, `pip install .` and an editable install all find the templates by that one name."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

import jinja2
import taxonomy_prompts

PROMPTS_DIR = Path(taxonomy_prompts.__file__).resolve().parent


def fence(text: object) -> str:
    """Criterion text is data: angle brackets are escaped so it can never close its own fence."""
    return str(text or "").replace("<", "&lt;").replace(">", "&gt;")


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(PROMPTS_DIR),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )
    env.filters["data"] = fence
    return env


def render(name: str, **context: object) -> str:
    return environment().get_template(name).render(**context).strip() + "\n"


def template_hash(name: str) -> str:
    """Hash of a template and the partials it includes, recorded in the manifest."""
    digest = hashlib.sha256()
    for path in sorted(PROMPTS_DIR.glob("*.j2")):
        if path.name == name or path.name.startswith("_"):
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]
