"""The composition root: builds every part of a gateway from the config - one runtime per
agent, one channel per bot account, the terminal's control socket, the dashboard's web chat
and pages - and hands them to the daemon (`Gateway`) and the dashboard. Nothing below this
module builds a Gateway's parts or imports the Gateway; `clawgate gateway` calls `serve`.

`serve` builds, in order: the bus; the `Router` (daemon/routing.py, from the whole config);
`ChannelStates`, which the manager keeps current and /status reads; one runtime per agent
(`build_runtimes`: each publishes through its own `AgentBus`, which stamps the agent's name
on every reply, with the `cron` tool over that agent's workspace); one channel per bot
account (`build_accounts`, each publishing through an `AccountBus`); the control socket and,
when the dashboard is on, the web chat channel; then the `Gateway`, and the `Dashboard`
before the gateway starts (so a host that is not loopback, without a token, stops the
start). The dashboard starts after the gateway and stops before it. When every chat channel
refused its token the daemon stops with `CredentialsRejected` (exit code 2)."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawgate.agent.memory.search import MemorySearch
from clawgate.agent.runtime import AgentRuntime
from clawgate.agent.tools.mcp_hub import McpHub
from clawgate.agent.tools.shell import forbid_environ_reads
from clawgate.channels.base import Channel
from clawgate.channels.manager import ChannelStates
from clawgate.gateway.cron.targets import default_target
from clawgate.gateway.cron.tool import cron_tools
from clawgate.gateway.daemon.control import ControlChannel
from clawgate.gateway.daemon.gateway import Gateway
from clawgate.gateway.daemon.routing import AccountBus, AgentBus, Router
from clawgate.gateway.dashboard.auth import Auth
from clawgate.gateway.dashboard.restart import Restarts
from clawgate.gateway.dashboard.server import Dashboard
from clawgate.gateway.dashboard.services import DashboardServices
from clawgate.gateway.dashboard.web_channel import web_chat
from clawgate.kernel.bus import MessageBus
from clawgate.kernel.config import Config
from clawgate.kernel.errors import ChannelError, CredentialsRejected, CronError

if TYPE_CHECKING:
    from clawgate.gateway.cluster.status import ClusterStatus

log = logging.getLogger(__name__)


def create_channel(
    platform: str, channel_config: Any, bus: MessageBus, config: Any, **options: Any
) -> Channel:
    """One chat channel. Its library is imported only here."""
    try:
        module = __import__(f"clawgate.channels.{platform}", fromlist=["create_channel"])
    except ImportError:
        raise ChannelError(f"channel {platform!r} is not available in this version") from None
    channel: Channel = module.create_channel(channel_config, bus, config, **options)
    return channel


def owner_chat_of(config: Config) -> Callable[[], str]:
    """Where an agent's budget notices go: `heartbeat.deliver_to`, else the owner's private
    chat when exactly one is known (cron's default target); "" (logged only) otherwise."""

    def find() -> str:
        try:
            return default_target(config)
        except CronError:
            return ""

    return find


def build_accounts(
    router: Router,
    bus: MessageBus,
    keys: Collection[str] | None = None,
    *,
    bus_for: Callable[[str], MessageBus] | None = None,
    options: Mapping[str, Any] | None = None,
) -> dict[str, Channel]:
    """A channel per bot (of `keys` only, when given), built from the config of the agent it
    belongs to (its rules, its data_dir for state, pairing and groups, its workspace for
    media), publishing through an AccountBus that routes what it receives (or the bus
    `bus_for(key)` gives: a cluster worker's goes to the database); a shared bot also knows
    the workspace of each agent it serves, where the files that agent's replies attach are;
    `options` go to each channel built (a cluster worker's: which Discord shard it is)."""
    channels = {}
    for key, account in router.accounts.items():
        if keys is not None and key not in keys:
            continue
        served = [name for name in router.agents if key in router.accounts_of(name)]
        channels[key] = create_channel(
            account.platform,
            getattr(account.config.channels, account.platform),
            AccountBus(bus, key, router) if bus_for is None else bus_for(key),
            account.config,
            workspaces={name: router.agents[name].workspace for name in served},
            **(options or {}),
        )
    return channels


def build_runtimes(
    router: Router,
    bus: MessageBus,
    states: ChannelStates,
    mcp: McpHub | None = None,
    names: Collection[str] | None = None,
) -> list[tuple[AgentRuntime, MessageBus]]:
    """Every agent's runtime (of `names` only, when given), each publishing through its own AgentBus (its name on every
    reply), with the cron tool over its own workspace and the MCP servers' tools."""
    built: list[tuple[AgentRuntime, MessageBus]] = []
    searches: dict[str, MemorySearch] = {}
    for name, config in router.agents.items():
        if names is not None and name not in names:
            continue
        agent_bus = AgentBus(bus, name)
        spec = router.root.agents.get(name)
        shared = SharedMemory(searches, spec.share_memory_from if spec is not None else [])
        runtime = AgentRuntime.build(
            config,
            outbox=agent_bus.publish_outbound,
            channel_status=_channel_status(router, states),
            extra_tools=cron_tools(config),
            tool_sources=[mcp] if mcp is not None else [],
            shared_memory=shared,
            owner_chat=owner_chat_of(config),
        )
        searches[name] = runtime.search
        built.append((runtime, agent_bus))
    return built


class SharedMemory(Mapping[str, MemorySearch]):
    """The memory searches of the agents one agent may read (`share_memory_from`), by name:
    the other agent's own MemorySearch, so one index has one writer in the process. A view
    over every agent's search, complete once all runtimes are built."""

    def __init__(self, searches: Mapping[str, MemorySearch], names: Sequence[str]) -> None:
        self._searches = searches
        self._names = list(names)

    def __getitem__(self, name: str) -> MemorySearch:
        if name not in self._names:
            raise KeyError(name)
        return self._searches[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def _channel_status(router: Router, states: ChannelStates) -> Any:
    """/status's channel list: each account with the agents it serves, once several agents
    share the gateway (with one, the plain list of today)."""
    if len(router.agents) == 1:
        return states.snapshot

    def snapshot() -> dict[str, dict[str, Any]]:
        served: dict[str, list[str]] = {}
        for agent in router.agents:
            for key in router.accounts_of(agent):
                served.setdefault(key, []).append(agent)
        return {
            f"{key} (agent {', '.join(served[key])})" if key in served else key: info
            for key, info in states.snapshot().items()
        }

    return snapshot


def build_channels(config: Config, bus: MessageBus) -> list[Channel]:
    """Instantiate the enabled chat channels of one agent's config."""
    return [
        create_channel(name, channel_config, bus, config)
        for name, channel_config in config.channels
        if channel_config.enabled
    ]


async def serve(config: Config, config_path: Path | None = None) -> None:
    """Run the gateway, with every agent of the config, until SIGINT or SIGTERM; built again
    from the config file each time the dashboard asks for a restart (its logins kept).
    `config_path`: the file `config` came from (the dashboard edits it)."""
    forbid_environ_reads()  # exec'd commands must not read our environment or memory
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    restarts = Restarts()
    auth: Auth | None = None
    while True:
        auth = await _run(config, config_path, stop, restarts, auth)
        fresh = restarts.take()
        if fresh is None or stop.is_set():
            return
        log.info("restarting with the config file as it is now (asked from the dashboard)")
        config = fresh


async def _run(
    config: Config,
    config_path: Path | None,
    stop: asyncio.Event,
    restarts: Restarts,
    auth: Auth | None,
) -> Auth:
    """One run of the gateway, until `stop` or a restart is asked for; its dashboard's
    logins, for the next run."""
    bus = MessageBus()
    router = Router(config)
    # /status reports the channel states, which the manager (built after the runtimes, since
    # it records deliveries through them) keeps current.
    channel_states = ChannelStates()
    # The MCP servers are the gateway's: every agent is offered their tools.
    mcp = McpHub(config.mcp)
    runtimes = build_runtimes(router, bus, channel_states, mcp)
    chats = build_accounts(router, bus)
    default = next(r for r, _ in runtimes if r.config.agent_name == config.default_agent)
    gateway = Gateway(
        runtimes,
        # The control socket is the terminal's channel: `clawgate agent` talks through it.
        {
            **chats,
            "cli": ControlChannel(
                AccountBus(bus, "cli", router), config.data_dir, config.default_agent
            ),
            # The dashboard's chat talks to the agent its page has chosen.
            **{
                channel.name: channel
                for channel in web_chat(
                    config,
                    AccountBus(bus, "web", router),
                    [default, *(r for r, _ in runtimes if r is not default)],
                )
            },
        },
        bus,
        router=router,
        channel_states=channel_states,
        scheduler=True,
        daemon=True,
        mcp=mcp,
    )
    services = dashboard_services(gateway, config_path, auth=auth, restarts=restarts)
    dashboard = Dashboard(services)
    await gateway.start()
    rejected = gateway.manager.rejected()
    if rejected and len(rejected) == len(chats):
        # Every chat channel refused its token: a daemon nobody can reach from a chat should
        # not look healthy. With another chat channel up, the rejected one shows in status.
        await gateway.stop()
        raise CredentialsRejected("; ".join(rejected.values()))
    await dashboard.start()
    for name, unit in gateway.units.items():
        log.info(
            "agent %s: workspace %s, channels %s",
            name,
            unit.runtime.config.workspace,
            ", ".join(router.accounts_of(name)) or "none",
        )
    log.info(
        "gateway running (workspace %s); Ctrl-C to stop", gateway.default.runtime.config.workspace
    )
    try:
        ended = [asyncio.create_task(stop.wait()), asyncio.create_task(restarts.wanted.wait())]
        try:
            await asyncio.wait(ended, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in ended:
                task.cancel()
    finally:
        log.info("shutting down: finishing in-flight turns")
        await dashboard.stop()
        await gateway.stop(grace=config.agent.shutdown_grace_seconds)
        log.info("stopped")
    return services.auth


def dashboard_services(
    gateway: Gateway,
    config_path: Path | None = None,
    *,
    auth: Auth | None = None,
    restarts: Restarts | None = None,
    cluster: Callable[[], Awaitable[ClusterStatus]] | None = None,
) -> DashboardServices:
    """What the dashboard's pages reach: each agent's running parts, the default's first;
    `auth`: the logins to keep from the run before a restart; `cluster`: a cluster worker's
    view of the cluster, for the health page."""
    default = gateway.default
    services = DashboardServices.build(
        default.runtime,
        gateway.bus,
        manager=gateway.manager,
        dispatcher=default.dispatcher,
        scheduler=default.scheduler,
        config_path=config_path,
        mcp=gateway.mcp,
        auth=auth,
        restarts=restarts,
        cluster=cluster,
        pending_approvals=lambda: sum(
            len(unit.runtime.approvals.pending()) for unit in gateway.units.values()
        ),
    )
    return services.with_agents(list(gateway.units.values()))
