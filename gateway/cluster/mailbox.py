"""The agent's side of the tables: `Inbox` feeds the agent its bots' messages from `inbound`,
and `Outbox`, the channel its gateway replies through, queues each reply in `outbound`.

A message enters the agent exactly where a channel's would (the gateway's inbound queue), so
sessions, the dispatcher and the delivery rules are today's. It stays unconsumed until its
reply is queued (the journal's "answered" mark, in the same transaction as the reply, and
for the chat's earlier messages too) or the dispatcher declines it; a /stop or a pressed
button is consumed as it is fed (replayed later they would only answer "nothing is
running"). A new holder of the agent feeds every unconsumed message again: one already in
the session is recognised by its message id and not answered twice, as after a restart.
The session's Delivery record says "sent" once the reply is queued; whether the platform
took it is the outbound row's status."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from clawgate.channels.base import Channel
from clawgate.channels.journal import is_stop
from clawgate.gateway.cluster.queues import (
    INBOUND_CHANNEL,
    Waiting,
    consume,
    consume_answered,
    put_outbound,
    waiting_inbound,
)
from clawgate.gateway.cluster.tables import TableWriter
from clawgate.gateway.cluster.wakeups import Wakeups
from clawgate.kernel.bus import InboundMessage, MessageBus, OutboundMessage

if TYPE_CHECKING:
    import asyncpg

log = logging.getLogger(__name__)

# Polling when no wake-up arrives (a NOTIFY lost with its connection).
POLL_SECONDS = 1.0


class Outbox(Channel):
    """One bot as an agent's gateway sees it: `send` queues the reply for the bot's worker."""

    def __init__(self, platform: str, bot: str, agent: str, tables: TableWriter) -> None:
        super().__init__(MessageBus())  # receives nothing: the Inbox feeds the gateway
        self.name = platform
        self._bot = bot
        self._agent = agent
        self._tables = tables

    @property
    def replays_unanswered(self) -> bool:
        return True  # the Inbox feeds every unconsumed row again, in order

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def send(self, message: OutboundMessage) -> None:
        lease = self._tables.lease
        answered = message.stopped or message.reply_to

        async def queue(conn: asyncpg.Connection) -> None:
            async with conn.transaction():
                if answered:
                    # "Stopped." answers the stopped message alone; a reply, the chat so far.
                    await consume_answered(
                        conn,
                        lease,
                        self._agent,
                        self._bot,
                        message.chat_id,
                        answered,
                        through=message.stopped is None,
                    )
                await put_outbound(conn, lease, self._bot, message)

        # Once: a retry after a commit whose answer was lost would queue it twice.
        await self._tables.run(queue, retry=False)

    async def admitted(self, message: InboundMessage, accepted: bool) -> None:
        """A message the dispatcher will not answer (over the rate limit, kept in its
        session) is consumed, so no new holder feeds it again."""
        if accepted or not message.message_id:
            return
        lease = self._tables.lease

        async def mark(conn: asyncpg.Connection) -> None:
            await consume_answered(
                conn,
                lease,
                self._agent,
                self._bot,
                message.chat_id,
                message.message_id,
                through=False,
            )

        await self._tables.run(mark)


class Inbox:
    """Feeds one agent's unconsumed messages, in order, into its gateway's inbound queue."""

    def __init__(
        self, agent: str, tables: TableWriter, bus: MessageBus, wakeups: Wakeups | None
    ) -> None:
        self._agent = agent
        self._tables = tables
        self._bus = bus
        self._wakeups = wakeups

    async def run(self) -> None:
        """Until cancelled (the lease lost, the worker stopping)."""
        fed = 0
        while True:
            waiting = await self._tables.run(self._after(fed))
            once = [w.seq for w in waiting if w.message.choice or is_stop(w.message.text)]
            if once:
                await self._tables.run(self._consume(once))
            for row in waiting:
                fed = row.seq
                await self._bus.inbound.put(row.message)
            if waiting:
                continue
            if self._wakeups is not None:
                await self._wakeups.wait(INBOUND_CHANNEL, self._agent, POLL_SECONDS)
            else:
                await asyncio.sleep(POLL_SECONDS)

    def _after(self, fed: int) -> Callable[[asyncpg.Connection], Awaitable[list[Waiting]]]:
        return lambda conn: waiting_inbound(conn, self._agent, fed)

    def _consume(self, seqs: list[int]) -> Callable[[asyncpg.Connection], Awaitable[None]]:
        lease = self._tables.lease
        return lambda conn: consume(conn, lease, self._agent, seqs)
