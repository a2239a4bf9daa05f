"""`clawgate onboard`: lay down the config and the workspace, then ask for (or take from
flags) the model and the bots; with `--agent NAME`, add another agent to an existing config.
The files come from gateway/setup/onboard.py, the questions from gateway/setup/wizard.py.
Its help line is in root.COMMANDS."""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from clawgate.gateway.cli.context import cli_context
from clawgate.gateway.cli.dashboard import add_dashboard_token

if TYPE_CHECKING:
    from clawgate.gateway.setup.onboard import OnboardResult
    from clawgate.gateway.setup.wizard import SetupResult

T = TypeVar("T")

# Taken by the main thread during a prompt only (_interruptible).
_PROMPT_SIGNALS = {signal.SIGINT, signal.SIGALRM}
_TICK = 0.2


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
    again: Annotated[
        bool,
        typer.Option(
            "--again", help="Ask every question, even when the config is complete and works."
        ),
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
    # Each check's outcome is printed once, below; the model client's own log line of the
    # same failure would repeat it on stderr.
    logging.getLogger("clawgate").addHandler(logging.NullHandler())
    interactive = not yes and sys.stdin.isatty()
    if interactive:
        # Ctrl-C is taken only at a prompt, on the main thread (_interruptible). Threads
        # inherit the signal mask of the thread that starts them, so no thread a check or a
        # library starts from here on can catch it instead: one that did left the prompt
        # blocked in input(). Pressed during a check, it stops onboard when the check ends
        # (each has a timeout).
        signal.pthread_sigmask(signal.SIG_BLOCK, _PROMPT_SIGNALS)
    try:
        asker = None
        if interactive:
            if agent is None and not again and flags.is_empty() and _works(config_path, no_check):
                typer.echo(
                    f"\n{config_path} is complete and its checks pass: nothing to ask "
                    f"(`{executable()} onboard --again` asks anyway).\n"
                    f"Start the gateway with `{executable()} gateway`."
                )
                return
            typer.echo("\nA few questions (Ctrl-C to stop; the answers are saved at the end).\n")
            asker = Asker(_interruptible(typer.prompt), _interruptible(typer.confirm), typer.echo)
        answers = asyncio.run(
            run_setup(
                config_path,
                flags,
                asker,
                live=not no_check,
                environ=dict(os.environ),
                agent_name=agent,
            )
        )
    finally:
        if interactive:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _PROMPT_SIGNALS)
    if agent is not None:
        from clawgate.gateway.setup.onboard import lay_down_agent

        assert workspace is not None
        _list_paths(lay_down_agent(workspace))
    _summarise(config_path, answers)
    if agent is None:
        steps = next_steps(config_path, program=executable(), checked=not answers.failed)
        typer.echo("\n" + "\n".join(steps))
        return
    from clawgate.gateway.setup.onboard import agent_next_steps

    own = [
        name for name, token in (("telegram", telegram_token), ("discord", discord_token)) if token
    ]
    typer.echo("\n" + "\n".join(agent_next_steps(agent, config_path, own, program=executable())))


def _summarise(config_path: Path, result: SetupResult) -> None:
    """Every answer accounted for: saved, saved despite a failed check, or not saved."""
    if result.saved:
        typer.echo(f"\nsaved in {config_path}:")
        for line in result.saved:
            typer.echo(f"  {line}")
    for title, lines in (
        ("saved although the check failed", result.failed),
        ("not saved", result.not_saved),
    ):
        if lines:
            typer.echo(f"\n{title}:")
            for line in lines:
                typer.echo(f"  {line}")


def _works(config_path: Path, no_check: bool) -> bool:
    """The config has everything the gateway needs and (unless --no-check) its model and
    bots pass their live checks: a second `onboard && gateway` need not ask again."""
    import asyncio

    from clawgate.gateway.ops.online import online_checks
    from clawgate.gateway.setup.onboard import missing_setup
    from clawgate.kernel.config import load_config
    from clawgate.kernel.errors import ConfigError

    if not config_path.exists():
        return False
    try:
        config = load_config(config_path)
    except ConfigError:
        return False
    if not config.agent.model or missing_setup(config):
        return False
    if no_check:
        return True
    typer.echo("\nchecking the saved settings...")
    findings = asyncio.run(online_checks(config))
    for finding in findings:
        typer.echo(f"  {finding.message}")
    return all(finding.level == "ok" for finding in findings)


def _interruptible(ask: Callable[..., T]) -> Callable[..., T]:
    """A prompt that stops at Ctrl-C: SIGINT, blocked while the questions run, is let through
    to the main thread for the prompt alone. The questions run inside `asyncio.run`, whose
    SIGINT handler only cancels the main task at its next await, which a prompt blocked in
    input() never reaches: during the prompt, Ctrl-C raises at once (click turns it into
    Abort), also when it was pressed during the check before.

    A Ctrl-C that lands after input() wrote its prompt but before its read() began only
    sets Python's flag: the read is not interrupted and waits for a line. A tick of SIGALRM
    every 0.2 s interrupts the read, and input() looks at the flag each time."""

    def wrapped(*args: Any, **kwargs: Any) -> T:
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        previous_alarm = signal.signal(signal.SIGALRM, lambda *_: None)
        try:
            signal.setitimer(signal.ITIMER_REAL, _TICK, _TICK)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _PROMPT_SIGNALS)
            return ask(*args, **kwargs)
        finally:
            signal.pthread_sigmask(signal.SIG_BLOCK, _PROMPT_SIGNALS)
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous_alarm)
            signal.signal(signal.SIGINT, previous)

    return wrapped


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
