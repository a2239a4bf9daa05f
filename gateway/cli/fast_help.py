"""`clawgate --help` without importing typer, whose import alone takes longer than the
help's budget (~85 ms of CPU against 80 ms for the whole command).

ROOT_HELP is the text typer renders for the root command at any terminal 80 columns wide or
more (click caps help at 80); tests/test_cli_help.py checks it still is, so a changed
command or docstring fails the suite until this copy is refreshed. Narrower terminals and
every other argument list go through typer as usual.
"""

from __future__ import annotations

import os
import sys

ROOT_HELP = """\
Usage: clawgate [OPTIONS] COMMAND [ARGS]...

  Your self-hosted AI assistant: Telegram, Discord and the terminal, with
  memory in Markdown.

Options:
  -c, --config <path>  Config file (default: $CLAWGATE_CONFIG or
                       ~/.clawgate/config.toml).
  --help               Show this message and exit.

Commands:
  onboard       Set clawgate up: config, workspace, model, bots. Asks when run
                in a terminal; safe to re-run (never overwrites your files,
                only sets what you answer).
  agent         Chat in the terminal. Reads one message per line when stdin is
                not a terminal.
  gateway       Run the daemon: the enabled chat channels and every agent,
                until Ctrl-C or SIGTERM.
  agents        The agents in the config: workspace, model, channels and
                bindings of each.
  status        Whether the gateway runs, its channels and agents, and disk
                use.
  housekeeping  Delete old media, archives and MEMORY.md versions now, per the
                housekeeping config (the gateway also does this daily).
  dashboard     Open the browser dashboard: prints a one-time login link
                (valid 5 minutes).
  doctor        Check the config, file permissions, workspace and installed
                packages. Exit 1 on problems.
  sessions      Inspect conversation transcripts.
  memory        Read long-term memory and check that nothing was lost.
  pairing       Approve who may chat with the assistant in private.
  groups        Groups that mentioned the bot, with their ids; `allow` lets
                one in.
  service       Run the gateway as a systemd service.
  cron          Scheduled jobs: reminders and recurring tasks the assistant
                runs for you.
"""


def answered(argv: list[str]) -> bool:
    """Print the root help and return True when `argv` asks only for it; else False."""
    if argv != ["--help"] or _columns() < 80:
        return False
    sys.stdout.write(ROOT_HELP)
    sys.stdout.flush()
    return True


def _columns() -> int:
    # As click measures it (shutil.get_terminal_size), without importing shutil.
    try:
        if (columns := int(os.environ["COLUMNS"])) > 0:
            return columns
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80
