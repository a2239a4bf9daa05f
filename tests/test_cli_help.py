"""`clawgate --help` lists every command with its help without importing any command module,
and each command's own --help works, carrying the same help."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from clawgate.gateway.cli import app
from clawgate.gateway.cli.root import COMMANDS


def run_help(code: str, columns: int = 100) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": str(columns), "PATH": ""},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def flat(text: str) -> str:
    # Without any whitespace: click wraps help at word breaks and after hyphens.
    return "".join(text.split())


@pytest.mark.parametrize("columns", [60, 200])
def test_root_help_lists_every_command_and_imports_none(columns: int) -> None:
    output = run_help(
        "import sys; sys.argv = ['clawgate', '--help']\n"
        "from clawgate.gateway.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('clawgate.gateway.cli.')))",
        columns,
    )
    *help_lines, loaded = output.splitlines()
    assert loaded == "['clawgate.gateway.cli.context', 'clawgate.gateway.cli.root']"
    listing = help_lines[help_lines.index("Commands:") + 1 :]
    names = [line.split()[0] for line in listing if line[:3].strip()]
    assert names == list(COMMANDS)
    for name, command in COMMANDS.items():
        assert name + flat(command.help) in flat("\n".join(listing))


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_command_shows_its_own_help(name: str) -> None:
    result = CliRunner().invoke(app, [name, "--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    assert f"Usage: clawgate {name} [OPTIONS]" in result.stdout
    assert flat(COMMANDS[name].help) in flat(result.stdout)
