"""Discord through discord.py: DMs and allowed guild channels in, replies out.

discord.py keeps its REST base and gateway URL in class attributes (`Route.BASE`,
`DiscordWebSocket.DEFAULT_GATEWAY`); `start()` sets them from config, so one process runs
at most one Discord channel (one API base, one bot).

Inbound messages go through one worker, in arrival order, so a message whose attachment is
still downloading is never overtaken by the next one. Each handled message advances a
per-channel watermark (`<data_dir>/channels/discord/state.json`); after a fresh gateway
session (not a resume, which replays what was missed) the worker reads each known
channel's history after its watermark and handles what was addressed to the bot.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import re
import secrets
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import discord
import yarl

from clawgate.channels.access import AccessPolicy
from clawgate.channels.base import Channel, as_seen_by, media_folder
from clawgate.channels.pairing import PairingStore
from clawgate.channels.split import split_message
from clawgate.kernel.bus import InboundMessage, MessageBus, OutboundMessage, Trust
from clawgate.kernel.errors import ChannelError
from clawgate.kernel.storage import DiskWriter

if TYPE_CHECKING:
    from clawgate.kernel.config import Config, DiscordConfig

log = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 2000
FILES_PER_MESSAGE = 10
# Discord's upload limit for a bot in an unboosted server.
MAX_UPLOAD_BYTES = 10 * 1024 * 1024
MAX_DOWNLOAD_BYTES = 25 * 1024 * 1024
DOWNLOAD_TIMEOUT = 60.0
# A send that has not answered by then has an unknown outcome; see _send_part.
SEND_TIMEOUT = 30.0
RETRY_DELAYS = (1.0, 2.0, 4.0)
# The typing indicator is a courtesy: never let it outlive a turn that lost its reply.
TYPING_MAX_SECONDS = 120.0
# Catch-up reads one page per channel: after a long outage, old mentions matter less than
# not flooding a channel with answers to yesterday.
CATCH_UP_LIMIT = 100
QUOTE_MAX_CHARS = 500
STATE_VERSION = 1

_SPEAKING_TYPES = frozenset({discord.MessageType.default, discord.MessageType.reply})
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
_CATCH_UP = object()

Sleep = Callable[[float], Awaitable[object]]


def point_at(api_base: str, gateway_url: str) -> None:
    """Aim discord.py at an API base and gateway (class-wide: one Discord bot per process)."""
    discord.http.Route.BASE = api_base.rstrip("/")
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway_url)


def intents() -> discord.Intents:
    wanted = discord.Intents.default()
    wanted.message_content = True
    wanted.dm_messages = True
    wanted.guild_messages = True
    return wanted


class _Client(discord.Client):
    """Forwards the events we use to the channel, in the order the gateway sent them."""

    def __init__(self, channel: DiscordChannel, **options: Any) -> None:
        super().__init__(**options)
        self._channel = channel

    async def on_connect(self) -> None:
        # A fresh session (READY): nothing from the downtime will be replayed.
        self._channel._inbox.put_nowait(_CATCH_UP)

    async def on_ready(self) -> None:
        self._channel._ready.set()

    async def on_message(self, message: discord.Message) -> None:
        self._channel._inbox.put_nowait(message)


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
        self.state_path = data_dir / "channels" / "discord" / "state.json"
        self.policy = policy
        self._writer = writer or DiskWriter()
        self._guild_ready_timeout = guild_ready_timeout
        self._send_timeout = send_timeout
        self._retry_delays = tuple(retry_delays)
        self._sleep = sleep
        self._client: _Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._inbox: asyncio.Queue[object] = asyncio.Queue()
        self._ready = asyncio.Event()
        self._typing: dict[str, asyncio.Task[None]] = {}
        self._group_chats: set[str] = set()
        self._parents: dict[int, int | None] = {}
        # channel id -> id of the newest message examined there (DMs and allowed channels).
        self._last_seen: dict[str, int] = {}
        self._state_dirty = False
        self._state_lock = asyncio.Lock()

    # -- lifecycle -------------------------------------------------------------------------

    def _token(self) -> str:
        token = self.config.token.get_secret_value() if self.config.token else ""
        if not token:
            raise ChannelError(
                "channels.discord has no token: set [channels.discord] token "
                "or CLAWGATE_CHANNELS__DISCORD__TOKEN"
            )
        return token

    async def start(self) -> None:
        token = self._token()
        point_at(self.config.api_base, self.config.gateway_url)
        self._last_seen = await asyncio.to_thread(self._load_state)
        self._ready.clear()
        self._inbox = asyncio.Queue()
        client = _Client(
            self,
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
        raise _explain(exc, self.config.api_base) from exc

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
            raise _explain(exc, self.config.api_base) from exc

    async def stop(self) -> None:
        self._ready.clear()
        for task in list(self._typing.values()):
            task.cancel()
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
        await self._flush_state()

    # -- inbound ---------------------------------------------------------------------------

    async def _work_inbox(self) -> None:
        while True:
            item = await self._inbox.get()
            try:
                if item is _CATCH_UP:
                    await self._catch_up()
                elif isinstance(item, discord.Message):
                    await self._handle(item)
            except asyncio.CancelledError:
                raise
            except Exception:
                # One bad message must not stop the channel from hearing the next.
                log.exception("discord: could not handle message %s", getattr(item, "id", item))

    async def _handle(self, message: discord.Message) -> None:
        client = self._client
        if client is None or client.user is None:
            return
        me = client.user
        if message.author.id == me.id or message.author.bot or message.webhook_id:
            return
        if message.type not in _SPEAKING_TYPES:
            return
        chat_id = str(message.channel.id)
        if message.id <= self._last_seen.get(chat_id, 0):
            return  # handled already: catch-up and the live stream overlap
        if message.guild is None:
            decision = self.policy.private(str(message.author.id), message.author.name)
            if decision.reply is not None:
                try:
                    await self._send_text(chat_id, decision.reply)
                except ChannelError as exc:
                    log.warning("discord: pairing reply to %s not sent: %s", chat_id, exc)
            if decision.trust is None:
                return
            trust, mentioned = decision.trust, True
        else:
            if not self.policy.group(*await self._group_ids(message)):
                return
            trust, mentioned = Trust.GROUP, self._addresses_me(message, me)
            self._group_chats.add(chat_id)
            if self.config.require_mention and not mentioned:
                self._note_seen(chat_id, message.id)
                return
        text = self._text(message, me)
        media, notes = await self._download(message, trust)
        text = "\n".join(part for part in (text, *notes) if part)
        if not text:
            self._note_seen(chat_id, message.id)
            return
        reply_to = message.reference.message_id if message.reference else None
        inbound = InboundMessage(
            channel=self.name,
            chat_id=chat_id,
            message_id=str(message.id),
            sender_id=str(message.author.id),
            sender_name=message.author.display_name,
            text=text,
            media=tuple(media),
            trust=trust,
            mentioned=mentioned,
            reply_to=str(reply_to) if reply_to else None,
            timestamp=message.created_at,
        )
        # The watermark is on disk before the message is handed on: after a crash in
        # between, the message is lost rather than answered twice.
        self._note_seen(chat_id, message.id)
        await self._flush_state()
        await self.bus.publish_inbound(inbound)
        self._start_typing(chat_id, message.channel)

    async def _group_ids(self, message: discord.Message) -> tuple[str, ...]:
        """(channel, guild, parent channel for threads): any of them may be in group_allow."""
        channel = message.channel
        guild_id = str(message.guild.id) if message.guild else ""
        parent: int | None
        if isinstance(channel, discord.Thread):
            parent = channel.parent_id
        elif isinstance(channel, discord.PartialMessageable):
            # Not in the cache (a thread we have not seen created): ask once what it is.
            if channel.id not in self._parents and self._client is not None:
                fetched = await self._client.fetch_channel(channel.id)
                self._parents[channel.id] = getattr(fetched, "parent_id", None)
            parent = self._parents.get(channel.id)
        else:
            parent = None
        return (str(channel.id), guild_id, str(parent) if parent else "")

    def _addresses_me(self, message: discord.Message, me: discord.ClientUser) -> bool:
        if any(user.id == me.id for user in message.mentions):
            return True
        role = message.guild.self_role if message.guild else None
        if role is not None and role.id in message.raw_role_mentions:
            return True
        resolved = message.reference.resolved if message.reference else None
        return isinstance(resolved, discord.Message) and resolved.author.id == me.id

    def _text(self, message: discord.Message, me: discord.ClientUser) -> str:
        text = re.sub(rf"<@!?{me.id}>", "", message.content)
        for user in message.mentions:
            if user.id != me.id:
                text = re.sub(rf"<@!?{user.id}>", f"@{user.display_name}", text)
        text = text.strip()
        resolved = message.reference.resolved if message.reference else None
        if isinstance(resolved, discord.Message) and resolved.content:
            quoted = resolved.content
            if len(quoted) > QUOTE_MAX_CHARS:
                quoted = quoted[:QUOTE_MAX_CHARS] + "…"
            quote = "\n".join(f"> {line}" for line in quoted.splitlines())
            text = f"{quote}\n{text}"
        return text

    async def _download(
        self, message: discord.Message, trust: Trust
    ) -> tuple[list[str], list[str]]:
        """Save attachments under media/discord/<channel>/; (workspace paths, notes)."""
        saved: list[str] = []
        notes: list[str] = []
        folder = Path(media_folder(trust, "discord", str(message.channel.id)))
        for attachment in message.attachments:
            if attachment.size > MAX_DOWNLOAD_BYTES:
                notes.append(
                    f"[attachment {attachment.filename} not downloaded: "
                    f"{attachment.size} bytes is over the limit]"
                )
                continue
            relative = folder / f"{message.id}_{_safe_name(attachment.filename)}"
            try:
                async with asyncio.timeout(DOWNLOAD_TIMEOUT):
                    data = await attachment.read()
                await asyncio.to_thread(self._save_media, relative, data)
            except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
                log.warning("discord: attachment %s not saved: %s", attachment.filename, exc)
                notes.append(f"[attachment {attachment.filename} could not be downloaded]")
                continue
            saved.append(relative.as_posix())
            kind = attachment.content_type or "file"
            seen = as_seen_by(trust, relative.as_posix())
            notes.append(f"[attachment saved to {seen} ({kind}, {len(data)} bytes)]")
        return saved, notes

    def _save_media(self, relative: Path, data: bytes) -> None:
        path = self.workspace / relative
        self._writer.mkdir(path.parent)
        self._writer.replace(path, data, mode=0o600)

    # -- catch-up --------------------------------------------------------------------------

    async def _catch_up(self) -> None:
        client = self._client
        if client is None:
            return
        for chat_id, after in list(self._last_seen.items()):
            try:
                channel = client.get_channel(int(chat_id)) or await client.fetch_channel(
                    int(chat_id)
                )
                assert isinstance(channel, discord.abc.Messageable)
                missed = [
                    m
                    async for m in channel.history(
                        after=discord.Object(after), limit=CATCH_UP_LIMIT, oldest_first=True
                    )
                ]
            except (discord.NotFound, discord.Forbidden) as exc:
                log.info("discord: channel %s is gone or closed to us (%s)", chat_id, exc.text)
                self._last_seen.pop(chat_id, None)
                self._state_dirty = True
                continue
            except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
                log.warning("discord: could not read the history of %s: %s", chat_id, exc)
                continue
            if missed:
                log.info("discord: %d messages in %s since last seen", len(missed), chat_id)
            for message in missed:
                await self._handle(message)
        await self._flush_state()

    def _note_seen(self, chat_id: str, message_id: int) -> None:
        if message_id > self._last_seen.get(chat_id, 0):
            self._last_seen[chat_id] = message_id
            self._state_dirty = True

    def _load_state(self) -> dict[str, int]:
        try:
            data = json.loads(self.state_path.read_text(encoding="utf-8"))
            return {str(k): int(v) for k, v in data["last_seen"].items()}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            # Only catch-up depends on it: start without, rather than not at all.
            log.warning("%s: unreadable (%s); no catch-up this time", self.state_path, exc)
            return {}

    async def _flush_state(self) -> None:
        async with self._state_lock:
            if not self._state_dirty:
                return
            self._state_dirty = False
            data = {
                "version": STATE_VERSION,
                "last_seen": {k: str(v) for k, v in sorted(self._last_seen.items())},
            }
            try:
                await asyncio.to_thread(self._write_state, json.dumps(data, indent=2) + "\n")
            except OSError as exc:
                self._state_dirty = True
                log.warning("%s: not saved: %s", self.state_path, exc)

    def _write_state(self, text: str) -> None:
        self._writer.mkdir(self.state_path.parent)
        self._writer.replace(self.state_path, text, mode=0o600)

    # -- outbound --------------------------------------------------------------------------

    async def send(self, message: OutboundMessage) -> None:
        try:
            files, problems = await self._load_files(message.media)
            text = "\n".join(part for part in (message.text, *problems) if part)
            parts = split_message(text, MAX_MESSAGE_CHARS)
            batches = [
                files[i : i + FILES_PER_MESSAGE] for i in range(0, len(files), FILES_PER_MESSAGE)
            ]
            # Files ride on the last text part; more than fit on one message go alone after.
            plan: list[tuple[str, list[tuple[str, bytes]]]] = [(p, []) for p in parts]
            if batches and plan:
                plan[-1] = (plan[-1][0], batches.pop(0))
            plan.extend(("", batch) for batch in batches)
            if not plan:
                log.warning("%s: empty reply not sent", message.session_key)
                return
            reference = None
            if message.reply_to and message.chat_id in self._group_chats:
                reference = discord.MessageReference(
                    message_id=int(message.reply_to),
                    channel_id=int(message.chat_id),
                    fail_if_not_exists=False,
                )
            for index, (content, batch) in enumerate(plan):
                await self._send_part(
                    message.chat_id, content, batch, reference if index == 0 else None
                )
        finally:
            self._stop_typing(message.chat_id)

    async def _send_text(self, chat_id: str, text: str) -> None:
        for part in split_message(text, MAX_MESSAGE_CHARS):
            await self._send_part(chat_id, part, [], None)

    async def _send_part(
        self,
        chat_id: str,
        content: str,
        files: list[tuple[str, bytes]],
        reference: discord.MessageReference | None,
    ) -> None:
        """Send one message; retry what Discord may not have received, never doubling it.

        Every attempt carries the same nonce with enforce_nonce, so when an attempt timed out
        after the request went out, Discord answers the retry with the message the first
        attempt created instead of posting it again. 429s are discord.py's to wait out.
        """
        nonce = str(secrets.randbits(63))
        attempts = len(self._retry_delays) + 1
        for attempt in range(attempts):
            try:
                async with asyncio.timeout(self._send_timeout):
                    async with self._rest_client() as client:
                        target = client.get_channel(int(chat_id)) or (
                            client.get_partial_messageable(int(chat_id))
                        )
                        assert isinstance(target, discord.abc.Messageable)
                        await target.send(
                            content or None,
                            files=[discord.File(io.BytesIO(d), filename=n) for n, d in files]
                            or None,
                            nonce=nonce,
                            reference=reference,  # type: ignore[arg-type]
                            mention_author=False,
                            allowed_mentions=discord.AllowedMentions(
                                everyone=False, roles=False, users=True
                            ),
                        )
                return
            except discord.LoginFailure as exc:
                raise ChannelError("Discord rejected the bot token") from exc
            except (discord.DiscordServerError, aiohttp.ClientError, OSError, TimeoutError) as exc:
                if attempt + 1 == attempts:
                    raise ChannelError(
                        f"Discord did not take the message after {attempts} attempts: {_short(exc)}"
                    ) from exc
                delay = self._retry_delays[attempt]
                log.warning(
                    "discord: send to %s failed (%s); retrying in %g s", chat_id, _short(exc), delay
                )
                await self._sleep(delay)
            except discord.HTTPException as exc:
                raise ChannelError(f"Discord refused the message: {_short(exc)}") from exc

    @contextlib.asynccontextmanager
    async def _rest_client(self) -> Any:
        """The running client; while stopped (shutdown flush, restart backoff) a short-lived
        REST-only login, so replies of turns that finish after stop() still go out."""
        client = self._client
        if client is not None and client.user is not None and not client.is_closed():
            yield client
            return
        point_at(self.config.api_base, self.config.gateway_url)
        temporary = discord.Client(intents=intents(), proxy=self.config.proxy)
        try:
            await temporary.login(self._token())
            yield temporary
        finally:
            await temporary.close()

    async def _load_files(self, media: Sequence[str]) -> tuple[list[tuple[str, bytes]], list[str]]:
        files: list[tuple[str, bytes]] = []
        problems: list[str] = []
        root = self.workspace.resolve()
        for item in media:
            path = (root / item).resolve()
            if not path.is_relative_to(root):
                log.warning("discord: refusing to send %s: outside the workspace", item)
                problems.append(f"(could not attach {item}: outside the workspace)")
                continue
            try:
                size = path.stat().st_size
                if size > MAX_UPLOAD_BYTES:
                    problems.append(f"(could not attach {item}: {size} bytes is too large)")
                    continue
                files.append((path.name, await asyncio.to_thread(path.read_bytes)))
            except OSError as exc:
                log.warning("discord: cannot attach %s: %s", item, exc)
                problems.append(f"(could not attach {item}: {exc.strerror or exc})")
        return files, problems

    def _start_typing(self, chat_id: str, target: discord.abc.Messageable) -> None:
        if chat_id in self._typing:
            return
        task = asyncio.create_task(self._keep_typing(target), name=f"discord typing {chat_id}")
        self._typing[chat_id] = task
        task.add_done_callback(
            lambda done: self._typing.pop(chat_id) if self._typing.get(chat_id) is done else None
        )

    def _stop_typing(self, chat_id: str) -> None:
        task = self._typing.get(chat_id)
        if task is not None:
            task.cancel()

    async def _keep_typing(self, target: discord.abc.Messageable) -> None:
        try:
            async with target.typing():
                await asyncio.sleep(TYPING_MAX_SECONDS)
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            log.debug("discord: typing indicator failed: %s", exc)


def _safe_name(filename: str) -> str:
    cleaned = _UNSAFE_NAME.sub("_", filename).strip("._") or "file"
    return cleaned[-100:]


def _short(exc: BaseException) -> str:
    if isinstance(exc, discord.HTTPException):
        return f"{exc.status} {exc.text or exc.response.reason}".strip()
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    return str(exc) or type(exc).__name__


def _explain(exc: BaseException, api_base: str) -> BaseException:
    """A ChannelError a person can act on, or the exception itself if it is a bug."""
    if isinstance(exc, discord.LoginFailure):
        return ChannelError("Discord rejected the bot token: check [channels.discord] token")
    if isinstance(exc, discord.PrivilegedIntentsRequired):
        return ChannelError(
            "Discord refused the message content intent: enable it for the bot in the "
            "Developer Portal (Bot -> Privileged Gateway Intents)"
        )
    if isinstance(exc, discord.ConnectionClosed):
        if exc.code == 4004:
            return ChannelError("Discord rejected the bot token: check [channels.discord] token")
        return ChannelError(f"Discord closed the gateway connection (code {exc.code})")
    if isinstance(exc, discord.GatewayNotFound):
        return ChannelError("Discord's gateway could not be found")
    if isinstance(exc, discord.HTTPException):
        return ChannelError(f"Discord API error: {_short(exc)}")
    if isinstance(exc, aiohttp.ClientError | OSError):
        host = yarl.URL(api_base).host
        return ChannelError(f"cannot reach Discord at {host}: {exc}")
    return exc


def create_channel(
    channel_config: DiscordConfig, bus: MessageBus, config: Config, **options: Any
) -> DiscordChannel:
    store = PairingStore(config.data_dir / "pairing.json")
    policy = AccessPolicy("discord", channel_config, store)
    return DiscordChannel(
        channel_config,
        bus,
        workspace=config.workspace,
        data_dir=config.data_dir,
        policy=policy,
        **options,
    )
