"""`DiscordChannel`: a discord.py client's lifecycle and the one inbound worker.

discord.py keeps its REST base and gateway URL in class attributes (`Route.BASE`,
`DiscordWebSocket.DEFAULT_GATEWAY`); `start()` sets them from config, so one process runs
at most one Discord channel (one API base, one bot).

Inbound messages go through one worker, in arrival order, so a message whose attachment is
still downloading is never overtaken by the next one.

Delivery: a message to answer is journaled (fsynced, channels/journal.py) before the channel's
watermark passes it and before it is published; it is marked answered just before the first
request of its reply goes out. On the first start of a process, whatever was journaled but
never answered (queued behind a long turn at a SIGTERM, or in flight at a kill -9) is
published again once the client is ready, before anything new, so each chat's messages keep
their order. A crash between the journal line and the watermark leaves the message after the
watermark too: its id is taken from the journal into the watermark at start, so catch-up
does not read it twice. A damaged state.json (or a missing one after the journal shows the
channel ran) is rebuilt from the journal before catch-up (catchup.py's `recover`).

A journal write that fails (a full disk) is retried with backoff by the inbound worker, which
holds the message until it is stored: what arrives meanwhile waits behind it, and the
watermark stays before it, so neither a later message nor a restart passes it by. While the
disk stays full its sender is told once, and a reply waits likewise for its answered line
(channels/unstored.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import discord

from clawgate.channels.access import AccessPolicy
from clawgate.channels.base import StreamOpened
from clawgate.channels.chat_channel import ChatChannel
from clawgate.channels.discord.catchup import catch_up, recover
from clawgate.channels.discord.client import (
    CATCH_UP,
    EventClient,
    bot_token,
    explain,
    gateway_client,
    intents,
    point_at,
)
from clawgate.channels.discord.media import MediaSaver
from clawgate.channels.discord.normalise import Normaliser, pressed
from clawgate.channels.discord.sender import (
    RETRY_DELAYS,
    SEND_TIMEOUT,
    LiveSurface,
    Reactor,
    Sender,
    Typing,
)
from clawgate.channels.discord.state import Watermarks
from clawgate.channels.groups import SeenGroups
from clawgate.channels.journal import Journal, is_stop
from clawgate.channels.live import LiveReplies, StreamLog
from clawgate.channels.pairing import PairingStore
from clawgate.channels.reactions import DISCORD_MARKS, StatusReactions
from clawgate.channels.unstored import Unstored, until_stored
from clawgate.kernel.bus import InboundMessage, MessageBus, OutboundMessage, ReplyDraft
from clawgate.kernel.errors import ChannelError
from clawgate.kernel.storage import DiskWriter

if TYPE_CHECKING:
    from clawgate.kernel.config import Config, DiscordConfig

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]


def create_channel(
    channel_config: DiscordConfig,
    bus: MessageBus,
    config: Config,
    *,
    state_dir: Path | None = None,
    **options: Any,
) -> DiscordChannel:
    """`state_dir`: where the journal and watermarks live (a shard leased to a cluster worker
    keeps its own); by default `<data_dir>/channels/discord`."""
    store = PairingStore(config.pairing_file)
    groups = SeenGroups(config.data_dir / "groups.json")
    policy = AccessPolicy("discord", channel_config, store, seen_groups=groups)
    return DiscordChannel(
        channel_config,
        bus,
        workspace=config.workspace,
        policy=policy,
        state_dir=state_dir or config.data_dir / "channels" / "discord",
        **options,
    )


class DiscordChannel(ChatChannel):
    """Session key `discord:<channel id>`: a DM, a guild channel or a thread."""

    name = "discord"

    @property
    def dedupes_sends(self) -> bool:
        return True  # enforce_nonce: the sender's nonces come from `dedupe_key`

    def __init__(
        self,
        config: DiscordConfig,
        bus: MessageBus,
        *,
        policy: AccessPolicy,
        workspace: Path,
        state_dir: Path,
        writer: DiskWriter | None = None,
        guild_ready_timeout: float = 2.0,
        send_timeout: float = SEND_TIMEOUT,
        retry_delays: Sequence[float] = RETRY_DELAYS,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        workspaces: Mapping[str, Path] | None = None,
        shard: tuple[int, int] | None = None,
    ) -> None:
        """`workspaces`: on a bot several agents answer through, each agent's workspace by
        name, where the files its replies attach are found (else `workspace`). `shard`: [id,
        count], the one shard of the bot this channel connects (a cluster worker's lease),
        whose guilds' messages (and, for shard 0, DMs) it receives into its own journal."""
        super().__init__(bus)
        self.config = config
        self._shard = shard
        self._dms: set[str] = set()  # a shard's: chats other shards heard, found to be DMs
        self._streaming = config.streaming
        self.workspace = workspace
        self.policy = policy
        writer = writer or DiskWriter()
        self._sleep = sleep
        self._guild_ready_timeout = guild_ready_timeout
        self._client: EventClient | None = None
        self._task: asyncio.Task[None] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._inbox: asyncio.Queue[object] = asyncio.Queue()
        self._ready = asyncio.Event()
        self._watermarks = Watermarks(state_dir / "state.json", writer)
        self.journal = Journal(state_dir / "journal.jsonl", writer=writer, id_field="id")
        # Loaded from the journal at the first start of the process, published once ready.
        self._due: list[tuple[int, InboundMessage]] | None = None
        self._receiving = False
        self._unstored = Unstored(self.name, self._tell)

        def sender_for(path: Path) -> Sender:
            return Sender(
                config,
                path,
                client=lambda: self._client,
                send_timeout=send_timeout,
                retry_delays=retry_delays,
                sleep=sleep,
            )

        self._sender = sender_for(workspace)
        self._agent_senders = {
            agent: sender_for(path)
            for agent, path in (workspaces or {}).items()
            if path != workspace
        }
        self._typing = Typing()
        self._normaliser = Normaliser(
            config, policy, self._watermarks, MediaSaver(workspace, writer), self._sender.send_text
        )
        self._live = LiveReplies(
            LiveSurface(lambda: self._sender, self._quotes),
            StreamLog(state_dir / "streams.jsonl", writer),
            clock=clock,
            sleep=sleep,
        )
        self._reactions = StatusReactions(
            self.name, Reactor(lambda: self._sender), DISCORD_MARKS, enabled=config.reactions
        )

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        token = bot_token(self.config)
        point_at(self.config.api_base, self.config.gateway_url)
        state = await self._watermarks.load()
        if self._due is None:
            await self._load_journal()
        if state == "damaged" or (state == "missing" and self.journal.ran_before):
            self._watermarks.rebuild()
        await self._watermarks.flush()
        self._receiving = True
        self._ready.clear()
        self._inbox = asyncio.Queue()
        client = gateway_client(
            self._inbox,
            self._ready,
            shard=self._shard,
            shards=self.config.shards,
            intents=intents(),
            proxy=self.config.proxy,
            guild_ready_timeout=self._guild_ready_timeout,
        )
        self._client = client
        self._worker = asyncio.create_task(self._work_inbox(), name="discord inbound")
        self._task = asyncio.create_task(client.start(token), name="discord client")
        ready = asyncio.ensure_future(self._ready.wait())
        try:
            await asyncio.wait({self._task, ready}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()
        if self._ready.is_set():
            log.info("discord: connected as %s", client.user)
            await self._live.recover()
            return
        exc = self._task.exception()
        if exc is None:
            raise ChannelError("the Discord client stopped before it was ready")
        raise explain(exc, self.config.api_base) from exc

    async def wait_closed(self) -> None:
        """Return (or raise why) once the client has died; the manager then restarts us."""
        task = self._task
        if task is None:
            return
        # Shielded: the supervisor being cancelled must not take the client down with it.
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.cancelled():
                return
            raise
        except Exception as exc:
            raise explain(exc, self.config.api_base) from exc

    async def _load_journal(self) -> None:
        """What the last run received but never answered: due again, once per process
        (after a reconnect those messages are still the dispatcher's). Their ids go into the
        watermarks, so catch-up does not read them a second time."""
        due = await self.journal.load()
        for message_id, message in due:
            self._watermarks.note_seen(message.chat_id, message_id)
        self._due = due

    async def _replay(self) -> None:
        due, self._due = self._due or [], []
        for message_id, message in due:
            log.info("discord: answering message %d, received before the last stop", message_id)
            await self.bus.publish_inbound(message)

    async def close(self) -> None:
        # Turns the shutdown cancelled leave their live replies marked, not hanging.
        await self._live.cut_all()
        await self._reactions.close()

    async def stop(self) -> None:
        # Sends keep working after stop: the gateway flushes replies of running turns later.
        self._receiving = False
        self._ready.clear()
        self._typing.stop_all()
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)
        client, self._client = self._client, None
        task, self._task = self._task, None
        if client is not None:
            await client.close()
        if task is not None:
            results = await asyncio.gather(task, return_exceptions=True)
            if isinstance(results[0], Exception):
                log.debug("discord: client ended with %r", results[0])
        await self._watermarks.flush()

    # -- inbound ---------------------------------------------------------------------------

    async def _work_inbox(self) -> None:
        # Once ready, not before: a turn started during the start would import litellm on the
        # event loop and hold up the gateway session. The replay still goes first, so each
        # chat's messages keep their order (catch-up and live ones wait in the inbox).
        await self._ready.wait()
        await self._replay()
        while True:
            item = await self._inbox.get()
            try:
                if item is CATCH_UP:
                    if self._client is not None:
                        if self._watermarks.rebuilding:
                            await recover(
                                self._client,
                                self._watermarks,
                                self.journal,
                                self.policy,
                                dms=self._shard is None or self._shard[0] == 0,
                            )
                        max_age = timedelta(hours=self.config.catchup_max_age_hours)
                        await catch_up(
                            self._client, self._watermarks, self._handle, max_age=max_age
                        )
                elif isinstance(item, discord.Message):
                    await self._handle(item)
                elif isinstance(item, discord.Interaction):
                    # Whether the press counts is the gateway's one trust function's call.
                    await self.bus.publish_inbound(pressed(item))
            except asyncio.CancelledError:
                raise
            except Exception:
                # One bad message must not stop the channel from hearing the next.
                log.exception("discord: could not handle message %s", getattr(item, "id", item))

    async def _handle(self, message: discord.Message) -> None:
        client = self._client
        if client is None:
            return
        inbound = await self._normaliser.normalise(message, client)
        if inbound is None:
            return
        # Kept until stored: the worker waits here, so nothing after it is accepted (and
        # the watermark cannot pass it) before it is. A stop() while waiting leaves it
        # unjournaled and after the watermark: catch-up reads it again.
        while True:
            # Shielded: a stop() between the journal line and the publish must not leave a
            # message this process will never replay (it replays only on its first start).
            failed = await asyncio.shield(self._accept(message.id, inbound))
            if failed is None:
                self._unstored.stored()
                return
            await self._unstored.failed([inbound], failed)
            await self._sleep(self._unstored.delay())

    async def _accept(self, message_id: int, inbound: InboundMessage) -> OSError | None:
        """Journal, then watermark, then publish: a crash after the journal line replays the
        message at the next start. A failed journal write advances nothing and is returned."""
        try:
            await self.journal.record([(message_id, None if is_stop(inbound.text) else inbound)])
        except OSError as exc:
            return exc
        self._watermarks.note_seen(inbound.chat_id, message_id)
        await self._watermarks.flush()
        await self.bus.publish_inbound(inbound)
        if self._shard is not None:
            # A shard's bus stores the message in the cluster's inbound table, which holds it
            # from now on (a replay is stored once); its reply leaves through shard 0's
            # channel, whose journal is another. Done here, or never answered in this one.
            try:
                await self.journal.answered([message_id])
            except OSError as exc:
                log.warning("discord: message %d not marked stored: %s", message_id, exc)
        return None

    async def _tell(self, chat_id: str, text: str) -> None:
        try:
            await self._sender.send_text(chat_id, text)
        except Exception as exc:
            log.warning("discord: could not tell %s: %s", chat_id, exc)

    async def admitted(self, message: InboundMessage, accepted: bool) -> None:
        """The dispatcher's decision: typing only for a message that will be answered; one
        that will not (over the rate limit: kept in its session by now) is marked answered,
        so no restart replays it."""
        if not accepted:
            message_id = _snowflake(message.message_id)
            if message_id is not None:
                await self.journal.answered([message_id])
            return
        if self._receiving and not is_stop(message.text):
            self._start_typing(message.chat_id)

    def _start_typing(self, chat_id: str) -> None:
        client = self._client
        if client is not None and not client.is_closed():
            self._typing.start(chat_id, client.get_partial_messageable(int(chat_id)))

    # -- outbound --------------------------------------------------------------------------

    async def _opening(self, draft: ReplyDraft, opened: StreamOpened) -> None:
        answering = _snowflake(draft.reply_to)
        if answering is not None:
            await until_stored(
                lambda: self.journal.answered_through(draft.chat_id, answering),
                f"discord: the answered mark of {answering}",
                self._sleep,
            )
        self._typing.stop(draft.chat_id)
        await self._live.log.opened((draft.chat_id, draft.reply_to))
        await opened(draft)

    def _quotes(self, chat_id: str) -> bool:
        """In a busy channel the reference shows whom we answer; in a DM it is noise."""
        return chat_id in self._normaliser.group_chats

    async def _learn_chat(self, chat_id: str) -> None:
        """A shard's channel sends the replies of chats other shards hear (shard 0 sends all
        of the bot's): whether such a chat is a guild channel, so quoted, is asked once."""
        client = self._client
        if client is None or chat_id in self._normaliser.group_chats or chat_id in self._dms:
            return
        try:
            channel = client.get_channel(int(chat_id)) or await client.fetch_channel(int(chat_id))
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            log.info("discord: could not tell what %s is (%s); not quoted", chat_id, exc)
            return
        if isinstance(channel, discord.abc.PrivateChannel):
            self._dms.add(chat_id)
        else:
            self._normaliser.group_chats.add(chat_id)

    async def _send(self, message: OutboundMessage) -> None:
        # At most once: the journal hears of the answer before the first request goes out, so
        # a kill -9 after Discord took the reply never sends it again (the nonce only guards
        # retries within this process). The cost: a kill during the send itself leaves that
        # reply stored but unsent. A send that finally fails is answered too: the manager
        # records the failure in the session.
        chat_id = message.chat_id
        answering = _snowflake(message.reply_to)
        stopped = _snowflake(message.stopped)
        if self._shard is not None and answering is not None:
            await self._learn_chat(chat_id)
        live = await self._live.take(chat_id, message.stopped or message.reply_to)
        try:
            if stopped is not None:
                # "Stopped." answers the stopped turn's message alone; its reply_to, the /stop,
                # overtook the messages queued behind that turn, and they still run.
                await until_stored(
                    lambda: self.journal.answered([stopped]),
                    f"discord: the answered mark of {stopped}",
                    self._sleep,
                )
            elif answering is not None:
                await until_stored(
                    lambda: self.journal.answered_through(chat_id, answering),
                    f"discord: the answered mark of {answering}",
                    self._sleep,
                )
            quote = self._quotes(chat_id)
            sender = self._agent_senders.get(message.agent or "", self._sender)
            if message.choices:
                await sender.send_card(message)
            elif live is None:
                await sender.send(message, quote=quote)
            else:
                try:
                    await sender.finish_live(message, live.ref or "", live.shown, quote=quote)
                finally:
                    await self._live.finished(live)
        finally:
            self._typing.stop(chat_id)
            if answering is not None and self._receiving and self.journal.waiting(chat_id):
                self._start_typing(chat_id)


def _snowflake(value: str | None) -> int | None:
    """Our InboundMessage.message_id for Discord is the message's snowflake."""
    try:
        return int(value) if value else None
    except ValueError:
        return None
