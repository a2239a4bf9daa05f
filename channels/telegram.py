"""Telegram through python-telegram-bot: our own long-polling loop, a durable inbound journal,
access rules, media, and delivery that neither drops nor doubles a reply.

Why our own loop instead of PTB's Updater: the offset that confirms an update must not be
sent before the update is on disk. Each fetched batch is normalised and appended to
`<data_dir>/channels/telegram/journal.jsonl` (fsynced) before the next getUpdates call
confirms it; each published update is marked answered once its reply went out. On start,
whatever was journaled but never answered is published again - so a kill -9 between
fetching and answering costs nothing and answers nothing twice.

`InboundMessage.message_id` is `"<update_id>:<telegram message id>"`: the update id finds the
journal entry, the message id is what a reply in a group quotes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import warnings
from collections.abc import Awaitable, Callable, Iterable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from clawgate.channels.access import AccessPolicy
from clawgate.channels.base import Channel, as_seen_by, media_folder
from clawgate.channels.pairing import PairingStore
from clawgate.channels.telegram_format import MAX_MESSAGE_UNITS, render_parts
from clawgate.kernel.bus import InboundMessage, MessageBus, OutboundMessage, Trust
from clawgate.kernel.errors import ChannelError

if TYPE_CHECKING:
    from telegram import Bot, Message, ReplyParameters, Update
    from telegram.request import HTTPXRequest

    from clawgate.kernel.config import Config, TelegramConfig

log = logging.getLogger(__name__)

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]

BOT_COMMANDS = (
    ("new", "Start a fresh session"),
    ("stop", "Cancel the running reply"),
    ("help", "List the commands"),
    ("status", "Model, session and usage"),
    ("model", "Show or switch the model"),
)
ALLOWED_UPDATES = ["message", "edited_message"]
POLL_BACKOFF_MIN = 1.0
POLL_BACKOFF_MAX = 60.0
SEND_ATTEMPTS = 5
MAX_RETRY_AFTER = 300.0
TYPING_INTERVAL = 4.0
TYPING_MAX = 120.0
QUOTE_MAX_CHARS = 1000
# The Bot API refuses getFile for anything larger.
MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024
MAX_PHOTO_BYTES = 10 * 1024 * 1024
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".gif", ".webp"}


def create_channel(
    channel_config: TelegramConfig, bus: MessageBus, config: Config, **options: Any
) -> TelegramChannel:
    # httpx logs every request URL at INFO, and a Bot API URL contains the token.
    httpx_log = logging.getLogger("httpx")
    if httpx_log.level == logging.NOTSET:
        httpx_log.setLevel(logging.WARNING)
    store = PairingStore(config.data_dir / "pairing.json")
    policy = AccessPolicy("telegram", channel_config, store)
    return TelegramChannel(
        bus,
        channel_config,
        policy=policy,
        workspace=config.workspace,
        state_dir=config.data_dir / "channels" / "telegram",
        **options,
    )


class InboundJournal:
    """Append-only record of fetched updates, so none is lost or answered twice.

    Lines: `{"update": id, "message": {...}}` (published, to answer), `{"update": id}`
    (seen, nothing to answer), `{"answered": id}`, and after compaction `{"high": id}`.
    """

    def __init__(self, path: Path, *, compact_after: int = 1000) -> None:
        self.path = path
        self.compact_after = compact_after
        self.high = 0  # the highest update id recorded: anything at or below is a duplicate
        self.pending: dict[int, InboundMessage] = {}
        self._lines = 0
        self._fd: int | None = None
        self._lock = asyncio.Lock()

    async def load(self) -> list[tuple[int, InboundMessage]]:
        """Read the journal; the unanswered updates, oldest first."""
        await asyncio.to_thread(self._load)
        return sorted(self.pending.items())

    async def record(self, entries: Iterable[tuple[int, InboundMessage | None]]) -> None:
        """Append one batch and fsync it: after this the batch may be confirmed."""
        entries = list(entries)
        if not entries:
            return
        lines = []
        for update_id, message in entries:
            line: dict[str, Any] = {"update": update_id}
            if message is not None:
                line["message"] = message.model_dump(mode="json")
            lines.append(line)
        async with self._lock:
            await asyncio.to_thread(self._append, lines)
            for update_id, message in entries:
                self.high = max(self.high, update_id)
                if message is not None:
                    self.pending[update_id] = message

    async def answered(self, update_ids: Iterable[int]) -> None:
        ids = [u for u in update_ids if u in self.pending]
        if not ids:
            return
        async with self._lock:
            await asyncio.to_thread(self._append, [{"answered": u} for u in ids])
            for update_id in ids:
                self.pending.pop(update_id, None)
            if self._lines > self.compact_after and self._lines > 2 * len(self.pending):
                await asyncio.to_thread(self._compact)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _load(self) -> None:
        self.pending.clear()
        self._lines = 0
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return
        answered: set[int] = set()
        for number, line in enumerate(raw.split(b"\n"), 1):
            if not line.strip():
                continue
            self._lines += 1
            try:
                entry = json.loads(line)
                if "answered" in entry:
                    answered.add(int(entry["answered"]))
                elif "high" in entry:
                    self.high = max(self.high, int(entry["high"]))
                else:
                    update_id = int(entry["update"])
                    self.high = max(self.high, update_id)
                    if entry.get("message") is not None:
                        message = InboundMessage.model_validate(entry["message"])
                        self.pending[update_id] = message
            except (ValueError, KeyError, TypeError) as exc:
                # A torn last line after a crash: that update was never confirmed, so
                # Telegram hands it out again.
                log.warning("%s: line %d skipped (%s)", self.path, number, exc)
        for update_id in answered:
            self.pending.pop(update_id, None)

    def _open(self) -> int:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            # A file that ends mid-line (torn write) must not glue onto the next record.
            size = os.fstat(self._fd).st_size
            if size:
                with open(self.path, "rb") as existing:
                    existing.seek(size - 1)
                    if existing.read(1) != b"\n":
                        os.write(self._fd, b"\n")
        return self._fd

    def _append(self, lines: list[dict[str, Any]]) -> None:
        fd = self._open()
        data = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
        os.write(fd, data.encode())
        os.fsync(fd)
        self._lines += len(lines)

    def _compact(self) -> None:
        lines = [{"high": self.high}]
        lines += [
            {"update": u, "message": m.model_dump(mode="json")}
            for u, m in sorted(self.pending.items())
        ]
        data = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
        temp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, self.path)
        folder = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
        self.close()
        self._lines = len(lines)


class TelegramChannel(Channel):
    name = "telegram"
    max_message_chars = MAX_MESSAGE_UNITS

    def __init__(
        self,
        bus: MessageBus,
        settings: TelegramConfig,
        *,
        policy: AccessPolicy,
        workspace: Path,
        state_dir: Path,
        sleep: Sleep = asyncio.sleep,
        send_attempts: int = SEND_ATTEMPTS,
        typing_interval: float = TYPING_INTERVAL,
        typing_max: float = TYPING_MAX,
        read_timeout: float = 10.0,
    ) -> None:
        super().__init__(bus)
        self.settings = settings
        self.policy = policy
        self.workspace = workspace
        self.journal = InboundJournal(state_dir / "journal.jsonl")
        self._sleep = sleep
        self._send_attempts = send_attempts
        self._typing_interval = typing_interval
        self._typing_max = typing_max
        self._read_timeout = read_timeout
        self._bot: Bot | None = None
        self._bot_id: int | None = None
        self._username = ""
        self._poller: asyncio.Task[None] | None = None
        self._poll_request: HTTPXRequest | None = None
        self._typing: dict[str, asyncio.Task[None]] = {}
        self._receiving = False
        self.polls_failed = 0

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        from telegram.error import InvalidToken, TelegramError

        self._bot = self._make_bot()
        replay = await self.journal.load()
        try:
            await self._identify()
        except InvalidToken:
            raise ChannelError(
                "telegram: the bot token was rejected; check [channels.telegram] token"
            ) from None
        except TelegramError as exc:
            # Not fatal: the polling loop keeps trying, and the rest of the gateway runs.
            log.warning("telegram: cannot reach the Bot API yet (%s); retrying", _one_line(exc))
        self._receiving = True
        for update_id, message in replay:
            log.info("telegram: answering update %d, fetched before the last stop", update_id)
            await self._publish(message)
        self._poller = asyncio.create_task(self._poll_forever(), name="telegram polling")

    async def stop(self) -> None:
        # Sends keep working after stop: the gateway flushes replies of running turns later.
        self._receiving = False
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
            self._poller = None
        for chat_id in list(self._typing):
            self._stop_typing(chat_id)
        if self._poll_request is not None:
            with contextlib.suppress(Exception):
                await self._poll_request.shutdown()
            self._poll_request = None

    def _make_bot(self) -> Bot:
        from telegram import Bot
        from telegram.request import HTTPXRequest

        if self.settings.token is None:
            raise ChannelError("telegram: no token configured ([channels.telegram] token)")
        proxy = self.settings.proxy
        self._poll_request = HTTPXRequest(read_timeout=self._read_timeout, proxy=proxy)
        return Bot(
            self.settings.token.get_secret_value(),
            base_url=self.settings.base_url,
            base_file_url=self.settings.base_file_url,
            # Typing actions and replies to several chats go out side by side.
            request=HTTPXRequest(
                connection_pool_size=16,
                read_timeout=self._read_timeout,
                write_timeout=self._read_timeout,
                media_write_timeout=60.0,
                proxy=proxy,
            ),
            get_updates_request=self._poll_request,
        )

    async def _identify(self) -> None:
        bot = self._require_bot()
        me = await bot.get_me()
        self._bot_id, self._username = me.id, me.username or ""

    def _require_bot(self) -> Bot:
        if self._bot is None:
            raise ChannelError("telegram: channel is not started")
        return self._bot

    # -- receiving -------------------------------------------------------------------------

    async def _poll_forever(self) -> None:
        from telegram.error import Conflict, InvalidToken

        bot = self._require_bot()
        delay = POLL_BACKOFF_MIN
        prepared = False
        in_conflict = False
        while True:
            try:
                if not prepared:
                    await self._prepare()
                    prepared = True
                offset = self.journal.high + 1 if self.journal.high else None
                updates = await bot.get_updates(
                    offset=offset,
                    timeout=self.settings.poll_timeout,
                    allowed_updates=ALLOWED_UPDATES,
                )
                if in_conflict:
                    log.info("telegram: polling again, the other bot instance is gone")
                delay, in_conflict = POLL_BACKOFF_MIN, False
                await self._accept(updates)
                continue
            except asyncio.CancelledError:
                raise
            except Conflict:
                if not in_conflict:
                    log.error(
                        "telegram: another bot instance is polling this token; "
                        "retrying with backoff until it stops"
                    )
                in_conflict = True
            except InvalidToken:
                log.error("telegram: the bot token was rejected; check [channels.telegram] token")
                delay = POLL_BACKOFF_MAX
            except Exception as exc:
                self.polls_failed += 1
                log.warning(
                    "telegram: polling failed (%s); retrying in %.0f s", _one_line(exc), delay
                )
            await self._sleep(delay)
            delay = min(delay * 2, POLL_BACKOFF_MAX)

    async def _prepare(self) -> None:
        from telegram import BotCommand

        bot = self._require_bot()
        if self._bot_id is None:
            await self._identify()
        # A webhook left behind by another tool makes every getUpdates fail; pending updates
        # are kept (never drop_pending_updates: they are messages people sent us).
        await bot.delete_webhook(drop_pending_updates=False)
        try:
            await bot.set_my_commands([BotCommand(n, d) for n, d in BOT_COMMANDS])
        except Exception as exc:
            log.warning("telegram: could not register commands (%s)", _one_line(exc))

    async def _accept(self, updates: Iterable[Update]) -> None:
        """Normalise a batch, journal it durably, then publish it."""
        entries: list[tuple[int, InboundMessage | None]] = []
        for update in updates:
            if update.update_id <= self.journal.high:
                continue  # handed out again because its confirmation never arrived
            try:
                message = await self._normalise(update)
            except Exception:
                log.exception("telegram: update %d could not be read; skipped", update.update_id)
                message = None
            entries.append((update.update_id, message))
        # A /stop acts on the turn running now; replayed after a restart it would only
        # answer "Nothing is running", so it is journaled as nothing to answer.
        await self.journal.record(
            (u, None if m is None or _is_stop(m.text) else m) for u, m in entries
        )
        for _, message in entries:
            if message is not None:
                await self._publish(message)

    async def _publish(self, message: InboundMessage) -> None:
        await self.bus.publish_inbound(message)
        if not _is_stop(message.text):
            self._start_typing(message.chat_id)

    async def _normalise(self, update: Update) -> InboundMessage | None:
        """The update as an InboundMessage, or None when it is not for the model."""
        msg = update.message or update.edited_message
        if msg is None or msg.from_user is None or msg.from_user.is_bot:
            return None  # channel posts, service messages, other bots
        user = msg.from_user
        chat = msg.chat
        chat_id = str(chat.id)
        if msg.is_topic_message and msg.message_thread_id:
            chat_id = f"{chat.id}:{msg.message_thread_id}"
        text = msg.text or msg.caption or ""
        if chat.type == "private":
            decision = self.policy.private(str(user.id), user.username)
            if decision.reply:
                await self._reply_plain(chat.id, decision.reply)
            if decision.trust is None:
                return None
            trust, mentioned = decision.trust, True
        elif chat.type in ("group", "supergroup"):
            if not self.policy.group(str(chat.id), chat_id):
                return None
            mentioned = self._addressed(msg, text)
            if self.settings.require_mention and not mentioned:
                return None
            trust = Trust.GROUP
        else:
            return None
        media, notes = await self._download_media(msg, chat_id, trust)
        if not text and not media:
            return None  # stickers, polls, locations: nothing we pass on yet
        body = text
        if update.edited_message is not None:
            body = f"[edited] {body}"
        quoted = _quoted(msg)
        if quoted and not text.startswith("/"):
            body = f"{quoted}\n{body}"
        if notes:
            body = "\n".join([body, *notes]) if body else "\n".join(notes)
        reply = msg.reply_to_message
        return InboundMessage(
            channel=self.name,
            chat_id=chat_id,
            message_id=f"{update.update_id}:{msg.message_id}",
            sender_id=str(user.id),
            sender_name=user.full_name or user.username or str(user.id),
            text=body,
            media=tuple(media),
            trust=trust,
            mentioned=mentioned,
            reply_to=str(reply.message_id) if reply is not None else None,
            timestamp=msg.edit_date or msg.date,
        )

    def _addressed(self, msg: Message, text: str) -> bool:
        """In a group: a mention, a reply to us, or a command not meant for another bot."""
        name = self._username.lower()
        entities = msg.parse_entities() if msg.text else msg.parse_caption_entities()
        for entity, value in entities.items():
            if entity.type == "mention" and name and value[1:].lower() == name:
                return True
            if entity.type == "text_mention" and entity.user and entity.user.id == self._bot_id:
                return True
        if text.startswith("/"):
            target = text.split(maxsplit=1)[0].partition("@")[2].lower()
            return not target or target == name
        if name and re.search(rf"(?<![\w@])@?{re.escape(name)}(?!\w)", text, re.IGNORECASE):
            return True
        replied = msg.reply_to_message
        return bool(replied and replied.from_user and replied.from_user.id == self._bot_id)

    async def _download_media(
        self, msg: Message, chat_id: str, trust: Trust
    ) -> tuple[list[str], list[str]]:
        """Fetch photos, documents and voice into the workspace; (paths, notes for the text)."""
        wanted: list[tuple[str, Any, str]] = []
        if msg.photo:
            largest = max(msg.photo, key=lambda p: (p.width * p.height, p.file_size or 0))
            wanted.append(("photo", largest, f"{largest.file_unique_id}.jpg"))
        if msg.document:
            name = _safe_name(msg.document.file_name or "file")
            wanted.append(("document", msg.document, f"{msg.document.file_unique_id}_{name}"))
        if msg.voice:
            wanted.append(("voice", msg.voice, f"{msg.voice.file_unique_id}.ogg"))
        if msg.audio:
            name = _safe_name(msg.audio.file_name or "audio.mp3")
            wanted.append(("audio", msg.audio, f"{msg.audio.file_unique_id}_{name}"))
        paths: list[str] = []
        notes: list[str] = []
        folder = Path(media_folder(trust, "telegram", _safe_name(chat_id)))
        for kind, attachment, filename in wanted:
            relative = (folder / filename).as_posix()
            if (attachment.file_size or 0) > MAX_DOWNLOAD_BYTES:
                notes.append(f"[{kind}: {filename} not downloaded, larger than 20 MB]")
                continue
            try:
                await self._download(attachment, self.workspace / relative)
            except Exception as exc:
                log.warning("telegram: %s download failed (%s)", kind, _one_line(exc))
                notes.append(f"[{kind}: download failed]")
                continue
            paths.append(relative)
            notes.append(f"[{kind}: {as_seen_by(trust, relative)}]")
        return paths, notes

    async def _download(self, attachment: Any, target: Path) -> None:
        if await asyncio.to_thread(target.exists):
            return  # fetched before a restart
        file = await self._with_retries(attachment.get_file, "getFile")
        data = bytes(await file.download_as_bytearray())
        await asyncio.to_thread(_write_file, target, data)

    # -- sending ---------------------------------------------------------------------------

    async def send(self, message: OutboundMessage) -> None:
        chat, thread = _split_chat_id(message.chat_id)
        update_id, quote_id = _parse_message_id(message.reply_to)
        # At most once: the journal hears of the answer before the first request goes out.
        # Telegram cannot de-duplicate a send, so marking it afterwards would let a kill -9
        # between Telegram taking the reply and the journal line replay the update and send
        # the stored reply a second time. The cost: a kill during the send itself leaves that
        # reply stored but unsent. A send that finally fails is answered too: the manager
        # records the failure in the session.
        await self._answered(message.chat_id, update_id)
        reply_parameters = self._reply_parameters(chat, quote_id)
        for html_part, plain_part in render_parts(message.text):
            await self._send_part(chat, thread, html_part, plain_part, reply_parameters)
            reply_parameters = None
        for path in message.media:
            await self._send_file(chat, thread, path)

    async def _answered(self, chat_id: str, update_id: int | None) -> None:
        if update_id is None:
            # Not a reply to one message (a "Stopped." notice, a scheduled message).
            self._stop_typing(chat_id)
            return
        # Messages of one chat are answered in order, one at a time, so a reply to this
        # update means every earlier one of the chat is done too (a /stopped turn has no
        # reply of its own).
        done = [
            u for u, m in self.journal.pending.items() if m.chat_id == chat_id and u <= update_id
        ]
        await self.journal.answered(done)
        self._stop_typing(chat_id)
        if self._receiving and any(m.chat_id == chat_id for m in self.journal.pending.values()):
            self._start_typing(chat_id)

    def _reply_parameters(self, chat: int, quote_id: int | None) -> ReplyParameters | None:
        from telegram import ReplyParameters

        # In a busy group the quote shows whom we answer; in a private chat it is noise.
        if quote_id is None or chat > 0:
            return None
        return ReplyParameters(message_id=quote_id, allow_sending_without_reply=True)

    async def _send_part(
        self,
        chat: int,
        thread: int | None,
        html_part: str,
        plain_part: str,
        reply_parameters: ReplyParameters | None,
    ) -> None:
        from telegram.error import BadRequest

        bot = self._require_bot()
        try:
            await self._with_retries(
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
            await self._with_retries(
                lambda: bot.send_message(
                    chat,
                    plain_part,
                    message_thread_id=thread,
                    reply_parameters=reply_parameters,
                ),
                "sendMessage",
            )

    async def _reply_plain(self, chat: int, text: str) -> None:
        bot = self._require_bot()
        try:
            await self._with_retries(lambda: bot.send_message(chat, text), "sendMessage")
        except Exception as exc:
            log.warning("telegram: reply to %s not sent (%s)", chat, _one_line(exc))

    async def _send_file(self, chat: int, thread: int | None, relative: str) -> None:
        bot = self._require_bot()
        path, data = await asyncio.to_thread(_read_workspace_file, self.workspace, relative)
        if path.suffix.lower() in IMAGE_SUFFIXES and len(data) <= MAX_PHOTO_BYTES:
            await self._with_retries(
                lambda: bot.send_photo(
                    chat, photo=data, filename=path.name, message_thread_id=thread
                ),
                "sendPhoto",
            )
        else:
            await self._with_retries(
                lambda: bot.send_document(
                    chat, document=data, filename=path.name, message_thread_id=thread
                ),
                "sendDocument",
            )

    async def _with_retries(self, request: Callable[[], Awaitable[T]], what: str) -> T:
        """429 waits retry_after; refused connections and 5xx back off and retry. A timeout
        after the request went out is not retried: Telegram may have delivered it."""
        from telegram.error import BadRequest, NetworkError, RetryAfter

        attempt = 0
        while True:
            attempt += 1
            try:
                return await request()
            except BadRequest:
                raise  # a NetworkError subclass in PTB, but the request itself is wrong
            except RetryAfter as exc:
                delay = min(_retry_after_seconds(exc), MAX_RETRY_AFTER)
                error: Exception = exc
            except NetworkError as exc:
                if not _not_delivered(exc):
                    raise ChannelError(
                        f"telegram: {what} outcome unknown ({_one_line(exc)}); not retried "
                        "so it cannot arrive twice"
                    ) from exc
                delay = min(2.0 ** (attempt - 1), 30.0)
                error = exc
            if attempt >= self._send_attempts:
                raise ChannelError(
                    f"telegram: {what} failed after {attempt} attempts ({_one_line(error)})"
                ) from error
            log.warning(
                "telegram: %s failed (%s); retry %d in %.0f s",
                what,
                _one_line(error),
                attempt,
                delay,
            )
            await self._sleep(delay)

    # -- typing ----------------------------------------------------------------------------

    def _start_typing(self, chat_id: str) -> None:
        task = self._typing.get(chat_id)
        if task is None or task.done():
            self._typing[chat_id] = asyncio.create_task(
                self._keep_typing(chat_id), name=f"telegram typing {chat_id}"
            )

    def _stop_typing(self, chat_id: str) -> None:
        task = self._typing.pop(chat_id, None)
        if task is not None:
            task.cancel()

    async def _keep_typing(self, chat_id: str) -> None:
        chat, thread = _split_chat_id(chat_id)
        bot = self._require_bot()
        loop = asyncio.get_running_loop()
        # Bounded: a turn that never replies must not leave "typing..." up forever.
        deadline = loop.time() + self._typing_max
        while loop.time() < deadline:
            try:
                await bot.send_chat_action(chat, "typing", message_thread_id=thread)
            except Exception as exc:
                log.debug("telegram: typing action failed (%s)", _one_line(exc))
            await asyncio.sleep(self._typing_interval)


def _is_stop(text: str) -> bool:
    head = text.strip().split(maxsplit=1)[0] if text.strip() else ""
    return head.split("@", 1)[0].lower() == "/stop"


def _quoted(msg: Message) -> str:
    """The replied-to text as a Markdown quote, so the model sees what is being answered."""
    replied = msg.reply_to_message
    source = msg.quote.text if msg.quote is not None else None
    if source is None and replied is not None:
        source = replied.text or replied.caption
    if not source:
        return ""
    if len(source) > QUOTE_MAX_CHARS:
        source = source[:QUOTE_MAX_CHARS] + "…"
    return "\n".join(f"> {line}" for line in source.splitlines())


def _split_chat_id(chat_id: str) -> tuple[int, int | None]:
    """`"-100123:7"` -> (-100123, 7): a forum topic's session id names its thread."""
    chat, _, thread = chat_id.partition(":")
    try:
        return int(chat), int(thread) if thread else None
    except ValueError:
        raise ChannelError(f"telegram: {chat_id!r} is not a Telegram chat id") from None


def _parse_message_id(value: str | None) -> tuple[int | None, int | None]:
    """(update id, Telegram message id) from our InboundMessage.message_id."""
    if not value:
        return None, None
    update, _, message = value.partition(":")
    try:
        return int(update), int(message) if message else None
    except ValueError:
        return None, None


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


def _safe_name(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", name).strip("._")
    return cleaned[:100] or "file"


def _read_workspace_file(workspace: Path, relative: str) -> tuple[Path, bytes]:
    root = workspace.resolve()
    path = (root / relative).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        raise ChannelError(f"telegram: cannot send {relative}: not a file in the workspace")
    return path, path.read_bytes()


def _write_file(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(target.name + ".part")
    temp.write_bytes(data)
    os.replace(temp, target)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:300]
