"""`clawgate --help` answered without typer, and the same text typer renders."""

from __future__ import annotations

import subprocess
import sys

import pytest

from clawgate.gateway.cli.fast_help import ROOT_HELP


def run(code: str, columns: int) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": str(columns), "PATH": ""},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("columns", [80, 200])
def test_fast_help_is_what_typer_renders(columns: int) -> None:
    rendered = run(
        "import sys; sys.argv = ['clawgate', '--help']\n"
        "from clawgate.gateway.cli.root import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass",
        columns,
    )
    assert rendered == ROOT_HELP, (
        "the root help changed: copy the new text into gateway/cli/fast_help.py ROOT_HELP"
    )


def test_help_from_the_entry_point_imports_no_typer() -> None:
    code = (
        "import sys; sys.argv = ['clawgate', '--help']\n"
        "from clawgate.gateway.cli import main; main()\n"
        "assert 'typer' not in sys.modules, 'typer imported'"
    )
    assert run(code, 100) == ROOT_HELP


def test_narrow_terminals_and_other_arguments_go_through_typer() -> None:
    code = (
        "import sys; sys.argv = ['clawgate', '--help']\n"
        "from clawgate.gateway.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('typer' in sys.modules)"
    )
    output = run(code, 60)
    assert output.splitlines()[-1] == "True"
    assert "Usage: clawgate" in output
