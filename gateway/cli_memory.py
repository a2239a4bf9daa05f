"""`clawgate memory ...`: read the memory files and audit the transcripts. No model needed."""

from __future__ import annotations

import re
from typing import Annotated

import typer

memory_app = typer.Typer(
    help="Read long-term memory and check that nothing was lost.", no_args_is_help=True
)

_ENTRY_START = re.compile(r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}\]", re.M)


def split_entries(history: str) -> list[str]:
    """HISTORY.md entries: each starts with a "[YYYY-MM-DD HH:MM]" line; text before the
    first stamp (a heading a person added) is not an entry."""
    starts = [m.start() for m in _ENTRY_START.finditer(history)]
    return [history[a:b].strip() for a, b in zip(starts, [*starts[1:], len(history)], strict=True)]


@memory_app.command("show")
def show() -> None:
    """Print memory/MEMORY.md."""
    from gateway.cli import _load

    path = _load().workspace / "memory" / "MEMORY.md"
    if not path.exists():
        typer.echo(f"no MEMORY.md yet ({path})", err=True)
        raise typer.Exit(1)
    typer.echo(path.read_text(encoding="utf-8"), nl=False)


@memory_app.command("history")
def history(
    grep: Annotated[
        str | None, typer.Option(help="Only entries matching this regex (case-insensitive).")
    ] = None,
    tail: Annotated[int | None, typer.Option(help="Only the last N entries.")] = None,
) -> None:
    """Print HISTORY.md entries, oldest first."""
    from gateway.cli import _load, fail

    path = _load().workspace / "memory" / "HISTORY.md"
    entries = split_entries(path.read_text(encoding="utf-8")) if path.exists() else []
    if grep:
        try:
            pattern = re.compile(grep, re.I)
        except re.error as exc:
            fail(f"--grep is not a valid regular expression: {exc}")
        entries = [e for e in entries if pattern.search(e)]
    if tail is not None:
        entries = entries[-tail:] if tail > 0 else []
    for entry in entries:
        typer.echo(entry + "\n")


@memory_app.command("audit")
def audit() -> None:
    """Account for every message of every session; exit 1 if any is unaccounted."""
    from agent.memory.audit import audit_sessions
    from gateway.cli import _load

    report = audit_sessions(_load().workspace / "sessions")
    typer.echo(
        f"{report.files} transcripts, {report.total} messages: {report.live} live, "
        f"{report.covered} consolidated or archived, {report.pending_archive} waiting for their archive"
    )
    for problem in report.problems:
        typer.echo(f"UNACCOUNTED {problem}")
    if not report.ok:
        typer.echo(f"{len(report.problems)} problems", err=True)
        raise typer.Exit(1)
    typer.echo("everything accounted for")
