from typer.main import get_command

from taxonomy.cli import app
from tests.conftest import invoke

COMMANDS = sorted(get_command(app).commands)


def test_every_command_is_listed_and_has_help():
    assert {
        "run",
        "discover",
        "cluster",
        "canonicalize",
        "merge",
        "tag",
        "breakdown",
        "audit",
        "guidance",
        "distill",
        "report",
    } <= set(COMMANDS)
    for name in COMMANDS:
        result = invoke(name, "--help")
        assert "Usage:" in result.output and len(result.output.splitlines()) > 5, name


def test_no_help_text_is_cut_off(monkeypatch):
    """Rich cuts a word too long for its column with "…"; every choice must show in full."""
    monkeypatch.setenv("COLUMNS", "72")
    for name in COMMANDS:
        result = invoke(name, "--help")
        assert "…" not in result.output, (name, result.output)
    forced = " ".join(invoke("run", "--help").output.split())
    assert "discover | cluster | canonicalize | merge | tag" in forced.replace("│ ", "").replace(" │", "")


def test_version():
    from importlib.metadata import version

    result = invoke("--version")
    assert result.output.strip() == f"rubric-taxonomy {version('rubric-taxonomy')}"


def test_one_spelling_keeps_a_broken_constraint_in_every_command():
    for name in ("run", "merge", "edit"):
        shown = invoke(name, "--help").output
        assert "--accept-violations" in shown and "--allow-violations" not in shown, name
