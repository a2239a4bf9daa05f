"""`clawgate onboard`: lay down the config and the workspace, then ask for (or take from
flags) the model and the bots; with `--agent NAME`, add another agent to an existing config.
The files come from gateway/setup/onboard.py, the questions from gateway/setup/wizard.py.
Its help line is in root.COMMANDS."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clawgate.gateway.cli.context import cli_context
from clawgate.gateway.cli.dashboard import add_dashboard_token

if TYPE_CHECKING:
    from clawgate.gateway.setup.onboard import OnboardResult


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
