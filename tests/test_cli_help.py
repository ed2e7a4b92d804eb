from typer.main import get_command

from taxonomy.cli import app
from tests.conftest import invoke

COMMANDS = sorted(get_command(app).commands)


def test_every_command_is_listed_and_has_help():
    assert {"run", "discover", "cluster", "canonicalize", "merge", "tag", "breakdown", "audit", "guidance", "distill", "report"} <= set(COMMANDS)
    for name in COMMANDS:
        result = invoke(name, "--help")
        assert "Usage:" in result.output and len(result.output.splitlines()) > 5, name
