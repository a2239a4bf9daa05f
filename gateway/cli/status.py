"""`clawgate status` and `clawgate housekeeping`: how the running gateway is doing, and
what the folders that grow take on disk."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from clawgate.gateway.cli.context import cli_context


def _size(count: int) -> str:
    return f"{count / 1e6:.1f} MB" if count >= 100_000 else f"{count / 1e3:.0f} kB"


def status(ctx: typer.Context) -> None:
    """Whether the gateway runs, its channels, and disk use."""
    from clawgate.gateway.ops.status import disk_usage, read_status

    config = cli_context(ctx).config()
    report = read_status(config.data_dir)
    if report is None:
        typer.echo("gateway: not running (no status file)")
    else:
        age = time.time() - float(report.get("updated_at", 0))
        state = "running" if report["running"] else "not running (stale status file)"
        typer.echo(f"gateway: {state}, pid {report.get('pid')}, updated {age:.0f} s ago")
        for name, info in sorted((report.get("channels") or {}).items()):
            error = f" - {info['last_error']}" if info.get("last_error") else ""
            restarts = f", {info['restarts']} restarts" if info.get("restarts") else ""
            typer.echo(f"  channel {name}: {info.get('state')}{restarts}{error}")
        if report.get("busy_sessions") is not None:
            typer.echo(f"  turns running: {report['busy_sessions']}")
    typer.echo(f"workspace: {config.workspace}")
    for name, used in disk_usage(config.workspace).items():
        typer.echo(f"  {name}: {_size(used)}")


def housekeeping(
    ctx: typer.Context,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only count what would go.")] = False,
) -> None:
    """Delete old media, archives and MEMORY.md versions now, per the housekeeping config
    (the gateway also does this daily)."""
    from clawgate.gateway.ops.housekeeping import sweep

    report = sweep(cli_context(ctx).config(), dry_run=dry_run)
    prefix = "would have " if dry_run else ""
    typer.echo(prefix + report.summary())
    if report.kept_unarchived:
        typer.echo(f"kept {report.kept_unarchived} old transcripts whose archive has not landed")
