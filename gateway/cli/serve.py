"""`clawgate gateway`: check the setup, take the instance lock, start logging and run the
daemon that app.py composes. Its help line is in root.COMMANDS."""

from __future__ import annotations

from typing import Annotated

import typer

from clawgate.gateway.cli.context import cli_context, fail


def gateway(
    ctx: typer.Context,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
    log_json: Annotated[
        bool, typer.Option("--log-json", help="Log one JSON object per line (stderr and file).")
    ] = False,
) -> None:
    import asyncio
    import os

    from clawgate.gateway.app import serve
    from clawgate.gateway.daemon.heap import keep_large_blocks_mapped
    from clawgate.gateway.daemon.lock import InstanceLock
    from clawgate.gateway.ops.doctor import missing_keys
    from clawgate.gateway.ops.logs import setup_logging
    from clawgate.gateway.setup.onboard import missing_setup, prepare_workspace
    from clawgate.gateway.worker import serve_worker
    from clawgate.kernel.storage import make_dirs

    keep_large_blocks_mapped()
    # Every agent: the daemon serves them all, so no --agent here.
    config = cli_context(ctx).file_config()
    problems = missing_setup(config) + missing_keys(config, os.environ)
    if problems:
        # All at once, one a line: a newcomer fixes the config in one go.
        typer.echo("clawgate: not ready to start:", err=True)
        for problem in problems:
            typer.echo(f"  - {problem}", err=True)
        fail("`clawgate onboard` asks for each of these, or set them in the config.")
    # A cluster worker locks its own folder (each agent's lock is taken where it runs) and
    # logs there: several workers may share one data_dir on a shared volume.
    own_dir = config.data_dir
    if config.cluster is not None:
        own_dir = config.data_dir / "workers" / config.cluster.worker_name
        make_dirs(own_dir)
    lock = InstanceLock(own_dir)
    # A terminal session ends: a gateway started meanwhile (e.g. by systemd) waits for it.
    lock.acquire(
        wait_for_agent=lambda holder: typer.echo(
            f"clawgate: waiting for {holder.describe()} to quit before starting", err=True
        )
    )
    try:
        # Inside the lock: a refused second gateway must not write (or rotate) the log.
        setup_logging(
            config.logging,
            own_dir,
            json=log_json or config.logging.json_format,
            verbose=verbose,
            secrets=config.secrets(),
        )
        if prepare_workspace(config.workspace):
            typer.echo(
                f"clawgate: {config.workspace} had no workspace files: created them as "
                "`clawgate onboard` does. Edit AGENTS.md, SOUL.md and USER.md there.",
                err=True,
            )
        if config.cluster is not None:
            asyncio.run(serve_worker(config, cli_context(ctx).config_path))
        else:
            asyncio.run(serve(config, cli_context(ctx).config_path))
    finally:
        lock.release()
