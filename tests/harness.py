"""An in-process gateway for tests: a recording channel on the real bus, dispatcher and loop."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from clawgate.agent.llm import LLMClient
from clawgate.agent.runtime import AgentRuntime
from clawgate.agent.tools import Tool
from clawgate.agent.tools.mcp_hub import McpHub
from clawgate.channels.base import Channel
from clawgate.channels.manager import ChannelStates
from clawgate.gateway.app import build_runtimes
from clawgate.gateway.daemon.gateway import Gateway
from clawgate.gateway.daemon.routing import AgentBus, Router
from clawgate.gateway.setup.onboard import onboard
from clawgate.kernel.bus import InboundMessage, MessageBus, OutboundMessage, Trust
from clawgate.kernel.clock import SYSTEM_CLOCK, Clock
from clawgate.kernel.config import AgentConfig, Config, ToolsConfig
from clawgate.kernel.storage import DiskWriter


class RecordingChannel(Channel):
    """Stands in for a chat platform: tests inject messages and read what was sent."""

    name = "test"

    def __init__(self, bus: MessageBus) -> None:
        super().__init__(bus)
        self.sent: dict[str, asyncio.Queue[OutboundMessage]] = {}

    def _queue(self, chat_id: str) -> asyncio.Queue[OutboundMessage]:
        return self.sent.setdefault(chat_id, asyncio.Queue())

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def send(self, message: OutboundMessage) -> None:
        self._queue(message.chat_id).put_nowait(message)

    async def say(
        self,
        text: str,
        *,
        chat_id: str = "1",
        trust: Trust = Trust.OWNER,
        sender: str = "Ann",
        message_id: str | None = None,
    ) -> None:
        """`message_id`: the platform's id, e.g. the same one again for a re-delivery."""
        await self.bus.publish_inbound(
            InboundMessage(
                channel=self.name,
                chat_id=chat_id,
                message_id=message_id or uuid.uuid4().hex,
                sender_id=sender.lower(),
                sender_name=sender,
                text=text,
                trust=trust,
                mentioned=True,
            )
        )

    async def next_reply(self, chat_id: str = "1", timeout: float = 10) -> OutboundMessage:
        return await asyncio.wait_for(self._queue(chat_id).get(), timeout)


async def wait_until(predicate: Callable[[], bool], timeout: float = 20) -> None:
    """Block until `predicate()` holds, checking every few ms; TimeoutError after `timeout`.

    Only for state with no event to wait on (e.g. "the turn reached its tool call").
    """
    async with asyncio.timeout(timeout):
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0.005)


def make_config(tmp_path: Path, agent: AgentConfig, **overrides: object) -> Config:
    # Tests about other things run exec unasked; tests/test_exec_approval.py asks.
    overrides.setdefault("tools", ToolsConfig(exec_approval="never"))
    config = Config(
        workspace=tmp_path / "workspace", data_dir=tmp_path / "data", agent=agent, **overrides
    )
    onboard(tmp_path / "data" / "config.toml", workspace=config.workspace)
    return config


class Harness:
    def __init__(
        self,
        config: Config,
        writer: DiskWriter | None = None,
        extra_tools: Sequence[Tool] = (),
        extra_channels: Callable[[MessageBus, Sequence[AgentRuntime]], Sequence[Channel]]
        | None = None,
        llm: LLMClient | None = None,
        clock: Clock = SYSTEM_CLOCK,
        mcp: McpHub | None = None,
        owner_chat: Callable[[], str] | None = None,
        **gateway_options: Any,
    ) -> None:
        """`extra_channels(bus, runtimes)`: channels to run beside the recording one (the
        runtimes: the default agent's first); `llm`:
        the model client, when not the one the config describes (a FunctionModel's);
        `clock`: the runtime's (the budget's days); `mcp`: MCP servers the gateway runs and
        the runtime offers the tools of; `owner_chat`: where budget notices go."""
        self.config = config
        self.bus = MessageBus()
        self.channel = RecordingChannel(self.bus)
        # With several agents, the default one's replies carry its name, as in the daemon.
        own_bus = AgentBus(self.bus, config.default_agent) if config.agents else self.bus
        self.runtime = AgentRuntime.build(
            config,
            writer=writer,
            extra_tools=extra_tools,
            tool_sources=[mcp] if mcp is not None else [],
            outbox=own_bus.publish_outbound,
            llm=llm,
            clock=clock,
            owner_chat=owner_chat,
        )
        agents: list[tuple[AgentRuntime, MessageBus]] = [(self.runtime, own_bus)]
        if config.agents:
            # The other agents built as the daemon builds them (from the config alone).
            router = Router(config)
            others = build_runtimes(router, self.bus, ChannelStates(), mcp)
            agents += [(r, b) for r, b in others if r.config.agent_name != config.default_agent]
            gateway_options["router"] = router
        self.runtimes = [runtime for runtime, _ in agents]
        more = extra_channels(self.bus, self.runtimes) if extra_channels is not None else ()
        self.gateway = Gateway(agents, [self.channel, *more], self.bus, mcp=mcp, **gateway_options)

    @property
    def workspace(self) -> Path:
        return self.config.workspace

    async def __aenter__(self) -> Harness:
        await self.gateway.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.gateway.stop(grace=2)

    async def ask(self, text: str, **kwargs: object) -> OutboundMessage:
        chat_id = str(kwargs.get("chat_id", "1"))
        await self.channel.say(text, **kwargs)  # type: ignore[arg-type]
        return await self.channel.next_reply(chat_id)
