"""The `clawgate` command: its options, the chat and sessions commands, the sub-apps, and
the one handler that turns a user's error into one line.

Heavy libraries (litellm, telegram, discord) load only in the commands that use them, so
`clawgate --help` and the file-reading commands stay instant. For the same reason the
sub-apps (`memory`, `pairing`, `service`, `cron`) are imported only when one of them runs,
and help is click's plain text: rich's help renderer alone costs more than the rest of
`--help`."""

from __future__ import annotations

import importlib
import inspect
import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from clawgate.gateway.cli.agents import agents
from clawgate.gateway.cli.context import AgentOption, CliContext, cli_context, fail
from clawgate.gateway.cli.dashboard import add_dashboard_token, dashboard
from clawgate.gateway.cli.ops import doctor
from clawgate.gateway.cli.status import housekeeping, status

if TYPE_CHECKING:
    from clawgate.gateway.setup.onboard import OnboardResult
    from clawgate.kernel.errors import ClawgateError


def exit_code(exc: ClawgateError) -> int:
    """2 when the setup must change before running again (a bad config, a gateway already
    running, a refused bot token: the systemd unit does not restart on 2), 1 when the work
    itself failed."""
    from clawgate.kernel.errors import ConfigError, CredentialsRejected, LockHeld

    return 2 if isinstance(exc, ConfigError | LockHeld | CredentialsRejected) else 1


# name -> (module, its typer app, the line `clawgate --help` shows without importing it).
LAZY_SUB_APPS = {
    "memory": (
        "clawgate.gateway.cli.memory",
        "memory_app",
        "Read long-term memory and check that nothing was lost.",
    ),
    "pairing": (
        "clawgate.gateway.cli.pairing",
        "pairing_app",
        "Approve who may chat with the assistant in private.",
    ),
    "groups": (
        "clawgate.gateway.cli.groups",
        "groups_app",
        "Groups that mentioned the bot, with their ids; `allow` lets one in.",
    ),
    "service": ("clawgate.gateway.cli.ops", "service_app", "Run the gateway as a systemd service."),
    "cron": (
        "clawgate.gateway.cli.cron",
        "cron_app",
        "Scheduled jobs: reminders and recurring tasks the assistant runs for you.",
    ),
}


class ClawgateGroup(TyperGroup):
    """The root command: the one place a user's error becomes `clawgate: <one line>`, and
    the sub-apps of LAZY_SUB_APPS, loaded when named."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [*super().list_commands(ctx), *LAZY_SUB_APPS]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in LAZY_SUB_APPS or cmd_name in self.commands:
            return super().get_command(ctx, cmd_name)
        module, attribute, _ = LAZY_SUB_APPS[cmd_name]
        sub_app = getattr(importlib.import_module(module), attribute)
        # Built as `add_typer` would have built it, with the root's plain help.
        holder = typer.Typer(rich_markup_mode=None, add_completion=False)
        holder.add_typer(sub_app, name=cmd_name)
        command = typer.main.get_group(holder).commands[cmd_name]
        self.add_command(command, cmd_name)
        return command

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """Listed from LAZY_SUB_APPS' help lines: describing a sub-app must not import it."""
        rows = []
        for name in self.list_commands(ctx):
            if name in LAZY_SUB_APPS:
                rows.append((name, LAZY_SUB_APPS[name][2]))
                continue
            command = self.get_command(ctx, name)
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
sessions_app = typer.Typer(help="Inspect conversation transcripts.", no_args_is_help=True)
app.add_typer(sessions_app, name="sessions")


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


@app.command()
def onboard(
    ctx: typer.Context,
    workspace: Annotated[
        Path | None,
        typer.Option(
            help="Workspace folder (default ~/.clawgate/workspace; for --agent NAME, "
            "agents/NAME/workspace in the data_dir)."
        ),
    ] = None,
    model: Annotated[str | None, typer.Option(help='The model, e.g. "openai/gpt-4o-mini".')] = None,
    api_base: Annotated[
        str | None, typer.Option(help="Endpoint of a self-hosted or OpenAI-compatible server.")
    ] = None,
    api_key: Annotated[
        str | None, typer.Option(help="The API key (stored in the 0600 config).")
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(help="Read the API key from this environment variable at start instead."),
    ] = None,
    telegram_token: Annotated[
        str | None, typer.Option(help="Telegram bot token from @BotFather.")
    ] = None,
    discord_token: Annotated[str | None, typer.Option(help="Discord bot token.")] = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Ask nothing: use the flags and what is set.")
    ] = False,
    no_check: Annotated[
        bool, typer.Option("--no-check", help="Save without the live model and bot checks.")
    ] = False,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            metavar="NAME",
            help="Add another agent, [agents.NAME], with its own workspace (and the model and "
            "bots given here) to the existing config.",
        ),
    ] = None,
) -> None:
    """Set clawgate up: config, workspace, model, bots. Asks when run in a terminal; safe to
    re-run (never overwrites your files, only sets what you answer)."""
    import asyncio
    import os

    from pydantic import SecretStr

    from clawgate.gateway.setup.onboard import executable, next_steps
    from clawgate.gateway.setup.onboard import onboard as run_onboard
    from clawgate.gateway.setup.wizard import Asker, Setup, run_setup

    config_path = cli_context(ctx).config_path
    if agent is None:
        result = run_onboard(config_path, workspace=workspace.expanduser() if workspace else None)
        add_dashboard_token(config_path, result)  # the dashboard's login token
        _list_paths(result)
    else:
        workspace = _new_agent_workspace(ctx, agent, workspace)
    flags = Setup(
        workspace=workspace if agent is not None else None,
        model=model,
        api_base=api_base,
        api_key=SecretStr(api_key) if api_key else None,
        api_key_env=api_key_env,
        telegram_token=SecretStr(telegram_token) if telegram_token else None,
        discord_token=SecretStr(discord_token) if discord_token else None,
    )
    asker = None
    if not yes and sys.stdin.isatty():
        typer.echo("\nA few questions (Ctrl-C to stop; nothing is written until the end).\n")
        asker = Asker(typer.prompt, typer.confirm, typer.echo)
    changed = asyncio.run(
        run_setup(
            config_path,
            flags,
            asker,
            live=not no_check,
            environ=dict(os.environ),
            agent_name=agent,
        )
    )
    if agent is not None:
        from clawgate.gateway.setup.onboard import lay_down_agent

        assert workspace is not None
        _list_paths(lay_down_agent(workspace))
    if changed:
        typer.echo(f"\nwrote {config_path}:")
        for line in changed:
            typer.echo(f"  {line}")
    if agent is None:
        typer.echo("\n" + "\n".join(next_steps(config_path, program=executable())))
        return
    from clawgate.gateway.setup.onboard import agent_next_steps

    own = [
        name for name, token in (("telegram", telegram_token), ("discord", discord_token)) if token
    ]
    typer.echo("\n" + "\n".join(agent_next_steps(agent, config_path, own, program=executable())))


def _list_paths(result: OnboardResult) -> None:
    for path in result.created:
        typer.echo(f"created  {path}")
    for path in result.kept:
        typer.echo(f"kept     {path}")


def _new_agent_workspace(ctx: typer.Context, name: str, workspace: Path | None) -> Path:
    """The folder for a new agent `name` (refused, one line, when the name is bad or taken,
    or when there is no config to add it to yet)."""
    from clawgate.gateway.setup.onboard import agent_workspace, check_new_agent
    from clawgate.kernel.errors import ConfigError

    context = cli_context(ctx)
    if not context.config_path.exists():
        raise ConfigError(
            f"no config at {context.config_path}: run `clawgate onboard` first, then add agents"
        )
    config = context.file_config()
    check_new_agent(config, name, context.config_path)
    if workspace is None:
        return agent_workspace(config, name)
    return workspace.expanduser().absolute()


@app.command()
def agent(
    ctx: typer.Context,
    message: Annotated[
        str | None, typer.Option("--message", "-m", help="Answer this one message and exit.")
    ] = None,
    session: Annotated[str, typer.Option(help="Session name: the key is cli:<name>.")] = "default",
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log what happens.")] = False,
    agent: AgentOption = None,
) -> None:
    """Chat in the terminal. Reads one message per line when stdin is not a terminal."""
    context = cli_context(ctx)
    config = context.config()
    if not config.agent.model:
        name = config.agent_name
        where = "[agent] model" if name == "main" else f"[agents.{name}] model"
        fail(
            f'no model configured: set {where} (e.g. "openai/gpt-4o-mini") or CLAWGATE_AGENT__MODEL'
        )
    import asyncio

    from clawgate.gateway.cli.agent import run_agent

    logging.basicConfig(level=logging.DEBUG if verbose else logging.ERROR, stream=sys.stderr)
    home = context.file_config().data_dir
    code = asyncio.run(run_agent(config, message, session, home=home, agent=context.agent))
    raise typer.Exit(code)


@app.command()
def gateway(
    ctx: typer.Context,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
    log_json: Annotated[
        bool, typer.Option("--log-json", help="Log one JSON object per line (stderr and file).")
    ] = False,
) -> None:
    """Run the daemon: the enabled chat channels and every agent, until Ctrl-C or SIGTERM."""
    import asyncio

    from clawgate.gateway.app import serve
    from clawgate.gateway.daemon.lock import InstanceLock
    from clawgate.gateway.ops.logs import setup_logging
    from clawgate.gateway.setup.onboard import missing_setup, prepare_workspace

    # Every agent: the daemon serves them all, so no --agent here.
    config = cli_context(ctx).file_config()
    problems = missing_setup(config)
    if problems:
        # All at once, one a line: a newcomer fixes the config in one go.
        typer.echo("clawgate: not ready to start:", err=True)
        for problem in problems:
            typer.echo(f"  - {problem}", err=True)
        fail("`clawgate onboard` asks for each of these, or set them in the config.")
    lock = InstanceLock(config.data_dir)
    # A terminal session ends: a gateway started meanwhile (e.g. by systemd) waits for it.
    lock.acquire(
        wait_for_agent=lambda holder: typer.echo(
            f"clawgate: waiting for {holder.describe()} to quit before starting", err=True
        )
    )
    try:
        # Inside the lock: a refused second gateway must not write (or rotate) the log.
        setup_logging(
            config.logging,
            config.data_dir,
            json=log_json or config.logging.json_format,
            verbose=verbose,
            secrets=config.secrets(),
        )
        if prepare_workspace(config.workspace):
            typer.echo(
                f"clawgate: {config.workspace} had no workspace files: created them as "
                "`clawgate onboard` does. Edit AGENTS.md, SOUL.md and USER.md there.",
                err=True,
            )
        asyncio.run(serve(config, cli_context(ctx).config_path))
    finally:
        lock.release()


@sessions_app.command("list")
def sessions_list(ctx: typer.Context, agent: AgentOption = None) -> None:
    """Every session with its message count and last activity."""
    from clawgate.agent.session import SessionStore, load_session

    config = cli_context(ctx).config()
    store = SessionStore(config.workspace / "sessions")
    rows = []
    for key, path in store.list_keys():
        session = load_session(path, key)
        messages = session.messages
        last = messages[-1].timestamp if messages else "-"
        rows.append((key, len(messages), len(session.unconsolidated()), last, path.name))
    if not rows:
        typer.echo(f"no sessions yet in {store.directory}")
        return
    headers = ("key", "messages", "unconsolidated", "last message", "file")
    if not sys.stdout.isatty():
        # rich would fit the table to 80 columns and cut keys and file names with "…".
        for row in (headers, *rows):
            typer.echo("\t".join(str(cell) for cell in row))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(*headers)
    for key, count, live, last, name in rows:
        table.add_row(key, str(count), str(live), last, name)
    Console().print(table)


@sessions_app.command("show")
def sessions_show(
    ctx: typer.Context,
    key: Annotated[str, typer.Argument(help="Session key, e.g. telegram:123 or cli:default.")],
    tail: Annotated[int | None, typer.Option(help="Only the last N messages.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Raw JSON lines.")] = False,
    agent: AgentOption = None,
) -> None:
    """Print one session's transcript."""
    from clawgate.agent.session import SessionStore, load_session

    config = cli_context(ctx).config()
    path = SessionStore(config.workspace / "sessions").path_for(key)
    if not path.exists():
        fail(f"no session {key!r} (looked for {path})", code=1)
    messages = load_session(path, key).messages
    if tail is not None:
        messages = messages[-tail:] if tail > 0 else []
    for message in messages:
        if as_json:
            typer.echo(json.dumps(message.to_dict(), ensure_ascii=False))
            continue
        text = message.content
        if message.tool_calls:
            names = ", ".join(call.function.name for call in message.tool_calls)
            text = f"{text} [calls: {names}]".strip()
        role = message.role if message.role != "tool" else f"tool {message.name or ''}"
        typer.echo(f"#{message.seq} {message.timestamp} {role}: {text}")


app.command("agents")(agents)
app.command("status")(status)
app.command("housekeeping")(housekeeping)
app.command("dashboard")(dashboard)
app.command("doctor")(doctor)  # registered last: listed after the everyday commands


def main() -> None:
    app()
