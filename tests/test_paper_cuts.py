"""Issue 43: the paper cuts a new user met. Each test goes through the CLI (or the public API) and
holds the house form: one line naming the file, the row where there is one, and the fix; exit 2."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT, refused

RUBRIC = ROOT / "benchmarks" / "heldout" / "report_writing.csv"


@pytest.fixture(autouse=True)
def _offline(offline_env):
    return offline_env


@pytest.mark.parametrize("named", [True, False])
def test_a_misspelt_key_is_named_with_the_known_one(tmp_path, named):
    toml = tmp_path / "p.toml"
    toml.write_text(('name = "p"\n' if named else "") + f'[corpus]\npth = "{RUBRIC}"\n')
    error = refused("run", toml)
    assert "key corpus.pth: not a setting; did you mean corpus.path?" in error and "fix: rename pth to path" in error
    assert "remove corpus.path" not in error and "key name" not in error


def test_a_missing_path_is_asked_for_not_removed(tmp_path):
    toml = tmp_path / "p.toml"
    toml.write_text('[corpus]\nformat = "table"\n')
    error = refused("run", toml)
    assert "key corpus.path: required and missing; fix: add path = ... under [corpus]" in error
