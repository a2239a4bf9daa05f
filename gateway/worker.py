"""A cluster worker: `clawgate gateway` with `[cluster]` (gateway/cluster/). It holds leases
on some of the config's agents and bot accounts. Each agent it holds runs as a gateway of its
own - that agent's runtime, scheduler and dispatcher - fed from the `inbound` table and
replying into `outbound` (cluster/mailbox.py); each bot it holds (or shard of a Discord bot)
polls or connects as on one machine, writes what it receives to `inbound` and sends what waits
for it in `outbound` (cluster/bots.py). This is where the single-machine and the cluster paths part: `serve`
(app.py) runs every agent and bot at once; `serve_worker` runs those this worker is leased.

A bot and its agents may be on different workers, so a bot may serve several agents
(bindings) here as on one machine. The journals, sessions and workspaces live on storage
every worker mounts and carry today's guarantees to the next holder exactly as across a
restart. Before starting an agent or a bot the worker takes its instance lock
(daemon/lock.py) on the shared volume - the agent's data_dir, the bot's channel state
folder - so a worker paused past its lease still keeps the next one out until it has woken,
seen its deadline passed and stopped: two processes never write one agent or poll one bot."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from clawgate.channels.manager import ChannelStates
from clawgate.gateway.app import build_accounts, build_runtimes, dashboard_services
from clawgate.gateway.cluster.bots import BotLease, BotRunner, TableSink, bot_leases, named
from clawgate.gateway.cluster.db import open_pool
from clawgate.gateway.cluster.keeper import LeaseKeeper
from clawgate.gateway.cluster.leases import LEASE_CHANNEL, Lease, agent_resource
from clawgate.gateway.cluster.mailbox import Inbox, Outbox
from clawgate.gateway.cluster.queues import INBOUND_CHANNEL, OUTBOUND_CHANNEL, bot_resource
from clawgate.gateway.cluster.schema import migrate
from clawgate.gateway.cluster.status import ClusterStatus, read_status
from clawgate.gateway.cluster.tables import TableWriter
from clawgate.gateway.cluster.wakeups import Wakeups
from clawgate.gateway.daemon.gateway import Gateway
from clawgate.gateway.daemon.lock import InstanceLock
from clawgate.gateway.daemon.routing import AccountBus, Router
from clawgate.gateway.dashboard.server import Dashboard
from clawgate.gateway.dashboard.web_channel import web_chat
from clawgate.kernel.bus import InboundMessage, MessageBus, OutboundMessage
from clawgate.kernel.config import Config
from clawgate.kernel.config_cluster import ClusterConfig
from clawgate.kernel.errors import ClawgateError
from clawgate.kernel.secrets import Redactor
from clawgate.kernel.storage import make_dirs

if TYPE_CHECKING:
    import asyncpg

log = logging.getLogger(__name__)

# How often a worker that gained an agent or a bot retries its instance lock while the last
# holder (paused, or cut off from the database) has not stopped yet.
LOCK_RETRY_SECONDS = 0.5


def bot_ids(router: Router) -> dict[str, str]:
    """Each bot account's key ("telegram@work") -> its lease and table name."""
    found = {}
    for key, account in router.accounts.items():
        rules = getattr(account.config.channels, account.platform)
        token = rules.token.get_secret_value() if rules.token else key
        found[key] = bot_resource(account.platform, token)
    return found


def leased_bots(router: Router) -> dict[str, BotLease]:
    """Each bot lease -> what it covers: a bot whole, or one shard of a Discord bot."""
    found: dict[str, BotLease] = {}
    for key, bot in bot_ids(router).items():
        account = router.accounts[key]
        shards = account.config.channels.discord.shards if account.platform == "discord" else 1
        found.update((lease.resource, lease) for lease in bot_leases(key, bot, shards))
    return found


class TableBus(AccountBus):
    """A leased bot's bus: each message routed to its agent as on one machine, then stored in
    `inbound`; the channel's own notices queued in `outbound`."""

    def __init__(self, account: str, router: Router, sink: TableSink) -> None:
        super().__init__(MessageBus(), account, router)
        self._sink = sink

    async def publish_inbound(self, message: InboundMessage) -> None:
        await self._sink.inbound(await self.routed(message))

    async def publish_outbound(self, message: OutboundMessage) -> None:
        await self._sink.outbound(message)


@dataclass(frozen=True)
class WorkerDashboard:
    """What a worker that comes to hold the default agent serves its dashboard with."""

    config_path: Path | None
    view: Callable[[], Awaitable[ClusterStatus]]  # the cluster, for the health page


def cluster_view(
    pool: asyncpg.Pool, lease_seconds: float, bots: dict[str, str]
) -> Callable[[], Awaitable[ClusterStatus]]:
    """The cluster as `clawgate cluster status` shows it, each bot named by its account in
    this config (`bots`: account key -> the bot's table name)."""
    accounts = {bot: key for key, bot in bots.items()}

    async def view() -> ClusterStatus:
        status = await read_status(pool, lease_seconds)
        return status.model_copy(
            update={
                "leases": [
                    row.model_copy(update={"resource": named(row.resource, accounts)})
                    for row in status.leases
                ],
                "backlog": [
                    row.model_copy(update={"name": named(row.name, accounts)})
                    for row in status.backlog
                ],
            }
        )

    return view


class Leased:
    """The LeaseHolder of a worker: a gateway per agent leased, a BotRunner per bot."""

    def __init__(
        self,
        router: Router,
        cluster: ClusterConfig,
        pool: asyncpg.Pool,
        wakeups: Wakeups,
        dashboard: WorkerDashboard | None = None,
    ) -> None:
        """`dashboard`: given when the config enables it (served with the default agent)."""
        self._dashboard = dashboard
        self._router = router
        self._cluster = cluster
        self._pool = pool
        self._wakeups = wakeups
        self.bots = bot_ids(router)
        self._bot_leases = leased_bots(router)
        self._running: dict[str, asyncio.Task[None]] = {}

    def resources(self) -> list[str]:
        return [agent_resource(name) for name in self._router.agents] + sorted(self._bot_leases)

    async def gained(self, lease: Lease) -> None:
        if lease.resource.startswith("agent:"):
            name = lease.resource.removeprefix("agent:")
            lock_dir = self._router.agents[name].data_dir
            work = self._serve_agent(name, lease)
        else:
            bot = self._bot_leases[lease.resource]
            account = self._router.accounts[bot.key]
            lock_dir = bot.state_dir(account.config.data_dir / "channels" / account.platform)
            work = self._serve_bot(bot, lease)
        self._running[lease.resource] = asyncio.create_task(
            self._run(lease.resource, lock_dir, work), name=lease.resource
        )

    async def lost(self, resource: str) -> None:
        task = self._running.pop(resource, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(
        self, resource: str, lock_dir: Path, work: Callable[[], Awaitable[None]]
    ) -> None:
        lock = InstanceLock(lock_dir)
        make_dirs(lock_dir)
        await lock.acquire_when_free(LOCK_RETRY_SECONDS)
        try:
            while True:
                try:
                    await work()
                except ClawgateError as exc:
                    # A refused token, an unreachable platform, a write fenced off while the
                    # keeper has yet to see the lease gone: tried again while the lease
                    # lasts, as a single gateway's supervisor would.
                    log.error("%s could not run here: %s", resource, exc)
                except Exception:
                    log.exception("%s stopped on an error; starting it again", resource)
                await asyncio.sleep(self._cluster.lease_seconds)
        finally:
            lock.release()

    def _serve_agent(self, name: str, lease: Lease) -> Callable[[], Awaitable[None]]:
        async def serve() -> None:
            """Run the agent's gateway until cancelled (the lease lost), then stop it."""
            config = self._router.agents[name]
            bus = MessageBus()
            states = ChannelStates()
            tables = TableWriter(self._pool, lease)
            outboxes = {
                key: Outbox(self._router.accounts[key].platform, self.bots[key], name, tables)
                for key in self._router.accounts_of(name)
            }
            runtimes = build_runtimes(self._router, bus, states, names=[name])
            # The dashboard follows the default agent: its holder serves it (with the web
            # chat, which talks to that agent here) and the whole cluster on its health page.
            serves_dashboard = (
                self._dashboard is not None and name == self._router.root.default_agent
            )
            web = AccountBus(bus, "web", self._router)
            chats = web_chat(config, web, [runtimes[0][0]]) if serves_dashboard else []
            gateway = Gateway(
                runtimes,
                {**outboxes, **{channel.name: channel for channel in chats}},
                bus,
                router=self._router,
                channel_states=states,
                scheduler=True,
            )
            await gateway.start()
            dashboard = None
            try:
                if serves_dashboard:
                    assert self._dashboard is not None
                    dashboard = Dashboard(
                        dashboard_services(
                            gateway, self._dashboard.config_path, cluster=self._dashboard.view
                        )
                    )
                    await dashboard.start()
                log.info("agent %s running here (lease generation %d)", name, lease.generation)
                await Inbox(name, tables, bus, self._wakeups).run()
            finally:
                # Inside the time the lease has left once its deadline passed.
                grace = min(config.agent.shutdown_grace_seconds, self._cluster.renew_seconds / 2)
                if dashboard is not None:
                    await asyncio.shield(dashboard.stop())
                await asyncio.shield(gateway.stop(grace=grace))
                log.info("agent %s stopped here", name)

        return serve

    def _serve_bot(self, bot: BotLease, lease: Lease) -> Callable[[], Awaitable[None]]:
        async def serve() -> None:
            key = bot.key
            account = self._router.accounts[key]
            sink = TableSink(bot.bot, TableWriter(self._pool, lease))
            channels = build_accounts(
                self._router,
                MessageBus(),
                keys=[key],
                bus_for=lambda k: TableBus(k, self._router, sink),
                options=bot.channel_options(
                    account.config.data_dir / "channels" / account.platform
                ),
            )
            runner = BotRunner(
                key,
                channels[key],
                sink,
                wakeups=self._wakeups,
                redact=Redactor(account.config.secrets()),
                sends=bot.sends,
            )
            log.info("bot %s running here (lease generation %d)", bot.label, lease.generation)
            try:
                await runner.run()
            finally:
                log.info("bot %s stopped here", bot.label)

        return serve


async def serve_worker(config: Config, config_path: Path | None = None) -> None:
    """Run as a cluster worker until SIGINT or SIGTERM; the agents and bots held are handed
    back. `config_path`: the file `config` came from (the dashboard's doctor reads it)."""
    cluster = config.cluster
    assert cluster is not None
    router = Router(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    pool = await open_pool(cluster)
    try:
        version = await migrate(pool)
        wakeups = Wakeups(
            cluster,
            (LEASE_CHANNEL, INBOUND_CHANNEL, OUTBOUND_CHANNEL),
            poll_seconds=cluster.renew_seconds,
        )
        bots = bot_ids(router)
        dashboard = (
            WorkerDashboard(config_path, cluster_view(pool, cluster.lease_seconds, bots))
            if config.dashboard.enabled
            else None
        )
        holder = Leased(router, cluster, pool, wakeups, dashboard)
        keeper = LeaseKeeper(
            pool,
            cluster.worker_name,
            holder.resources(),
            holder,
            lease_seconds=cluster.lease_seconds,
            renew_seconds=cluster.renew_seconds,
            wakeups=wakeups,
        )
        log.info(
            "cluster worker %s running (schema %d, %d agents and %d bots in the config); "
            "Ctrl-C to stop",
            cluster.worker_name,
            version,
            len(router.agents),
            len(holder.bots),
        )
        async with asyncio.TaskGroup() as tasks:
            listening = tasks.create_task(wakeups.run(), name="cluster wake-ups")
            keeping = tasks.create_task(keeper.run(), name="cluster leases")
            await stop.wait()
            log.info("shutting down: handing the agents and bots back")
            keeping.cancel()
            listening.cancel()
    finally:
        await pool.close()
    log.info("stopped")
