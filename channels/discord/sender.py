"""Replies out: split to Discord's length, files attached, every message sent at most once,
and the typing indicator while a turn runs."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp
import discord

from clawgate.channels.base import outbound_file
from clawgate.channels.discord.client import bot_token, intents, point_at, short
from clawgate.channels.live import STOPPED_LINE, error_tail, with_line
from clawgate.channels.reactions import ReactionRefused
from clawgate.channels.split import split_message
from clawgate.kernel.bus import OutboundMessage
from clawgate.kernel.errors import ChannelError, PathOutsideRoot, one_line, tries
from clawgate.kernel.retry import Backoff, RetriesExhausted, Retry, retrying

if TYPE_CHECKING:
    from clawgate.kernel.config import DiscordConfig

log = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 2000
# What a live message shows: room for the "…" and the status line.
LIVE_LIMIT = 1900
FILES_PER_MESSAGE = 10
# Discord's upload limit for a bot in an unboosted server.
MAX_UPLOAD_BYTES = 10 * 1024 * 1024
# A send that has not answered by then has an unknown outcome; see Sender._send_part.
SEND_TIMEOUT = 30.0
RETRY_DELAYS = (1.0, 2.0, 4.0)
# The typing indicator is a courtesy: never let it outlive a turn that lost its reply.
TYPING_MAX_SECONDS = 120.0

Sleep = Callable[[float], Awaitable[None]]
Files = list[tuple[str, bytes]]


class Sender:
    def __init__(
        self,
        config: DiscordConfig,
        workspace: Path,
        *,
        client: Callable[[], discord.Client | None],
        send_timeout: float,
        retry_delays: Sequence[float],
        sleep: Sleep,
    ) -> None:
        self.config = config
        self.workspace = workspace
        self._client = client
        self._send_timeout = send_timeout
        self._retry_delays = tuple(retry_delays)
        self._sleep = sleep

    async def send(self, message: OutboundMessage, *, quote: bool) -> None:
        """Send one reply; with `quote`, its first message references the one it answers."""
        plan = await self._plan(message)
        if not plan:
            log.warning("%s: empty reply not sent", message.session_key)
            return
        await self._send_plan(message, plan, quote=quote)

    async def send_card(self, message: OutboundMessage) -> None:
        """The text with one button per choice (`custom_id` = the choice's id). The view is
        stopped at once: presses arrive as interactions the adapter reads, not view callbacks."""
        view = discord.ui.View(timeout=None)
        for choice in message.choices:
            view.add_item(discord.ui.Button(label=choice.label, custom_id=choice.id))
        async with asyncio.timeout(self._send_timeout):
            async with self.rest_client() as client:
                target = client.get_partial_messageable(int(message.chat_id))
                await target.send(message.text, view=view)
        view.stop()

    async def finish_live(
        self, message: OutboundMessage, ref: str, shown: str, *, quote: bool
    ) -> None:
        """The live message `ref` (showing `shown`) made into `message`: its first part
        edited in, the rest and the files sent as new messages. A stopped turn keeps what
        showed with STOPPED_LINE under it; a failed one gets the error in place of its
        unfinished line. If the message cannot be edited (deleted), `message` is sent anew."""
        if message.stopped is not None or message.is_error:
            ending = (
                with_line(shown, STOPPED_LINE)
                if message.stopped is not None
                else error_tail(shown, message.text)
            )
            if not await self.edit(message.chat_id, ref, ending):
                await self.send(message, quote=quote)
            return
        plan = await self._plan(message)
        if plan and plan[0][0]:
            first, files = plan[0]
            if await self.edit(message.chat_id, ref, first):
                plan, quote = ([("", files)] if files else []) + plan[1:], False
        await self._send_plan(message, plan, quote=quote)

    async def edit(self, chat_id: str, ref: str, content: str) -> bool:
        """Replace message `ref`'s text; False when Discord no longer has it (or refuses).
        An edit may be repeated, so any failure Discord may not have seen is retried;
        rate limits are discord.py's to wait out."""

        async def attempt() -> None:
            try:
                async with asyncio.timeout(self._send_timeout):
                    async with self.rest_client() as client:
                        target = client.get_partial_messageable(int(chat_id))
                        await target.get_partial_message(int(ref)).edit(content=content)
            except (discord.DiscordServerError, aiohttp.ClientError, OSError, TimeoutError) as exc:
                raise Retry(short(exc)) from exc

        try:
            await retrying(
                attempt,
                attempts=len(self._retry_delays) + 1,
                backoff=Backoff(schedule=self._retry_delays),
                sleep=self._sleep,
            )
        except discord.HTTPException as exc:
            log.warning("discord: message %s not edited: %s", ref, short(exc))
            return False
        except RetriesExhausted as exhausted:
            raise ChannelError(
                f"Discord did not take the edit after {tries(exhausted.attempts)}: "
                f"{exhausted.last.reason}"
            ) from exhausted.last.__cause__
        return True

    async def _plan(self, message: OutboundMessage) -> list[tuple[str, Files]]:
        """The reply's messages: its text parts, its files on the last of them."""
        files, problems = await self._load_files(message)
        text = "\n".join(part for part in (message.text, *problems) if part)
        parts = split_message(text, MAX_MESSAGE_CHARS)
        batches = [
            files[i : i + FILES_PER_MESSAGE] for i in range(0, len(files), FILES_PER_MESSAGE)
        ]
        # Files ride on the last text part; more than fit on one message go alone after.
        plan: list[tuple[str, Files]] = [(p, []) for p in parts]
        if batches and plan:
            plan[-1] = (plan[-1][0], batches.pop(0))
        plan.extend(("", batch) for batch in batches)
        return plan

    async def _send_plan(
        self, message: OutboundMessage, plan: list[tuple[str, Files]], *, quote: bool
    ) -> None:
        reference = None
        if message.reply_to and quote:
            reference = discord.MessageReference(
                message_id=int(message.reply_to),
                channel_id=int(message.chat_id),
                fail_if_not_exists=False,
            )
        for index, (content, batch) in enumerate(plan):
            # Each part's nonce the same on every try, here or on another worker (a nonce is
            # at most 25 characters: the keys are short, `cg<row id>`).
            nonce = f"{message.dedupe_key}.{index}" if message.dedupe_key else None
            await self._send_part(
                message.chat_id, content, batch, reference if index == 0 else None, nonce=nonce
            )

    async def send_text(self, chat_id: str, text: str) -> None:
        for part in split_message(text, MAX_MESSAGE_CHARS):
            await self._send_part(chat_id, part, [], None)

    async def post(self, chat_id: str, reply_to: str, text: str, *, quote: bool) -> str:
        """One new message answering `reply_to` (referencing it with `quote`); its id."""
        reference = None
        if quote:
            reference = discord.MessageReference(
                message_id=int(reply_to), channel_id=int(chat_id), fail_if_not_exists=False
            )
        return await self._send_part(chat_id, text, [], reference)

    async def _send_part(
        self,
        chat_id: str,
        content: str,
        files: Files,
        reference: discord.MessageReference | None,
        *,
        nonce: str | None = None,
    ) -> str:
        """Send one message; retry what Discord may not have received, never doubling it.

        Every attempt carries the same nonce with enforce_nonce, so when an attempt timed out
        after the request went out, Discord answers the retry with the message the first
        attempt created instead of posting it again. 429s are discord.py's to wait out.
        `nonce`: the caller's, when another process may try the same send (else a new one).
        """
        nonce = nonce or str(secrets.randbits(63))

        async def attempt() -> str:
            try:
                async with asyncio.timeout(self._send_timeout):
                    async with self.rest_client() as client:
                        target = client.get_channel(int(chat_id)) or (
                            client.get_partial_messageable(int(chat_id))
                        )
                        assert isinstance(target, discord.abc.Messageable)
                        sent = await target.send(
                            content or None,
                            # None (no attachments) is accepted at run time, not by the stubs.
                            files=[discord.File(io.BytesIO(d), filename=n) for n, d in files]
                            or None,  # type: ignore[arg-type]
                            nonce=nonce,
                            reference=reference,  # type: ignore[arg-type]
                            mention_author=False,
                            allowed_mentions=discord.AllowedMentions(
                                everyone=False, roles=False, users=True
                            ),
                        )
                        return str(sent.id)
            except discord.LoginFailure as exc:
                raise ChannelError("Discord rejected the bot token") from exc
            except (discord.DiscordServerError, aiohttp.ClientError, OSError, TimeoutError) as exc:
                raise Retry(short(exc)) from exc
            except discord.HTTPException as exc:
                raise ChannelError(f"Discord refused the message: {short(exc)}") from exc

        def on_retry(_: int, failure: Retry, delay: float) -> None:
            log.warning(
                "discord: send to %s failed (%s); retrying in %g s", chat_id, failure.reason, delay
            )

        try:
            return await retrying(
                attempt,
                attempts=len(self._retry_delays) + 1,
                backoff=Backoff(schedule=self._retry_delays),
                sleep=self._sleep,
                on_retry=on_retry,
            )
        except RetriesExhausted as exhausted:
            raise ChannelError(
                f"Discord did not take the message after {tries(exhausted.attempts)}: "
                f"{exhausted.last.reason}"
            ) from exhausted.last.__cause__

    @contextlib.asynccontextmanager
    async def rest_client(self) -> AsyncIterator[discord.Client]:
        """The running client; while stopped (shutdown flush, restart backoff) a short-lived
        REST-only login, so replies of turns that finish after stop() still go out."""
        client = self._client()
        if client is not None and client.user is not None and not client.is_closed():
            yield client
            return
        point_at(self.config.api_base, self.config.gateway_url)
        temporary = discord.Client(intents=intents(), proxy=self.config.proxy)
        try:
            await temporary.login(bot_token(self.config))
            yield temporary
        finally:
            await temporary.close()

    async def _load_files(self, message: OutboundMessage) -> tuple[Files, list[str]]:
        files: Files = []
        problems: list[str] = []
        for item in message.media:
            try:
                # The file tools' own check, for the trust of the session that attached it.
                path = outbound_file(self.workspace, message, item)
            except PathOutsideRoot:
                log.warning("discord: refusing to send %s: outside the chat's reach", item)
                problems.append(f"(could not attach {item}: outside the workspace or this chat)")
                continue
            try:
                size = path.stat().st_size
                if size > MAX_UPLOAD_BYTES:
                    problems.append(f"(could not attach {item}: {size} bytes is too large)")
                    continue
                files.append((path.name, await asyncio.to_thread(path.read_bytes)))
            except OSError as exc:
                log.warning("discord: cannot attach %s: %s", item, exc)
                problems.append(f"(could not attach {item}: {one_line(exc)})")
        return files, problems


class LiveSurface:
    """Live replies' posts and edits (channels/live.py); `quote(chat)` says whether a
    chat's replies reference the message they answer (groups)."""

    limit = LIVE_LIMIT

    def __init__(self, sender: Callable[[], Sender], quote: Callable[[str], bool]) -> None:
        self._sender = sender
        self._quote = quote

    async def post(self, chat_id: str, reply_to: str, text: str) -> str:
        return await self._sender().post(chat_id, reply_to, text, quote=self._quote(chat_id))

    async def edit(self, chat_id: str, ref: str, text: str) -> None:
        if not await self._sender().edit(chat_id, ref, text):
            raise ChannelError(f"Discord refused the edit of message {ref}")


class Reactor:
    """Status reactions (channels/reactions.py): the bot's own reaction removed, the next
    added (discord.py waits out the reaction routes' rate limits)."""

    def __init__(self, sender: Callable[[], Sender]) -> None:
        self._sender = sender

    async def react(
        self, chat_id: str, message_id: str, emoji: str | None, previous: str | None
    ) -> None:
        try:
            async with self._sender().rest_client() as client:
                target = client.get_partial_messageable(int(chat_id))
                message = target.get_partial_message(int(message_id))
                if previous is not None and client.user is not None:
                    await message.remove_reaction(previous, client.user)
                if emoji is not None:
                    await message.add_reaction(emoji)
        except discord.Forbidden as exc:
            raise ReactionRefused(short(exc)) from exc


class Typing:
    """ "typing..." in a channel from a message's arrival until its reply, bounded."""

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def start(self, chat_id: str, target: discord.abc.Messageable) -> None:
        if chat_id in self._tasks:
            return
        task = asyncio.create_task(_keep_typing(target), name=f"discord typing {chat_id}")
        self._tasks[chat_id] = task
        task.add_done_callback(
            lambda done: self._tasks.pop(chat_id) if self._tasks.get(chat_id) is done else None
        )

    def stop(self, chat_id: str) -> None:
        task = self._tasks.get(chat_id)
        if task is not None:
            task.cancel()

    def stop_all(self) -> None:
        for task in list(self._tasks.values()):
            task.cancel()


async def _keep_typing(target: discord.abc.Messageable) -> None:
    try:
        async with target.typing():
            await asyncio.sleep(TYPING_MAX_SECONDS)
    except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
        log.debug("discord: typing indicator failed: %s", exc)
