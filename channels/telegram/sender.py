"""Replies out: Bot API calls with Telegram's retry rules, formatted parts, files, typing.

Retry rules (`ApiCalls`): a 429 waits the `retry_after` Telegram names; a refused connection
or a 5xx backs off and retries; a timeout after the request went out is not retried, since
Telegram may have acted on it and cannot de-duplicate a send (at most once).
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from clawgate.channels.base import outbound_file
from clawgate.channels.live import STOPPED_LINE, SlowDown, error_tail, with_line
from clawgate.channels.reactions import ReactionRefused
from clawgate.channels.telegram.format import render_parts
from clawgate.channels.telegram.ids import parse_message_id, split_chat_id
from clawgate.kernel.bus import OutboundMessage
from clawgate.kernel.errors import ChannelError, PathOutsideRoot, one_line, tries
from clawgate.kernel.retry import Backoff, RetriesExhausted, Retry, retrying

if TYPE_CHECKING:
    from telegram import Bot, ReplyParameters

log = logging.getLogger(__name__)

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]
BotRef = Callable[[], "Bot"]

# 1, 2, 4 ... s after a network failure, at most 30 s; a 429's retry_after up to 5 minutes.
BACKOFF = Backoff(first=1.0, factor=2.0, cap=30.0, after_cap=300.0)
MAX_PHOTO_BYTES = 10 * 1024 * 1024
# What a live message shows, in characters: room under Telegram's 4096 UTF-16 units for the
# "…" and the status line, and for a few characters that count twice.
LIVE_LIMIT = 3500
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".gif", ".webp"}


class ApiCalls:
    """Runs one Bot API request under the retry rules above."""

    def __init__(self, *, attempts: int, sleep: Sleep) -> None:
        self._attempts = attempts
        self._sleep = sleep

    async def run(self, request: Callable[[], Awaitable[T]], what: str) -> T:
        from telegram.error import BadRequest, NetworkError, RetryAfter

        async def attempt() -> T:
            try:
                return await request()
            except BadRequest:
                raise  # a NetworkError subclass in PTB, but the request itself is wrong
            except RetryAfter as exc:
                raise Retry(one_line(exc), after=_retry_after_seconds(exc)) from exc
            except NetworkError as exc:
                if not _not_delivered(exc):
                    raise ChannelError(
                        f"telegram: {what} outcome unknown ({one_line(exc)}); not retried "
                        "so it cannot arrive twice"
                    ) from exc
                raise Retry(one_line(exc)) from exc

        def on_retry(number: int, failure: Retry, delay: float) -> None:
            log.warning(
                "telegram: %s failed (%s); retry %d in %.0f s", what, failure.reason, number, delay
            )

        try:
            return await retrying(
                attempt,
                attempts=self._attempts,
                backoff=BACKOFF,
                sleep=self._sleep,
                on_retry=on_retry,
            )
        except RetriesExhausted as exhausted:
            raise ChannelError(
                f"telegram: {what} failed after {tries(exhausted.attempts)} "
                f"({exhausted.last.reason})"
            ) from exhausted.last.__cause__


class Sender:
    """One reply: its text as HTML parts (plain text where Telegram rejects the HTML), then
    its files from the workspace."""

    def __init__(self, bot: BotRef, calls: ApiCalls, workspace: Path) -> None:
        self._bot = bot
        self._calls = calls
        self.workspace = workspace

    async def send(
        self, chat: int, thread: int | None, message: OutboundMessage, quote_id: int | None
    ) -> None:
        reply_parameters = _reply_parameters(chat, quote_id)
        for html_part, plain_part in render_parts(message.text):
            await self._send_part(chat, thread, html_part, plain_part, reply_parameters)
            reply_parameters = None
        for path in message.media:
            await self._send_file(chat, thread, message, path)

    async def finish_live(
        self,
        chat: int,
        thread: int | None,
        ref: str,
        shown: str,
        message: OutboundMessage,
        quote_id: int | None,
    ) -> None:
        """The live message `ref` (showing `shown`) made into `message`: its first part
        edited in as HTML, the rest sent as new messages. A stopped turn keeps what showed
        with STOPPED_LINE under it; a failed one gets the error in place of its unfinished
        line. If the message cannot be edited (deleted), `message` is sent anew instead."""
        if message.stopped is not None or message.is_error:
            ending = (
                with_line(shown, STOPPED_LINE)
                if message.stopped is not None
                else error_tail(shown, message.text)
            )
            if not await self._edit(chat, ref, ending, ending, html=False):
                await self.send(chat, thread, message, quote_id)
            return
        parts = render_parts(message.text)
        reply_parameters = _reply_parameters(chat, quote_id)
        if parts and await self._edit(chat, ref, *parts[0], html=True):
            parts, reply_parameters = parts[1:], None
        for html_part, plain_part in parts:
            await self._send_part(chat, thread, html_part, plain_part, reply_parameters)
            reply_parameters = None
        for path in message.media:
            await self._send_file(chat, thread, message, path)

    async def _edit(self, chat: int, ref: str, html_text: str, plain: str, *, html: bool) -> bool:
        """Edit message `ref`; False when Telegram refuses (the message is gone)."""
        from telegram.error import BadRequest

        bot = self._bot()

        async def edit(text: str, mode: str | None) -> None:
            try:
                await self._calls.run(
                    lambda: bot.edit_message_text(
                        text, chat_id=chat, message_id=int(ref), parse_mode=mode
                    ),
                    "editMessageText",
                )
            except BadRequest as exc:
                if "not modified" not in str(exc).lower():
                    raise

        try:
            try:
                await edit(html_text, "HTML" if html else None)
            except BadRequest as exc:
                if not html or "can't parse entities" not in str(exc).lower():
                    raise
                log.info("telegram: HTML rejected (%s); editing in plain text", exc)
                await edit(plain, None)
        except BadRequest as exc:
            log.warning("telegram: live message %s not edited (%s); sending anew", ref, exc)
            return False
        return True

    async def reply_plain(self, chat: int, text: str) -> None:
        """A best-effort plain message (the pairing reply); a failure is only logged."""
        bot = self._bot()
        try:
            await self._calls.run(lambda: bot.send_message(chat, text), "sendMessage")
        except Exception as exc:
            log.warning("telegram: reply to %s not sent (%s)", chat, one_line(exc))

    async def send_card(self, chat: int, thread: int | None, message: OutboundMessage) -> None:
        """Plain text with the message's choices as one row of inline buttons."""
        from telegram import InlineKeyboardButton, InlineKeyboardMarkup

        bot = self._bot()
        keyboard = InlineKeyboardMarkup(
            [[InlineKeyboardButton(c.label, callback_data=c.id) for c in message.choices]]
        )
        await self._calls.run(
            lambda: bot.send_message(
                chat, message.text, message_thread_id=thread, reply_markup=keyboard
            ),
            "sendMessage",
        )

    async def _send_part(
        self,
        chat: int,
        thread: int | None,
        html_part: str,
        plain_part: str,
        reply_parameters: ReplyParameters | None,
    ) -> None:
        from telegram.error import BadRequest

        bot = self._bot()
        try:
            await self._calls.run(
                lambda: bot.send_message(
                    chat,
                    html_part,
                    parse_mode="HTML",
                    message_thread_id=thread,
                    reply_parameters=reply_parameters,
                ),
                "sendMessage",
            )
        except BadRequest as exc:
            if "can't parse entities" not in str(exc).lower():
                raise
            log.info("telegram: HTML rejected (%s); sending that part as plain text", exc)
            await self._calls.run(
                lambda: bot.send_message(
                    chat,
                    plain_part,
                    message_thread_id=thread,
                    reply_parameters=reply_parameters,
                ),
                "sendMessage",
            )

    async def _send_file(
        self, chat: int, thread: int | None, message: OutboundMessage, relative: str
    ) -> None:
        bot = self._bot()
        path, data = await asyncio.to_thread(_read_file, self.workspace, message, relative)
        if path.suffix.lower() in IMAGE_SUFFIXES and len(data) <= MAX_PHOTO_BYTES:
            await self._calls.run(
                lambda: bot.send_photo(
                    chat, photo=data, filename=path.name, message_thread_id=thread
                ),
                "sendPhoto",
            )
        else:
            await self._calls.run(
                lambda: bot.send_document(
                    chat, document=data, filename=path.name, message_thread_id=thread
                ),
                "sendDocument",
            )


class LiveSurface:
    """Live replies' plain posts and edits (channels/live.py). An edit is not retried: a 429
    becomes SlowDown, and the next edit carries the latest text anyway."""

    limit = LIVE_LIMIT

    def __init__(self, bot: BotRef, calls: ApiCalls) -> None:
        self._bot = bot
        self._calls = calls

    async def post(self, chat_id: str, reply_to: str, text: str) -> str:
        chat, thread = split_chat_id(chat_id)
        _, quote_id = parse_message_id(reply_to)
        bot = self._bot()
        sent = await self._calls.run(
            lambda: bot.send_message(
                chat,
                text,
                message_thread_id=thread,
                reply_parameters=_reply_parameters(chat, quote_id),
            ),
            "sendMessage",
        )
        return str(sent.message_id)

    async def edit(self, chat_id: str, ref: str, text: str) -> None:
        from telegram.error import BadRequest, RetryAfter

        chat, _ = split_chat_id(chat_id)
        try:
            await self._bot().edit_message_text(text, chat_id=chat, message_id=int(ref))
        except RetryAfter as exc:
            raise SlowDown(_retry_after_seconds(exc)) from exc
        except BadRequest as exc:
            if "not modified" not in str(exc).lower():
                raise


class Reactor:
    """Status reactions (channels/reactions.py) through setMessageReaction; a bot has one
    reaction per message, so each replaces the last."""

    def __init__(self, bot: BotRef) -> None:
        self._bot = bot

    async def react(
        self, chat_id: str, message_id: str, emoji: str | None, previous: str | None
    ) -> None:
        from telegram.error import BadRequest, Forbidden

        chat, _ = split_chat_id(chat_id)
        _, telegram_id = parse_message_id(message_id)
        if telegram_id is None:
            return
        try:
            await self._bot().set_message_reaction(chat, telegram_id, reaction=emoji)
        except (BadRequest, Forbidden) as exc:
            raise ReactionRefused(one_line(exc)) from exc


class Typing:
    """ "typing..." in a chat while its turn runs, renewed every few seconds, bounded."""

    def __init__(self, bot: BotRef, *, interval: float, limit: float) -> None:
        self._bot = bot
        self._interval = interval
        self._limit = limit
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def start(self, chat_id: str) -> None:
        task = self._tasks.get(chat_id)
        if task is None or task.done():
            self._tasks[chat_id] = asyncio.create_task(
                self._keep_typing(chat_id), name=f"telegram typing {chat_id}"
            )

    def stop(self, chat_id: str) -> None:
        task = self._tasks.pop(chat_id, None)
        if task is not None:
            task.cancel()

    def stop_all(self) -> None:
        for chat_id in list(self._tasks):
            self.stop(chat_id)

    async def _keep_typing(self, chat_id: str) -> None:
        chat, thread = split_chat_id(chat_id)
        bot = self._bot()
        loop = asyncio.get_running_loop()
        # Bounded: a turn that never replies must not leave "typing..." up forever.
        deadline = loop.time() + self._limit
        while loop.time() < deadline:
            try:
                await bot.send_chat_action(chat, "typing", message_thread_id=thread)
            except Exception as exc:
                log.debug("telegram: typing action failed (%s)", one_line(exc))
            await asyncio.sleep(self._interval)


def _reply_parameters(chat: int, quote_id: int | None) -> ReplyParameters | None:
    from telegram import ReplyParameters

    # In a busy group the quote shows whom we answer; in a private chat it is noise.
    if quote_id is None or chat > 0:
        return None
    return ReplyParameters(message_id=quote_id, allow_sending_without_reply=True)


def _read_file(workspace: Path, message: OutboundMessage, relative: str) -> tuple[Path, bytes]:
    try:
        # The file tools' own check, for the trust of the session that attached the file.
        path = outbound_file(workspace, message, relative)
    except PathOutsideRoot:
        path = None
    if path is None or not path.is_file():
        raise ChannelError(f"telegram: cannot send {relative}: not a file in the workspace")
    return path, path.read_bytes()


def _not_delivered(exc: Exception) -> bool:
    """True when Telegram certainly did not act on the request, so a retry cannot double it."""
    import httpx
    from telegram.error import TelegramError, TimedOut

    cause = exc.__cause__
    if isinstance(exc, TimedOut):
        return isinstance(cause, httpx.ConnectTimeout | httpx.PoolTimeout)
    if cause is None or isinstance(cause, TelegramError):
        return True  # Telegram answered with an error status (5xx)
    return isinstance(cause, httpx.ConnectError)


def _retry_after_seconds(exc: Exception) -> float:
    value = getattr(exc, "_retry_after", None)  # a timedelta; the public property warns
    if not isinstance(value, timedelta):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = exc.retry_after  # type: ignore[attr-defined]
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value)
