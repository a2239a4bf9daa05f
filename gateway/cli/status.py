"""`clawgate status` and `clawgate housekeeping`: how the running gateway is doing, and
what the folders that grow take on disk. Their help is in root.COMMANDS."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from clawgate.gateway.cli.context import AgentOption, cli_context
from clawgate.kernel.sanitise import sanitise


def _size(count: int) -> str:
    return f"{count / 1e6:.1f} MB" if count >= 100_000 else f"{count / 1e3:.0f} kB"


def status(ctx: typer.Context, agent: AgentOption = None) -> None:
    from clawgate.gateway.cli.agents import agent_rows, describe
    from clawgate.gateway.ops.rendezvous import describe as describe_dashboard
    from clawgate.gateway.ops.rendezvous import read_record
    from clawgate.gateway.ops.status_file import disk_usage, read_status

    context = cli_context(ctx)
    config = context.config()
    # One gateway, one report, whichever agent was asked about.
    report = read_status(context.file_config().data_dir)
    if report is None:
        typer.echo("gateway: not running (no status file)")
    else:
        age = time.time() - float(report.get("updated_at", 0))
        state = "running" if report["running"] else "not running (stale status file)"
        typer.echo(f"gateway: {state}, pid {report.get('pid')}, updated {age:.0f} s ago")
        for name, info in sorted((report.get("channels") or {}).items()):
            # A platform's error description: the sanitiser keeps its control characters off
            # the terminal.
            error = f" - {sanitise(str(info['last_error']))}" if info.get("last_error") else ""
            restarts = f", {info['restarts']} restarts" if info.get("restarts") else ""
            typer.echo(f"  channel {name}: {info.get('state')}{restarts}{error}")
        if report.get("busy_sessions") is not None:
            typer.echo(f"  turns running: {report['busy_sessions']}")
    dashboard = read_record(context.file_config().data_dir)
    if dashboard is not None:
        typer.echo(f"  {sanitise(describe_dashboard(dashboard))}")
    reported = report.get("agents") if report is not None and report["running"] else None
    if reported:
        typer.echo("agents (as the gateway runs them):")
        for entry in reported:
            typer.echo(f"  {sanitise(_reported_agent(entry, config.root.default_agent))}")
    else:
        typer.echo("agents (from the config):")
        for row in agent_rows(config):
            typer.echo(f"  {describe(row)}")
    typer.echo(f"workspace of {config.agent_name}: {config.workspace}")
    for name, used in disk_usage(config.workspace).items():
        typer.echo(f"  {name}: {_size(used)}")


def _reported_agent(entry: dict[str, Any], default: str) -> str:
    """One agent of status.json: `work: workspace W, model M, channels telegram@work; turns
    running: 1 (work/telegram:1)` - its channel accounts and the sessions running a turn."""
    name = str(entry.get("name", "?"))
    channels = entry.get("channels") or []
    busy = entry.get("busy_sessions") or []
    turns = f"; turns running: {len(busy)} ({', '.join(map(str, busy))})" if busy else ""
    return (
        f"{name}{' (default)' if name == default else ''}: workspace {entry.get('workspace')}, "
        f"model {entry.get('model') or '(none)'}, channels {', '.join(map(str, channels)) or 'none'}"
        f"{turns}"
    )


def housekeeping(
    ctx: typer.Context,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only count what would go.")] = False,
    agent: AgentOption = None,
) -> None:
    from clawgate.gateway.ops.housekeeping import sweep

    report = sweep(cli_context(ctx).config(), dry_run=dry_run)
    prefix = "would have " if dry_run else ""
    typer.echo(prefix + report.summary())
    if report.kept_unarchived:
        typer.echo(f"kept {report.kept_unarchived} old transcripts whose archive has not landed")
