"""`clawgate backup [verify]`, `clawgate restore` and `clawgate export`: moving an installation
(gateway/moving/). Their help is in root.COMMANDS."""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated

import typer

from clawgate.gateway.cli.context import cli_context, fail

backup_app = typer.Typer()

AgentsOption = Annotated[
    list[str] | None,
    typer.Option("--agent", metavar="NAME", help="Only this agent (repeatable)."),
]


@backup_app.callback(invoke_without_command=True)
def backup(
    ctx: typer.Context,
    agents: AgentsOption = None,
    every: Annotated[bool, typer.Option("--all", help="Every agent (the default).")] = False,
    no_secrets: Annotated[
        bool,
        typer.Option(
            "--no-secrets",
            help="Replace every configured secret with a placeholder, and say which.",
        ),
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="The archive (default: clawgate-<date>.tar.gz here)."),
    ] = None,
) -> None:
    if ctx.invoked_subcommand is not None:
        return
    from datetime import datetime

    from clawgate.gateway.moving.backup import count_files, write_backup

    if every and agents:
        fail("give --agent or --all, not both")
    context = cli_context(ctx)
    config = context.file_config()
    names = [config.for_agent(name).agent_name for name in agents or []] or config.agent_names()
    output = output or Path(f"clawgate-{datetime.now():%Y-%m-%d-%H%M%S}.tar.gz")
    with ExitStack() as stack:
        progress: Callable[[int], None] | None = None
        if sys.stderr.isatty():  # a bar in a terminal; a log gets the summary only
            total = count_files(config, names, context.config_path)
            bar = typer.progressbar(length=total, label="backing up", file=sys.stderr)
            progress = stack.enter_context(bar).update
        result = write_backup(
            config,
            context.config_path,
            output,
            agents=names,
            keep_secrets=not no_secrets,
            progress=progress,
        )
    typer.echo(
        f"{result.path}: {result.files} files of {', '.join(names)}, {result.size:,} bytes "
        "(the search index is left out: it is rebuilt on demand)"
    )
    for key in result.secrets_removed:
        typer.echo(f"secret replaced by a placeholder: {key}")
    for member in result.files_left_out:
        typer.echo(f"left out (secrets only): {member}")


@backup_app.command("verify")
def verify(file: Annotated[Path, typer.Argument(help="The backup archive.")]) -> None:
    """Check every checksum, then restore into a temporary folder: the config loads, the
    memory audit is clean and every transcript parses. Exit 1 on any problem."""
    from clawgate.gateway.moving.verify import verify_backup

    report = verify_backup(file)
    manifest = report.manifest
    if manifest is not None:
        typer.echo(
            f"{file}: {len(manifest.files)} files, clawgate {manifest.clawgate_version}, "
            f"config schema {manifest.schema_version}, made {manifest.created_at}"
        )
    for problem in report.problems:
        typer.echo(f"PROBLEM {problem}")
    if not report.ok:
        fail(f"{file} failed verification ({len(report.problems)} problems)", code=1)
    typer.echo(
        f"ok: checksums match; trial restore: config loads, {report.transcripts} transcripts "
        f"and {report.messages} messages parse, memory audit clean"
    )


def restore(
    file: Annotated[Path, typer.Argument(help="The backup archive.")],
    to: Annotated[
        Path | None,
        typer.Option("--to", help="A new, empty folder (default: ~/.clawgate, if it is new)."),
    ] = None,
) -> None:
    from clawgate.gateway.moving.config_text import key_variables
    from clawgate.gateway.moving.restore import restore_backup
    from clawgate.kernel.config import DEFAULT_HOME

    result = restore_backup(file, to or DEFAULT_HOME.expanduser())
    manifest = result.manifest
    typer.echo(f"restored {len(manifest.files)} files into {result.target}")
    typer.echo("next:")
    for key in manifest.secrets_removed:
        typer.echo(f"  - fill in {key} in {result.config_path} (the backup had no secrets)")
    for variable in key_variables(result.config_path.read_text(encoding="utf-8")):
        typer.echo(f"  - set {variable} (the config reads a model key from it; see service.env)")
    for member in manifest.files_left_out:
        typer.echo(f"  - recreate {member.removeprefix('data/')} (left out with the secrets)")
    default = DEFAULT_HOME.expanduser() / "config.toml"
    config = "" if result.config_path == default else f" --config {result.config_path}"
    typer.echo(f"  - check it:  clawgate{config} doctor")
    typer.echo(f"  - start it:  clawgate{config} gateway   (or reinstall the service)")


def export(
    ctx: typer.Context,
    directory: Annotated[Path, typer.Argument(help="The folder to write (created if new).")],
    agents: AgentsOption = None,
) -> None:
    from clawgate.gateway.moving.export import export_tree

    context = cli_context(ctx)
    config = context.file_config()
    names = [config.for_agent(name).agent_name for name in agents or []] or config.agent_names()
    result = export_tree(config, context.config_path, directory, names)
    typer.echo(
        f"{directory}: {result.written} files written, {result.removed} removed, "
        f"{result.unchanged} unchanged"
    )
