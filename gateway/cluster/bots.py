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
have the reply), except on Discord, where a row queued in the last RESUME_WITHIN_SECONDS is
sent again under the same nonce (`cg<row id>.<part>`, enforce_nonce), which Discord answers
with the message it already made, if it made it; then each pending row is claimed (pending
-> sending) just before its send and finished (sent, or failed with its error) after. No
typing indicator or live reply: the agent's worker sends replies whole.

Sharded (a Discord bot with `shards = N`): each shard is a lease of its own (`BotLease`),
balanced with the other bots. Its holder connects that shard alone, keeps its own journal and
watermarks (`channels/discord/shard-<i>of<N>/`, locked as a whole bot's folder is) and
stores what it receives under its shard's lease, into the rows of the bot (one `bot` name, so
the agents' side does not know shards). Replies are sent by shard 0's holder alone, all of the
bot's: a send is a REST call any connection of the bot can make, Discord's rate limits are the
bot's and not a shard's (one sender respects them, several would race them), an outbound row
names its chat but not its guild, and one sender keeps the one rule of at most once (a row
left `sending` is failed by the next holder of shard 0) and each chat's order."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
# A send cut off by a kill is tried again by the next holder under the same key when the
# platform deduplicates it (Discord keeps a nonce "for a few minutes"), if it was queued this
# recently; older ones are failed, at most once, as on other platforms.
RESUME_WITHIN_SECONDS = 120.0


@dataclass(frozen=True)
class BotLease:
    """What one bot lease covers: an account's whole connection, or one shard of it."""

    key: str  # the account in the config ("discord@home")
    bot: str  # the bot's name in the tables: bot:<platform>:<hash>
    shard: int | None = None
    count: int = 1

    @property
    def resource(self) -> str:
        """The lease: the bot's name, and for a shard `/<i>of<N>` (`bot:discord:3f2a…/0of2`)."""
        return self.bot if self.shard is None else f"{self.bot}/{self.shard}of{self.count}"

    @property
    def label(self) -> str:
        return self.key if self.shard is None else f"{self.key} shard {self.shard} of {self.count}"

    @property
    def sends(self) -> bool:
        """Whether this holder sends the bot's replies: the whole bot's, or shard 0's."""
        return not self.shard

    def state_dir(self, account_dir: Path) -> Path:
        """The channel's state folder (and instance lock) under `channels/<platform>/`."""
        return (
            account_dir if self.shard is None else account_dir / f"shard-{self.shard}of{self.count}"
        )

    def channel_options(self, account_dir: Path) -> dict[str, Any]:
        if self.shard is None:
            return {}
        return {"shard": (self.shard, self.count), "state_dir": self.state_dir(account_dir)}


def bot_leases(key: str, bot: str, shards: int) -> list[BotLease]:
    """An account's leases: its bot whole, or each of its `shards`."""
    if shards <= 1:
        return [BotLease(key, bot)]
    return [BotLease(key, bot, shard, shards) for shard in range(shards)]


def named(resource: str, names: dict[str, str]) -> str:
    """A bot's lease shown with the account it is in this config ("telegram@work", "discord
    shard 1 of 2"); `names`: each bot's table name -> its account."""
    bot, _, shard = resource.partition("/")
    if bot not in names:
        return resource
    if not shard:
        return f"{resource} ({names[bot]})"
    shard_id, _, count = shard.partition("of")
    return f"{resource} ({names[bot]} shard {shard_id} of {count})"


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
        sends: bool = True,
    ) -> None:
        """`sends`: whether this holder sends the bot's outbound rows (see `BotLease.sends`)."""
        self._key = key
        self._channel = channel
        self._sink = sink
        self._tables = sink.tables
        self._wakeups = wakeups
        self._redact = redact
        self._sends = sends

    async def run(self) -> None:
        manager = ChannelManager(MessageBus(), {self._key: self._channel}, redact=self._redact)
        try:
            async with asyncio.TaskGroup() as tasks:
                await manager.start_all(tasks)
                if self._sends:
                    tasks.create_task(self._send_forever(), name=f"outbound {self._key}")
        finally:
            await asyncio.shield(self._stop(manager))

    async def _stop(self, manager: ChannelManager) -> None:
        await manager.stop_all()
        await manager.close_all()

    async def _send_forever(self) -> None:
        lease, bot = self._tables.lease, self._sink.bot
        within = RESUME_WITHIN_SECONDS if self._channel.dedupes_sends else 0.0
        failed, resumed = await self._tables.run(
            lambda conn: give_up_interrupted(conn, lease, bot, within)
        )
        if failed:
            log.warning("%s: %d replies cut off by the last holder are not sent again", bot, failed)
        if resumed:
            log.info("%s: %d replies cut off by the last holder are sent again", bot, resumed)
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
        if self._channel.dedupes_sends:
            message = message.model_copy(update={"dedupe_key": f"cg{row.id}"})
        error: str | None = None
        try:
            await self._channel.send(message)
        except Exception as exc:
            error = self._redact(str(exc) or type(exc).__name__)
            log.error("%s: reply not delivered: %s", message.session_key, error)

        async def finished(conn: asyncpg.Connection) -> None:
            await finish(conn, lease, row.id, error)

        await self._tables.run(finished)
