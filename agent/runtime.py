"""Everything that belongs to one workspace, reachable through one object.

`AgentRuntime.build` wires one assistant in dependency order - disk writer, session store
(with the one redactor), model client, memory index and search, tools (the built-in ones,
the memory tools and the gateway's `extra_tools` such as `cron`), memory store and
consolidator, context builder, context guard, commands, loop - and hands collaborators to
constructors; nothing is set afterwards and nothing is module-global, so a gateway holds
one runtime per agent. Spend is wired here too: the agent's ledger and budget
(agent/spend/) go into the model client, so every call it makes is recorded and capped. Its lifecycle: `start` finishes what a crash interrupted (HISTORY.md
entries without their record, archives without their `archived` record), `unanswered`
finds user messages a dead process never answered so the gateway can publish them again,
`record_delivery` writes the `Delivery` record of each reply (made durable with the
session's next fsync), and `close` waits (bounded) for memory work before closing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from clawgate.agent.commands import ChannelStatus, CommandHandler
from clawgate.agent.context import ContextBuilder
from clawgate.agent.guard import ContextGuard
from clawgate.agent.llm import LLMClient
from clawgate.agent.loop import AgentLoop, Outbox
from clawgate.agent.memory.consolidate import Consolidator
from clawgate.agent.memory.embeddings import make_embedder
from clawgate.agent.memory.index import MemoryIndex
from clawgate.agent.memory.provenance import shared_notes_part
from clawgate.agent.memory.recall import recall_part
from clawgate.agent.memory.recent import daily_logs_part
from clawgate.agent.memory.search import MemorySearch
from clawgate.agent.memory.store import MemoryStore
from clawgate.agent.memory.transcripts import TranscriptIndex
from clawgate.agent.memory.warm import warm_memory
from clawgate.agent.session import (
    Archived,
    Delivery,
    OverLimit,
    SessionStore,
    Streamed,
    load_session,
    read_key,
)
from clawgate.agent.session.delivery import streamed, unanswered
from clawgate.agent.spend.budget import Budget, OwnerNotice
from clawgate.agent.spend.ledger import Ledger
from clawgate.agent.tools import Tool, default_tools
from clawgate.agent.tools.approval import ExecApprovals
from clawgate.agent.tools.memory_tools import memory_tools
from clawgate.agent.tools.registry import ToolRegistry, ToolSource
from clawgate.agent.usage import TurnUsage
from clawgate.kernel.bus import InboundMessage, OutboundMessage, ReplyDraft, Trust
from clawgate.kernel.clock import SYSTEM_CLOCK, Clock
from clawgate.kernel.config import Config
from clawgate.kernel.secrets import Redactor
from clawgate.kernel.storage import DiskWriter

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
    memory: MemoryStore
    consolidator: Consolidator
    loop: AgentLoop
    search: MemorySearch
    ledger: Ledger
    budget: Budget
    # Exec approval cards waiting for the owner (agent/tools/approval.py).
    approvals: ExecApprovals

    @property
    def redact(self) -> Redactor:
        """The one redactor (configured secrets in any case, token shapes) for everything
        this assistant writes or sends: session records, replies, status."""
        return self.sessions.redact

    @classmethod
    def build(
        cls,
        config: Config,
        *,
        writer: DiskWriter | None = None,
        extra_tools: Sequence[Tool] = (),
        tool_sources: Sequence[ToolSource] = (),
        outbox: Outbox | None = None,
        channel_status: ChannelStatus | None = None,
        shared_memory: Mapping[str, MemorySearch] | None = None,
        llm: LLMClient | None = None,
        clock: Clock = SYSTEM_CLOCK,
        owner_chat: Callable[[], str] | None = None,
    ) -> AgentRuntime:
        """Everything wired here, in dependency order. A gateway passes `outbox` (its bus's
        outbound queue, for send_file), in the daemon `channel_status` for /status, and
        `extra_tools` beyond the built-in ones (the gateway's `cron`), `tool_sources` whose
        tools come and go (the MCP servers'); a test may pass the model client (one serving a
        FunctionModel), else one is made from the config, and the clock the budget's days are
        counted by. `owner_chat`: where budget notices go (default `heartbeat.deliver_to`)."""
        writer = writer or DiskWriter()
        workspace = config.workspace
        writer.mkdir(workspace, mode=0o700)
        sessions = SessionStore(
            workspace / "sessions", writer=writer, redact=Redactor(config.secrets())
        )
        ledger = Ledger.for_config(config, writer=writer, clock=clock)
        notify = _owner_notice(outbox, owner_chat or (lambda: config.heartbeat.deliver_to))
        budget = Budget(config.budget, ledger, notify_owner=notify, writer=writer)
        llm = llm or LLMClient(config.agent, ledger=ledger, budget=budget)
        # The search index is derived data under data_dir; it opens on the first search.
        embedder = make_embedder(config.memory.embedding_model, lambda: llm)
        index = MemoryIndex.for_workspace(workspace, config.data_dir, embedder)
        transcripts = TranscriptIndex.for_workspace(workspace, config.data_dir)
        search = MemorySearch(
            index, config.memory.search, timezone=config.agent.timezone, transcripts=transcripts
        )
        tools = ToolRegistry(
            [*default_tools(), *memory_tools(search, shared_memory), *extra_tools],
            sources=tool_sources,
        )
        memory = MemoryStore(workspace, writer=writer, timezone=config.agent.timezone)
        consolidator = Consolidator(
            store=memory, sessions=sessions, llm=llm, memory_window=config.agent.memory_window
        )
        context = ContextBuilder(
            workspace,
            timezone=config.agent.timezone,
            extra_parts=[
                daily_logs_part(memory),
                recall_part(search, config.memory),
                shared_notes_part(memory, config.channels),
            ],
        )
        guard = ContextGuard(
            sessions=sessions,
            llm=llm,
            context_window=config.agent.context_window_tokens,
            reserve=config.agent.max_tokens,
        )
        usage = TurnUsage()
        approvals = ExecApprovals(
            config.data_dir / "approvals" / f"{config.agent_name}.json",
            outbox=outbox,
            owner_chat=owner_chat or (lambda: config.heartbeat.deliver_to),
            writer=writer,
        )
        commands = CommandHandler(
            sessions=sessions,
            default_model=config.agent.model,
            guard=guard,
            context=context,
            tools=tools,
            tools_config=config.tools,
            usage=usage,
            ledger=ledger,
            channel_status=channel_status,
            on_archived=(lambda old, _path: consolidator.schedule_archive(old),),
            check_model=llm.check_model,
        )
        loop = AgentLoop(
            config=config,
            sessions=sessions,
            llm=llm,
            tools=tools,
            context=context,
            writer=writer,
            commands=commands,
            consolidator=consolidator,
            guard=guard,
            memory=memory,
            usage=usage,
            budget=budget,
            outbox=outbox,
            approvals=approvals,
        )
        return cls(
            config,
            writer,
            sessions,
            llm,
            tools,
            context,
            commands,
            memory,
            consolidator,
            loop,
            search,
            ledger,
            budget,
            approvals,
        )

    async def start(self) -> None:
        """Pick up archives that a crash or a stop interrupted, and record HISTORY.md entries
        a crash left without their consolidation record."""
        await self.consolidator.recover()
        expired = await self.approvals.expire_leftovers()
        if expired:
            log.info("%d exec approval card(s) left by the last run expired", expired)
        for path in await asyncio.to_thread(self.sessions.list_archived):
            session = await asyncio.to_thread(load_session, path, read_key(path) or path.stem)
            if not any(True for _ in session.records_of(Archived)):
                log.info("%s: finishing the archive of %s", session.key, path.name)
                self.consolidator.schedule_archive(session)

    async def warm_up(self) -> None:
        """What the first turn needs, loaded in the background once the gateway runs: the
        model path and the model's price, and with auto-recall on the memory index and its
        embedder."""
        agent = self.config.agent
        work = [self.llm.warm_up(), self.ledger.prices.load(agent.model, *agent.fallback_models)]
        if self.config.memory.auto_recall:
            work.append(warm_memory(self.search))
        await asyncio.gather(*work)

    async def unanswered(self, channels: set[str]) -> list[InboundMessage]:
        """User messages that were stored but never answered (the process died mid-turn),
        rebuilt so the gateway can publish them again once their channel runs. The loop
        recognises them by message id, so a channel re-delivering them too is harmless."""
        found = []
        for key, _path in await asyncio.to_thread(self.sessions.list_keys):
            channel, _, chat_id = key.partition(":")
            if channel not in channels or channel == "cli":
                continue
            session = await self.sessions.get(key)
            last_user = unanswered(session)
            if last_user is None:
                continue
            # Only what the chat last recorded: the gateway decides the trust again from the
            # facts when it handles the message (see channels/access.py).
            facts = session.state.chat
            found.append(
                InboundMessage(
                    channel=channel,
                    chat_id=chat_id,
                    message_id=last_user.message_id or "",
                    sender_id=facts.user_id if facts else "",
                    text=last_user.content,
                    trust=session.state.trust or Trust.ALLOWED,
                    facts=facts,
                )
            )
        return found

    async def close(self, grace: float = 10.0) -> None:
        """Let consolidations and archives finish (bounded); what is cut off is retried at the
        next start, since nothing advances until a consolidation has fully landed."""
        if not await self.consolidator.drain(grace):
            log.warning("memory work still running after %.0f s; it resumes at next start", grace)
        elif waiting := self.consolidator.backing_off:
            log.info("%d archive(s) waiting to try again; each resumes at next start", waiting)
        await self.consolidator.close()
        await self.search.close()
        await self.llm.aclose()
        await self.sessions.flush()

    async def keep_over_limit(self, message: InboundMessage) -> None:
        """Store a message over its sender's rate limit, marked, durably (an `OverLimit`
        record: no turn, no model call, no reply); a copy re-delivered after a restart is not
        stored twice. Raises OSError when it cannot be stored."""
        session = await self.sessions.get(message.session_key)
        if message.message_id and any(
            r.message_id == message.message_id for r in session.records_of(OverLimit)
        ):
            return
        kept = OverLimit(
            message_id=message.message_id or None,
            sender_id=message.sender_id,
            sender_name=message.sender_name or None,
            content=message.text,
            media=list(message.media) or None,
            sent_at=message.timestamp.isoformat(),
        )
        self.sessions.append(session, kept)
        await self.sessions.sync(session)

    async def record_stream(self, draft: ReplyDraft) -> None:
        """A channel is about to show the first piece of the reply to `draft.reply_to`: from
        now on that message is answered (a `Streamed` record), whatever becomes of its turn.
        One write() before the piece leaves, so a kill -9 after it cannot lose the record."""
        session = await self.sessions.get(draft.session_key)
        if not streamed(session, draft.reply_to):
            self.sessions.append(session, Streamed(message_id=draft.reply_to))

    async def record_delivery(self, message: OutboundMessage, error: str | None) -> None:
        """Note in the session that a reply went out (or finally failed)."""
        if message.seq is None:
            return
        session = await self.sessions.get(message.session_key)
        if error is None:
            self.sessions.append(session, Delivery(seq=message.seq, status="sent"))
        else:
            self.sessions.append(session, Delivery(seq=message.seq, status="failed", error=error))
        self.sessions.sync_later(session)  # with the session's next turn: one fsync per turn


def _owner_notice(outbox: Outbox | None, owner_chat: Callable[[], str]) -> OwnerNotice | None:
    """Budget notices go to the owner's private chat, `owner_chat()` asked when one is sent
    (a session key; "" when none is known, and then the notice is only logged)."""
    if outbox is None:
        return None

    async def send(text: str) -> None:
        target = await asyncio.to_thread(owner_chat)
        if ":" not in target:
            log.warning("%s (no owner chat known: set heartbeat.deliver_to)", text)
            return
        channel, chat_id = target.split(":", 1)
        await outbox(OutboundMessage(channel=channel, chat_id=chat_id, text=text))

    return send
