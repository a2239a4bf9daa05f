"""The daemon's parts for every agent: one runtime per agent, one channel per account."""

from __future__ import annotations

from typing import Any

from clawgate.agent.runtime import AgentRuntime
from clawgate.channels.base import Channel
from clawgate.channels.manager import ChannelStates
from clawgate.gateway.cron.tool import cron_tools
from clawgate.gateway.routing import AccountBus, AgentBus, Router
from clawgate.kernel.bus import MessageBus
from clawgate.kernel.errors import ChannelError


def create_channel(platform: str, channel_config: Any, bus: MessageBus, config: Any) -> Channel:
    """One chat channel. Its library is imported only here."""
    try:
        module = __import__(f"clawgate.channels.{platform}", fromlist=["create_channel"])
    except ImportError:
        raise ChannelError(f"channel {platform!r} is not available in this version") from None
    channel: Channel = module.create_channel(channel_config, bus, config)
    return channel


def build_accounts(router: Router, bus: MessageBus) -> dict[str, Channel]:
    """A channel per bot, built from the config of the agent it belongs to (its rules, its
    data_dir for state, pairing and groups, its workspace for media), publishing through an
    AccountBus that routes what it receives."""
    return {
        key: create_channel(
            account.platform,
            getattr(account.config.channels, account.platform),
            AccountBus(bus, key, router),
            account.config,
        )
        for key, account in router.accounts.items()
    }


def build_runtimes(
    router: Router, bus: MessageBus, states: ChannelStates
) -> list[tuple[AgentRuntime, MessageBus]]:
    """Every agent's runtime, each publishing through its own AgentBus (its name on every
    reply), with the cron tool over its own workspace."""
    built: list[tuple[AgentRuntime, MessageBus]] = []
    for name, config in router.agents.items():
        agent_bus = AgentBus(bus, name)
        runtime = AgentRuntime.build(
            config,
            outbox=agent_bus.publish_outbound,
            channel_status=_channel_status(router, states),
            extra_tools=cron_tools(config),
        )
        built.append((runtime, agent_bus))
    return built


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
