"""Everything that belongs to one workspace, reachable through one object."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from agent.commands import CommandHandler
from agent.context import ContextBuilder
from agent.llm import LLMClient
from agent.loop import AgentLoop
from agent.session import SessionStore
from agent.tools import default_tools
from agent.tools.registry import ToolRegistry
from agent.writer import DiskWriter
from gateway.bus import OutboundMessage
from gateway.config import Config

log = logging.getLogger(__name__)


@dataclass
class AgentRuntime:
    """One assistant: its workspace, sessions, model client, tools and loop.

    A gateway may run several, one per workspace; nothing here is module-global.
    """

    config: Config
    writer: DiskWriter
    sessions: SessionStore
    llm: LLMClient
    tools: ToolRegistry
    context: ContextBuilder
    commands: CommandHandler
    loop: AgentLoop

    @classmethod
    def build(cls, config: Config, *, writer: DiskWriter | None = None) -> AgentRuntime:
        writer = writer or DiskWriter()
        workspace = config.workspace
        writer.mkdir(workspace, mode=0o700)
        sessions = SessionStore(workspace / "sessions", writer=writer)
        llm = LLMClient(config.agent)
        tools = ToolRegistry(default_tools())
        context = ContextBuilder(workspace, timezone=config.agent.timezone)
        commands = CommandHandler(sessions=sessions, default_model=config.agent.model)
        loop = AgentLoop(
            config=config,
            sessions=sessions,
            llm=llm,
            tools=tools,
            context=context,
            writer=writer,
            commands=commands,
        )
        return cls(config, writer, sessions, llm, tools, context, commands, loop)

    async def record_delivery(self, message: OutboundMessage, error: str | None) -> None:
        """Note in the session that a reply went out (or finally failed)."""
        if message.seq is None:
            return
        session = await self.sessions.get(message.session_key)
        if error is None:
            self.sessions.append_record(session, "delivery", seq=message.seq, status="sent")
        else:
            self.sessions.append_record(
                session, "delivery", seq=message.seq, status="failed", error=error
            )
        await self.sessions.sync(session)
