"""The daemon's parts for every agent: one runtime per agent, one channel per account."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from clawgate.agent.memory.search import MemorySearch
from clawgate.agent.runtime import AgentRuntime
from clawgate.channels.base import Channel
from clawgate.channels.manager import ChannelStates
from clawgate.gateway.cron.tool import cron_tools
from clawgate.gateway.routing import AccountBus, AgentBus, Router
from clawgate.kernel.bus import MessageBus
from clawgate.kernel.errors import ChannelError


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


def build_accounts(router: Router, bus: MessageBus) -> dict[str, Channel]:
    """A channel per bot, built from the config of the agent it belongs to (its rules, its
    data_dir for state, pairing and groups, its workspace for media), publishing through an
    AccountBus that routes what it receives; a shared bot also knows the workspace of each
    agent it serves, where the files that agent's replies attach are."""
    channels = {}
    for key, account in router.accounts.items():
        served = [name for name in router.agents if key in router.accounts_of(name)]
        channels[key] = create_channel(
            account.platform,
            getattr(account.config.channels, account.platform),
            AccountBus(bus, key, router),
            account.config,
            workspaces={name: router.agents[name].workspace for name in served},
        )
    return channels


def build_runtimes(
    router: Router, bus: MessageBus, states: ChannelStates
) -> list[tuple[AgentRuntime, MessageBus]]:
    """Every agent's runtime, each publishing through its own AgentBus (its name on every
    reply), with the cron tool over its own workspace."""
    built: list[tuple[AgentRuntime, MessageBus]] = []
    searches: dict[str, MemorySearch] = {}
    for name, config in router.agents.items():
        agent_bus = AgentBus(bus, name)
        spec = router.root.agents.get(name)
        shared = SharedMemory(searches, spec.share_memory_from if spec is not None else [])
        runtime = AgentRuntime.build(
            config,
            outbox=agent_bus.publish_outbound,
            channel_status=_channel_status(router, states),
            extra_tools=cron_tools(config),
            shared_memory=shared,
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
