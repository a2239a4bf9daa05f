"""A bot account leased to this worker: its channel receives as on one machine, but what it
publishes goes to the `inbound` table (`TableSink`), and the replies its agents' workers
queued in `outbound` are sent from here (`BotRunner`), in order, one at a time.

Received: the channel's own journal (Telegram's, Discord's) holds the message on disk first,
as on one machine; the channel then publishes it, which returns once the row is committed,
retried while the database is away; only then does the channel confirm the batch to the
platform (Telegram's next getUpdates offset, Discord's watermark). A journal replayed by the
next holder publishes again what it never saw answered: the row is keyed by the platform's
message id, so it is stored once. Discord does not hand out again what its gateway
delivered, so a message the worker received and could not store before dying is found only
by the next holder's catch-up of the channel's history (as on one machine after a crash).

Sent: a new holder first fails every row left `sending` (at most once: the platform may
have the reply); then each pending row is claimed (pending -> sending) just before its send
and finished (sent, or failed with its error) after. No typing indicator or live reply: the
agent's worker sends replies whole."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from clawgate.channels.base import Channel
from clawgate.channels.manager import ChannelManager
from clawgate.gateway.cluster.queues import (
    OUTBOUND_CHANNEL,
    Pending,
    claim,
    finish,
    give_up_interrupted,
    pending_outbound,
    put_inbound,
    put_outbound,
)
from clawgate.gateway.cluster.tables import TableWriter
from clawgate.gateway.cluster.wakeups import Wakeups
from clawgate.kernel.bus import InboundMessage, MessageBus, OutboundMessage
from clawgate.kernel.secrets import Redactor

if TYPE_CHECKING:
    import asyncpg

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0


class TableSink:
    """Where a leased bot's channel publishes: inbound rows, and its own notices (pairing
    requests to the owners) as outbound rows of the bot."""

    def __init__(self, bot: str, tables: TableWriter) -> None:
        self.bot = bot
        self.tables = tables

    async def inbound(self, message: InboundMessage) -> None:
        """Stored (or found stored) before this returns; `message.agent` already routed."""
        lease = self.tables.lease
        await self.tables.run(lambda conn: put_inbound(conn, lease, self.bot, message))

    async def outbound(self, message: OutboundMessage) -> None:
        lease = self.tables.lease
        await self.tables.run(
            lambda conn: put_outbound(conn, lease, self.bot, message), retry=False
        )


class BotRunner:
    """Runs one leased bot until cancelled: the channel (supervised, restarted on failure)
    and the sending of its outbound rows."""

    def __init__(
        self,
        key: str,
        channel: Channel,
        sink: TableSink,
        *,
        wakeups: Wakeups | None,
        redact: Redactor,
    ) -> None:
        self._key = key
        self._channel = channel
        self._sink = sink
        self._tables = sink.tables
        self._wakeups = wakeups
        self._redact = redact

    async def run(self) -> None:
        manager = ChannelManager(MessageBus(), {self._key: self._channel}, redact=self._redact)
        try:
            async with asyncio.TaskGroup() as tasks:
                await manager.start_all(tasks)
                tasks.create_task(self._send_forever(), name=f"outbound {self._key}")
        finally:
            await asyncio.shield(self._stop(manager))

    async def _stop(self, manager: ChannelManager) -> None:
        await manager.stop_all()
        await manager.close_all()

    async def _send_forever(self) -> None:
        lease, bot = self._tables.lease, self._sink.bot
        failed = await self._tables.run(lambda conn: give_up_interrupted(conn, lease, bot))
        if failed:
            log.warning("%s: %d replies cut off by the last holder are not sent again", bot, failed)
        while True:
            pending = await self._tables.run(lambda conn: pending_outbound(conn, bot))
            for row in pending:
                await self._send(row)
            if pending:
                continue
            if self._wakeups is not None:
                await self._wakeups.wait(OUTBOUND_CHANNEL, bot, POLL_SECONDS)
            else:
                await asyncio.sleep(POLL_SECONDS)

    async def _send(self, row: Pending) -> None:
        lease = self._tables.lease

        async def claimed(conn: asyncpg.Connection) -> bool:
            return await claim(conn, lease, row.id)

        if not await self._tables.run(claimed):
            return
        message = row.message
        text = self._redact(message.text)
        if text != message.text:
            message = message.model_copy(update={"text": text})
        error: str | None = None
        try:
            await self._channel.send(message)
        except Exception as exc:
            error = self._redact(str(exc) or type(exc).__name__)
            log.error("%s: reply not delivered: %s", message.session_key, error)

        async def finished(conn: asyncpg.Connection) -> None:
            await finish(conn, lease, row.id, error)

        await self._tables.run(finished)
