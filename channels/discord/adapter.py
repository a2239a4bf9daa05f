"""`DiscordChannel`: a discord.py client's lifecycle and the one inbound worker.

discord.py keeps its REST base and gateway URL in class attributes (`Route.BASE`,
`DiscordWebSocket.DEFAULT_GATEWAY`); `start()` sets them from config, so one process runs
at most one Discord channel (one API base, one bot).

Inbound messages go through one worker, in arrival order, so a message whose attachment is
still downloading is never overtaken by the next one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import discord

from clawgate.channels.access import AccessPolicy
from clawgate.channels.base import Channel
from clawgate.channels.discord.catchup import catch_up
from clawgate.channels.discord.client import (
    CATCH_UP,
    EventClient,
    bot_token,
    explain,
    intents,
    point_at,
)
from clawgate.channels.discord.media import MediaSaver
from clawgate.channels.discord.normalise import Normaliser
from clawgate.channels.discord.sender import (
    MAX_MESSAGE_CHARS,
    RETRY_DELAYS,
    SEND_TIMEOUT,
    Sender,
    Typing,
)
from clawgate.channels.discord.state import Watermarks
from clawgate.channels.groups import SeenGroups
from clawgate.channels.pairing import PairingStore
from clawgate.kernel.bus import MessageBus, OutboundMessage
from clawgate.kernel.errors import ChannelError
from clawgate.kernel.storage import DiskWriter

if TYPE_CHECKING:
    from clawgate.kernel.config import Config, DiscordConfig

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]


def create_channel(
    channel_config: DiscordConfig, bus: MessageBus, config: Config, **options: Any
) -> DiscordChannel:
    store = PairingStore(config.data_dir / "pairing.json")
    groups = SeenGroups(config.data_dir / "groups.json")
    policy = AccessPolicy("discord", channel_config, store, seen_groups=groups)
    return DiscordChannel(
        channel_config,
        bus,
        workspace=config.workspace,
        data_dir=config.data_dir,
        policy=policy,
        **options,
    )


class DiscordChannel(Channel):
    """Session key `discord:<channel id>`: a DM, a guild channel or a thread."""

    name = "discord"
    max_message_chars = MAX_MESSAGE_CHARS

    def __init__(
        self,
        config: DiscordConfig,
        bus: MessageBus,
        *,
        workspace: Path,
        data_dir: Path,
        policy: AccessPolicy,
        writer: DiskWriter | None = None,
        guild_ready_timeout: float = 2.0,
        send_timeout: float = SEND_TIMEOUT,
        retry_delays: Sequence[float] = RETRY_DELAYS,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        super().__init__(bus)
        self.config = config
        self.workspace = workspace
        self.policy = policy
        writer = writer or DiskWriter()
        self._guild_ready_timeout = guild_ready_timeout
        self._client: EventClient | None = None
        self._task: asyncio.Task[None] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._inbox: asyncio.Queue[object] = asyncio.Queue()
        self._ready = asyncio.Event()
        self._watermarks = Watermarks(data_dir / "channels" / "discord" / "state.json", writer)
        self._sender = Sender(
            config,
            workspace,
            client=lambda: self._client,
            send_timeout=send_timeout,
            retry_delays=retry_delays,
            sleep=sleep,
        )
        self._typing = Typing()
        self._normaliser = Normaliser(
            config, policy, self._watermarks, MediaSaver(workspace, writer), self._sender.send_text
        )

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        token = bot_token(self.config)
        point_at(self.config.api_base, self.config.gateway_url)
        await self._watermarks.load()
        self._ready.clear()
        self._inbox = asyncio.Queue()
        client = EventClient(
            self._inbox,
            self._ready,
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

    async def stop(self) -> None:
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
        while True:
            item = await self._inbox.get()
            try:
                if item is CATCH_UP:
                    if self._client is not None:
                        await catch_up(self._client, self._watermarks, self._handle)
                elif isinstance(item, discord.Message):
                    await self._handle(item)
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
        # The watermark is on disk before the message is handed on: after a crash in
        # between, the message is lost rather than answered twice.
        self._watermarks.note_seen(inbound.chat_id, message.id)
        await self._watermarks.flush()
        await self.bus.publish_inbound(inbound)
        self._typing.start(inbound.chat_id, message.channel)

    # -- outbound --------------------------------------------------------------------------

    async def send(self, message: OutboundMessage) -> None:
        try:
            quote = message.chat_id in self._normaliser.group_chats
            await self._sender.send(message, quote=quote)
        finally:
            self._typing.stop(message.chat_id)
