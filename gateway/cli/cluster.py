"""`clawgate cluster status` and `clawgate cluster drain WORKER`: the cluster as its database
sees it (gateway/cluster/status.py), from any machine with the config. Its help is in
root.COMMANDS."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from clawgate.gateway.cli.context import cli_context, fail

if TYPE_CHECKING:
    from clawgate.kernel.config_cluster import ClusterConfig

cluster_app = typer.Typer(no_args_is_help=True)


def _cluster(ctx: typer.Context) -> ClusterConfig:
    cluster = cli_context(ctx).file_config().cluster
    if cluster is None:
        fail("this config has no [cluster] section: the gateway runs on one machine")
    return cluster


def _bot_names(ctx: typer.Context) -> dict[str, str]:
    from clawgate.gateway.daemon.routing import Router
    from clawgate.gateway.worker import bot_ids

    return {bot: key for key, bot in bot_ids(Router(cli_context(ctx).file_config())).items()}


@cluster_app.command("status")
def cluster_status(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="The status as one JSON object.")] = False,
) -> None:
    """Workers (live, draining); each agent's and bot's lease (its worker, generation, time
    left) and backlog (messages not yet consumed, replies not yet sent)."""
    import asyncio

    from clawgate.gateway.cli.pairing import print_table
    from clawgate.gateway.cluster.bots import named
    from clawgate.gateway.cluster.db import open_pool
    from clawgate.gateway.cluster.schema import migrate
    from clawgate.gateway.cluster.status import ClusterStatus, read_status

    cluster = _cluster(ctx)
    names = _bot_names(ctx)

    async def read() -> ClusterStatus:
        pool = await open_pool(cluster)
        try:
            await migrate(pool)
            return await read_status(pool, cluster.lease_seconds)
        finally:
            await pool.close()

    status = asyncio.run(read())
    if as_json:
        typer.echo(status.model_dump_json())
        return
    typer.echo(f"schema {status.schema_version}; workers:")
    print_table(
        ("worker", "state", "last seen"),
        [
            (
                w.name,
                "draining" if w.draining else ("live" if w.live else "gone"),
                f"{w.seen_seconds_ago:.1f} s ago",
            )
            for w in status.workers
        ],
    )
    typer.echo("leases:")
    print_table(
        ("resource", "worker", "generation", "expires"),
        [
            (
                named(lease.resource, names),
                lease.worker or "-",
                str(lease.generation),
                f"in {lease.expires_in_seconds:.1f} s"
                if lease.expires_in_seconds > 0
                else "expired",
            )
            for lease in status.leases
        ],
    )
    typer.echo("backlog (messages not yet consumed, replies not yet sent):")
    print_table(
        ("agent or bot", "inbound", "outbound"),
        [(named(row.name, names), str(row.inbound), str(row.outbound)) for row in status.backlog],
    )


@cluster_app.command("drain")
def cluster_drain(
    ctx: typer.Context,
    worker: Annotated[str, typer.Argument(help="The worker_name of the worker to drain.")],
    wait: Annotated[
        float, typer.Option("--wait", help="Seconds to wait until it holds nothing (0: return).")
    ] = 60.0,
) -> None:
    """Hand a worker's agents and bots over to the other workers; it keeps running, idle,
    until stopped (a restart makes it take work again)."""
    import asyncio
    import time

    from clawgate.gateway.cluster.db import open_pool
    from clawgate.gateway.cluster.status import held_by, set_draining

    cluster = _cluster(ctx)

    async def drain() -> list[str]:
        pool = await open_pool(cluster)
        try:
            await set_draining(pool, worker)
            deadline = time.monotonic() + wait
            while True:
                held = await held_by(pool, worker)
                if not held or time.monotonic() >= deadline:
                    return held
                await asyncio.sleep(min(0.5, cluster.renew_seconds))
        finally:
            await pool.close()

    held = asyncio.run(drain())
    if held:
        fail(f"{worker} still holds {', '.join(held)}", code=1)
    typer.echo(f"{worker} is drained: its agents and bots run on the other workers")
