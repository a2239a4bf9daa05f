"""`clawgate agent`: its options and the checks made before anything loads; the run itself
is agent.py's. Its help line is in root.COMMANDS."""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer

from clawgate.gateway.cli.context import AgentOption, cli_context, fail


def agent(
    ctx: typer.Context,
    message: Annotated[
        str | None, typer.Option("--message", "-m", help="Answer this one message and exit.")
    ] = None,
    session: Annotated[str, typer.Option(help="Session name: the key is cli:<name>.")] = "default",
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log what happens.")] = False,
    agent: AgentOption = None,
) -> None:
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
    from clawgate.kernel.config import settings_digest

    root = context.file_config()
    code = asyncio.run(
        run_agent(
            config,
            message,
            session,
            home=root.data_dir,
            agent=context.agent,
            settings=settings_digest(root),
        )
    )
    raise typer.Exit(code)
