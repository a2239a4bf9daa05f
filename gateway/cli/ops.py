"""Operating a deployment: `clawgate doctor` and `clawgate service install`.
Their help is in root.COMMANDS."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clawgate.gateway.cli.context import AgentOption, cli_context, fail

if TYPE_CHECKING:
    from clawgate.gateway.ops.service import UnitSpec

service_app = typer.Typer(no_args_is_help=True)


def doctor(
    ctx: typer.Context,
    online: Annotated[
        bool,
        typer.Option(
            "--online", help="Also send one tiny request to the model and each chat platform."
        ),
    ] = False,
    fix_modes: Annotated[
        bool,
        typer.Option(
            "--fix-modes", help="Remove group/other access from every path the check flags."
        ),
    ] = False,
    agent: AgentOption = None,
) -> None:
    import asyncio

    from rich.console import Console

    from clawgate.gateway.ops.doctor import render
    from clawgate.gateway.ops.online import doctor_report

    context = cli_context(ctx)
    report = asyncio.run(
        doctor_report(context.config_path, online=online, fix_modes=fix_modes, agent=context.agent)
    )
    render(report, Console(highlight=False, soft_wrap=True))
    raise typer.Exit(report.exit_code)


@service_app.command("install")
def service_install(
    ctx: typer.Context,
    user: Annotated[
        bool, typer.Option("--user", help="A user unit (~/.config/systemd/user), no root needed.")
    ] = False,
    print_only: Annotated[
        bool, typer.Option("--print", help="Print the unit instead of writing it.")
    ] = False,
    directory: Annotated[
        Path | None, typer.Option("--dir", help="Write the unit into this folder instead.")
    ] = None,
) -> None:
    """Write a systemd unit for `clawgate gateway` and say how to enable it."""
    import os

    from clawgate.gateway.ops.service import (
        UNIT_NAME,
        UnitSpec,
        clawgate_command,
        default_unit_dir,
        enable_commands,
        invoking_user,
        render_unit,
    )
    from clawgate.kernel.config import CONFIG_ENV
    from clawgate.kernel.errors import one_line
    from clawgate.kernel.storage import DiskWriter

    if print_only and directory is not None:
        fail("--print and --dir exclude each other")
    context = cli_context(ctx)
    config = context.file_config()  # the unit runs the gateway, which serves every agent
    # Pinned in the unit only when chosen explicitly; otherwise the service finds the default.
    given = context.config_option or (
        Path(os.environ[CONFIG_ENV]) if os.environ.get(CONFIG_ENV) else None
    )
    spec = UnitSpec(
        command=clawgate_command(),
        config_path=given.expanduser().absolute() if given else None,
        workspace=config.workspace.absolute(),
        data_dir=config.data_dir.absolute(),
        user_mode=user,
        user=invoking_user(),
    )
    unit = render_unit(spec)
    if print_only:
        typer.echo(unit, nl=False)
        _advise(spec, None, enable_commands(user))
        return
    target_dir = (directory.expanduser() if directory else default_unit_dir(user)).absolute()
    path = target_dir / UNIT_NAME
    try:
        target_dir.mkdir(parents=True, exist_ok=True)
        DiskWriter().replace(path, unit, mode=0o644)
    except OSError as exc:
        hint = "" if user else " (run it with sudo, or use --user or --print)"
        fail(f"cannot write {path}: {one_line(exc)}{hint}", code=1)
    typer.echo(f"wrote {path}")
    _advise(spec, path, enable_commands(user))


def _advise(spec: UnitSpec, path: Path | None, commands: list[str]) -> None:
    """Warnings and what to run next; on stderr when the unit itself went to stdout."""
    import os

    err = path is None
    if not spec.user_mode and spec.user == "root":
        typer.echo(
            "warning: the service would run as root (User=root): the assistant's exec tool "
            "and files would have root's powers; run this as the user who should own the "
            "assistant (with sudo, it runs as the user who typed sudo), or use --user",
            err=True,
        )
    if not spec.user_mode and os.environ.get("SUDO_USER") and spec.config_path is None:
        typer.echo(
            f"warning: paths come from the config of the user running this command (HOME "
            f"{Path.home()}), the service runs as {spec.user}; if they differ, pass --config "
            "or use --print as that user",
            err=True,
        )
    for folder, name in ((spec.workspace, "workspace"), (spec.data_dir, "data_dir")):
        if not folder.exists():
            typer.echo(
                f"warning: the {name} {folder} does not exist yet; run `clawgate onboard` "
                "before starting the service",
                err=True,
            )
    if err:
        unit_dir = "~/.config/systemd/user" if spec.user_mode else "/etc/systemd/system"
        typer.echo(f"\nSave it as {unit_dir}/clawgate.service, then:", err=True)
    else:
        typer.echo("\nEnable and start it:")
    for command in commands:
        typer.echo(f"  {command}", err=err)
