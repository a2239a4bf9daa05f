"""The `clawgate` command: its options, the table of its commands, and the one handler that
turns a user's error into one line.

Every command is registered lazily: COMMANDS names the module and attribute of each and
holds its help, so `clawgate --help` lists them all without importing any (typer's own
import is most of what it costs), and a command's module loads only when that command runs
or shows its own help. The help lives here alone; the command functions and sub-apps carry
none. Help is click's plain text: rich's help renderer alone costs more than the rest of
`--help`. Heavy libraries (litellm, telegram, discord) load only inside the commands that
use them."""

from __future__ import annotations

import functools
import importlib
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from clawgate.gateway.cli.context import CliContext, fail

if TYPE_CHECKING:
    from clawgate.kernel.errors import ClawgateError


def exit_code(exc: ClawgateError) -> int:
    """2 when the setup must change before running again (a bad config, a gateway already
    running, a refused bot token: the systemd unit does not restart on 2), 1 when the work
    itself failed."""
    from clawgate.kernel.errors import ConfigError, CredentialsRejected, LockHeld

    return 2 if isinstance(exc, ConfigError | LockHeld | CredentialsRejected) else 1


@dataclass(frozen=True)
class Command:
    """Where one command lives (a typer command function or a sub-app) and its help."""

    module: str
    attribute: str
    help: str


def _cli(module: str, attribute: str, help: str) -> Command:
    return Command(f"clawgate.gateway.cli.{module}", attribute, help)


# In the order `clawgate --help` lists them: the everyday commands, then the sub-apps.
COMMANDS = {
    "onboard": _cli(
        "onboard",
        "onboard",
        "Set clawgate up: config, workspace, model, bots. Asks when run in a terminal; safe to "
        "re-run (never overwrites your files, only sets what you answer).",
    ),
    "agent": _cli(
        "chat",
        "agent",
        "Chat in the terminal. Reads one message per line when stdin is not a terminal.",
    ),
    "gateway": _cli(
        "serve",
        "gateway",
        "Run the daemon: the enabled chat channels and every agent, until Ctrl-C or SIGTERM.",
    ),
    "agents": _cli(
        "agents",
        "agents",
        "The agents in the config: workspace, model, channels and bindings of each.",
    ),
    "status": _cli(
        "status", "status", "Whether the gateway runs, its channels and agents, and disk use."
    ),
    "usage": _cli(
        "usage",
        "usage",
        "What the model calls cost: today, this month, or --since a day; --by chat, model, "
        "purpose, day or agent; unknown prices shown as unknown with their tokens.",
    ),
    "housekeeping": _cli(
        "status",
        "housekeeping",
        "Delete old media, archives and MEMORY.md versions now, per the housekeeping config "
        "(the gateway also does this daily).",
    ),
    "dashboard": _cli(
        "dashboard",
        "dashboard",
        "Open the browser dashboard: prints a one-time login link (valid 5 minutes).",
    ),
    "doctor": _cli(
        "ops",
        "doctor",
        "Check the config, file permissions, workspace and installed packages. Exit 1 on problems.",
    ),
    "sessions": _cli("sessions", "sessions_app", "Inspect conversation transcripts."),
    "memory": _cli(
        "memory", "memory_app", "Read long-term memory and check that nothing was lost."
    ),
    "pairing": _cli(
        "pairing", "pairing_app", "Approve who may chat with the assistant in private."
    ),
    "groups": _cli(
        "groups",
        "groups_app",
        "Groups that mentioned the bot, with their ids; `allow` lets one in.",
    ),
    "service": _cli("ops", "service_app", "Run the gateway as a systemd service."),
    "cron": _cli(
        "cron",
        "cron_app",
        "Scheduled jobs: reminders and recurring tasks the assistant runs for you.",
    ),
    "mcp": _cli("mcp", "mcp_app", "MCP tool servers: `list` shows each with its state and tools."),
    "backup": _cli(
        "moving",
        "backup_app",
        "Back up config, workspaces and state into one archive while the gateway runs; "
        "`backup verify FILE` checks one.",
    ),
    "restore": _cli(
        "moving", "restore", "Restore a backup into a new, empty home (never over one in use)."
    ),
    "export": _cli(
        "moving",
        "export",
        "Write a git-friendly, secret-free copy of the workspaces and config into a folder.",
    ),
    "import": _cli(
        "importing",
        "import_app",
        "Bring an OpenClaw or nanobot workspace in: a report first, --apply to write.",
    ),
    "cluster": _cli(
        "cluster",
        "cluster_app",
        "Several workers on one PostgreSQL ([cluster]): `status` shows workers, leases and "
        "backlog, `drain WORKER` hands a worker's agents and bots over.",
    ),
}


@functools.cache
def load(name: str) -> Any:
    """The click command of COMMANDS[name], importing its module, built as typer's own
    registration would build it, with the root's plain help. Built once a process: typer
    makes a pydantic adapter for every parameter (~10 ms a command), and a command holds no
    state of an invocation."""
    entry = COMMANDS[name]
    target = getattr(importlib.import_module(entry.module), entry.attribute)
    holder = typer.Typer(rich_markup_mode=None, add_completion=False)
    if isinstance(target, typer.Typer):
        holder.add_typer(target, name=name, help=entry.help)
    else:
        holder.command(name, help=entry.help)(target)
    return typer.main.get_group(holder).commands[name]


class ClawgateGroup(TyperGroup):
    """The root command: the commands of COMMANDS, each loaded when named, and the one place
    a user's error becomes `clawgate: <one line>`."""

    def list_commands(self, ctx: Any) -> list[str]:
        # COMMANDS' order, whichever of them this process has loaded already.
        return [*COMMANDS, *(n for n in super().list_commands(ctx) if n not in COMMANDS)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            self.add_command(load(cmd_name), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """Listed from COMMANDS: describing a command must not import it."""
        rows = []
        for name in self.list_commands(ctx):
            if name in COMMANDS:
                rows.append((name, _first_paragraph(COMMANDS[name].help)))
                continue
            command = super().get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, _first_paragraph(command.short_help or command.help or "")))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    # Any: typer's group is built on its private copy of click, whose Context we do not import.
    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as exc:
            # Imported here: the error module loads pydantic, which `--help` does without.
            from clawgate.kernel.errors import ClawgateError, one_line

            if not isinstance(exc, ClawgateError):
                raise
            fail(one_line(exc), code=exit_code(exc))


def _first_paragraph(text: str) -> str:
    # Whole, as rich's help showed it; click's own short help stops at the first sentence.
    return " ".join(inspect.cleandoc(text).split("\n\n")[0].split())


app = typer.Typer(
    name="clawgate",
    cls=ClawgateGroup,
    help="Your self-hosted AI assistant: Telegram, Discord and the terminal, with memory in Markdown.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.callback()
def main_options(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            help="Config file (default: $CLAWGATE_CONFIG or ~/.clawgate/config.toml).",
        ),
    ] = None,
) -> None:
    ctx.obj = CliContext(config_option=config)


def main() -> None:
    app()
