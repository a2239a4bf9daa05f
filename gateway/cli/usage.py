"""`clawgate usage`: what the model calls cost, from the agents' ledgers
(<data_dir>/usage/YYYY-MM.jsonl), summed by chat, model, purpose or day. Reads files only:
neither litellm nor a running gateway is needed. Its help is in root.COMMANDS."""

from __future__ import annotations

import json
import re
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, cast
from zoneinfo import ZoneInfo

import typer

from clawgate.gateway.cli.context import AgentOption, cli_context, fail

if TYPE_CHECKING:
    from clawgate.agent.spend.report import GroupBy

BY = ("chat", "model", "purpose", "day", "agent")


def _since(text: str | None, today: date) -> date:
    """`YYYY-MM-DD`, `Nd` (N days ago, today included), or None: this month's first day."""
    if not text:
        return today.replace(day=1)
    if match := re.fullmatch(r"(\d+)d", text.strip()):
        return today - timedelta(days=max(int(match.group(1)) - 1, 0))
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        fail(f"--since {text!r}: give a date (2026-12-01) or a number of days (7d)")


def usage(
    ctx: typer.Context,
    agent: AgentOption = None,
    since: Annotated[
        str | None,
        typer.Option("--since", metavar="DATE", help="From this day (YYYY-MM-DD or 7d)."),
    ] = None,
    by: Annotated[
        str, typer.Option("--by", metavar="KEY", help="chat, model, purpose, day or agent.")
    ] = "purpose",
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
) -> None:
    from clawgate.agent.spend.ledger import all_records, usage_folder
    from clawgate.agent.spend.report import summarise, table

    if by not in BY:
        fail(f"--by {by!r}: use one of {', '.join(BY)}")
    context = cli_context(ctx)
    root = context.file_config()
    names = [context.agent] if context.agent else root.agent_names()
    configs = [root.for_agent(name) for name in names]
    zone = ZoneInfo(configs[0].agent.timezone)
    first = _since(since, datetime.now(zone).date())
    records = [
        r
        for r in all_records([usage_folder(c.data_dir) for c in configs], first)
        if r.time.astimezone(zone).date() >= first
    ]
    rows, total = summarise(records, cast("GroupBy", by), zone)
    if as_json:
        document = {
            "agents": names,
            "since": first.isoformat(),
            "by": by,
            "rows": [row.as_json() for row in rows],
            "total": total.as_json(),
        }
        typer.echo(json.dumps(document, indent=2))
        return
    typer.echo(f"usage of {', '.join(names)} since {first} (by {by})")
    if not records:
        typer.echo("  no model calls recorded")
        return
    for line in table(rows, total, by):
        typer.echo(line)
