"""A cluster worker: `clawgate gateway` with `[cluster]` (gateway/cluster/). It holds leases
on some of the config's agents, and runs each one it holds as a gateway of its own - that
agent's runtime, scheduler and bots - started when the lease is gained and stopped before it
can expire. This is where the single-machine and the cluster paths part: `serve` (app.py)
runs every agent at once; `serve_worker` runs those this worker is leased.

An agent and the bots only it uses are one unit, leased together: the bot's pending updates
wait at the platform, and the agent's journal and session files (on storage every worker
mounts) carry today's guarantees to the next holder exactly as across a restart. A bot that
several agents share cannot be leased with one of them: such a config is refused here.
Before starting an agent the worker takes that agent's instance lock (daemon/lock.py) on the
shared volume, so a worker paused past its lease still keeps the next one out until it has
woken, seen its deadline passed and stopped: two processes never write one agent."""

from __future__ import annotations

import asyncio
import logging
import signal

from clawgate.channels.manager import ChannelStates
from clawgate.gateway.app import build_accounts, build_runtimes
from clawgate.gateway.cluster.db import open_pool
from clawgate.gateway.cluster.keeper import LeaseKeeper
from clawgate.gateway.cluster.leases import LEASE_CHANNEL, Lease, agent_resource
from clawgate.gateway.cluster.schema import migrate
from clawgate.gateway.cluster.wakeups import Wakeups
from clawgate.gateway.daemon.gateway import Gateway
from clawgate.gateway.daemon.lock import InstanceLock
from clawgate.gateway.daemon.routing import Router
from clawgate.kernel.bus import MessageBus
from clawgate.kernel.config import Config
from clawgate.kernel.config_cluster import ClusterConfig
from clawgate.kernel.errors import ClawgateError, ConfigError, LockHeld
from clawgate.kernel.storage import make_dirs

log = logging.getLogger(__name__)

# How often a worker that gained an agent retries its instance lock while the last holder
# (paused, or cut off from the database) has not stopped yet.
LOCK_RETRY_SECONDS = 0.5


def check_leasable(router: Router) -> None:
    """Every bot serves one agent: the unit a worker leases."""
    for key in router.accounts:
        served = [name for name in router.agents if key in router.accounts_of(name)]
        if len(served) > 1:
            raise ConfigError(
                f"[cluster]: the bot {key} serves agents {', '.join(served)}; in a cluster each "
                "bot serves one agent (give each agent its own bot, or run without [cluster])"
            )


class AgentGateways:
    """The LeaseHolder of a worker: one gateway per agent leased."""

    def __init__(self, router: Router, cluster: ClusterConfig) -> None:
        self._router = router
        self._cluster = cluster
        self._running: dict[str, asyncio.Task[None]] = {}

    async def gained(self, lease: Lease) -> None:
        name = lease.resource.removeprefix("agent:")
        self._running[lease.resource] = asyncio.create_task(
            self._run(name, lease.generation), name=f"agent {name}"
        )

    async def lost(self, resource: str) -> None:
        task = self._running.pop(resource, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self, name: str, generation: int) -> None:
        config = self._router.agents[name]
        lock = InstanceLock(config.data_dir)
        make_dirs(config.data_dir)
        while True:
            try:
                lock.acquire()
                break
            except LockHeld:
                await asyncio.sleep(LOCK_RETRY_SECONDS)
        try:
            while True:
                try:
                    await self._serve(name, generation)
                except ClawgateError as exc:
                    # A refused token, an unreachable platform: tried again while the lease
                    # lasts, as a single gateway's supervisor would.
                    log.error("agent %s could not start here: %s", name, exc)
                    await asyncio.sleep(self._cluster.lease_seconds)
        finally:
            lock.release()

    async def _serve(self, name: str, generation: int) -> None:
        """Run the agent's gateway until cancelled (the lease lost), then stop it."""
        config = self._router.agents[name]
        bus = MessageBus()
        states = ChannelStates()
        gateway = Gateway(
            build_runtimes(self._router, bus, states, names=[name]),
            build_accounts(self._router, bus, keys=self._router.accounts_of(name)),
            bus,
            router=self._router,
            channel_states=states,
            scheduler=True,
        )
        await gateway.start()
        try:
            log.info("agent %s running here (lease generation %d)", name, generation)
            await asyncio.Event().wait()
        finally:
            # Inside the time the lease has left once its deadline passed.
            grace = min(config.agent.shutdown_grace_seconds, self._cluster.renew_seconds / 2)
            await asyncio.shield(gateway.stop(grace=grace))
            log.info("agent %s stopped here", name)


async def serve_worker(config: Config) -> None:
    """Run as a cluster worker until SIGINT or SIGTERM; the agents held are handed back."""
    cluster = config.cluster
    assert cluster is not None
    router = Router(config)
    check_leasable(router)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    pool = await open_pool(cluster)
    try:
        version = await migrate(pool)
        wakeups = Wakeups(cluster, (LEASE_CHANNEL,), poll_seconds=cluster.renew_seconds)
        keeper = LeaseKeeper(
            pool,
            cluster.worker_name,
            [agent_resource(name) for name in router.agents],
            AgentGateways(router, cluster),
            lease_seconds=cluster.lease_seconds,
            renew_seconds=cluster.renew_seconds,
            wakeups=wakeups,
        )
        log.info(
            "cluster worker %s running (schema %d, %d agents in the config); Ctrl-C to stop",
            cluster.worker_name,
            version,
            len(router.agents),
        )
        async with asyncio.TaskGroup() as tasks:
            listening = tasks.create_task(wakeups.run(), name="cluster wake-ups")
            keeping = tasks.create_task(keeper.run(), name="cluster leases")
            await stop.wait()
            log.info("shutting down: handing the agents back")
            keeping.cancel()
            listening.cancel()
    finally:
        await pool.close()
    log.info("stopped")
