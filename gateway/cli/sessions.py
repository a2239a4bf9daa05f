"""`clawgate sessions`: list the conversation transcripts and print one. Its help line is in
root.COMMANDS."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from clawgate.gateway.cli.context import AgentOption, cli_context, fail
from clawgate.kernel.sanitise import sanitise

sessions_app = typer.Typer(no_args_is_help=True)


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
            typer.echo("\t".join(sanitise(str(cell)) for cell in row))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(*headers)
    for row in rows:
        table.add_row(*(Text(sanitise(str(cell))) for cell in row))
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
        # One line a message: what people wrote shows its line breaks and controls escaped.
        typer.echo(f"#{message.seq} {message.timestamp} {role}: {sanitise(text)}")
