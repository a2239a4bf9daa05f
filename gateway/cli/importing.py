"""`clawgate import openclaw PATH` and `clawgate import nanobot PATH`: a report of what would
come over (the default), `--apply` to write it (gateway/moving/importing/). Its help line is
in root.COMMANDS."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clawgate.gateway.cli.context import AgentOption, cli_context, fail

if TYPE_CHECKING:
    from clawgate.gateway.moving.importing.plan import Haul

import_app = typer.Typer(no_args_is_help=True)

PathArgument = Annotated[Path, typer.Argument(help="Its home folder, or a workspace.")]
ApplyOption = Annotated[
    bool,
    typer.Option("--apply/--dry-run", help="Write (default: only report what would change)."),
]


@import_app.command("openclaw")
def openclaw(
    ctx: typer.Context, path: PathArgument, apply: ApplyOption = False, agent: AgentOption = None
) -> None:
    """Bring an OpenClaw home (~/.openclaw) or workspace in: bootstrap files, MEMORY.md,
    daily logs, skills, cron jobs and transcripts. Nothing of theirs is changed."""
    from clawgate.gateway.moving.importing.openclaw import read_openclaw

    _run(ctx, path, apply, read_openclaw)


@import_app.command("nanobot")
def nanobot(
    ctx: typer.Context, path: PathArgument, apply: ApplyOption = False, agent: AgentOption = None
) -> None:
    """Bring a nanobot home (~/.nanobot) or workspace in: bootstrap files, MEMORY.md,
    HISTORY.md or history.jsonl, skills, cron jobs and transcripts. Nothing of theirs is
    changed."""
    from clawgate.gateway.moving.importing.nanobot import read_nanobot

    _run(ctx, path, apply, read_nanobot)


def _run(ctx: typer.Context, path: Path, apply: bool, read: Callable[[Path], Haul]) -> None:
    from clawgate.gateway.moving.importing.plan import apply_plan, make_plan

    if not path.is_dir():
        fail(f"{path}: no such folder")
    config = cli_context(ctx).config()
    haul = read(path.expanduser().absolute())
    plan = make_plan(haul, config.workspace)
    typer.echo(f"{haul.source} {path} -> agent {config.agent_name} ({config.workspace})")
    labels = {"new": "new", "same": "same", "template": "replaces", "conflict": "conflict"}
    for item, status in plan.files:
        line = f"  {labels[status]:<9} {item.target}  ({item.what})"
        if status == "conflict":
            line += f": yours differs; theirs is {item.source}, merge by hand"
        typer.echo(line)
    if haul.history:
        already = len(set(haul.history)) - len(plan.history_new)
        typer.echo(
            f"  history   {len(plan.history_new)} entries for memory/HISTORY.md ({already} already there)"
        )
    for job, status in plan.jobs:
        typer.echo(
            f"  {labels[status]:<9} cron job {job.id} {job.name!r}: {job.schedule.describe()} "
            f"-> {job.deliver_to}{'' if job.enabled else ' (disabled)'}"
        )
    for reason in haul.skipped:
        typer.echo(f"  skipped   {reason}")
    same = sum(1 for _, status in plan.files + plan.jobs if status == "same")
    summary = (
        f"{plan.to_write} to write, {same} already there, {plan.conflicts} conflicts, "
        f"{len(haul.skipped)} skipped"
    )
    if not apply:
        typer.echo(f"{summary}. Dry run: nothing written; run again with --apply to write.")
        return
    apply_plan(plan)
    typer.echo(f"{summary}. Written.")
