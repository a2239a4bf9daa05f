"""`TelegramChannel`: python-telegram-bot's `Bot` only, our own long-polling loop.

Why our own loop instead of PTB's Updater: the offset that confirms an update must not be
sent before the update is on disk. Each fetched batch is normalised and appended to the
journal (fsynced) before the next getUpdates call confirms it; each published update is
marked answered once its reply is on its way. On start, whatever was journaled but never
answered is published again - so a kill -9 between fetching and answering costs nothing and
answers nothing twice. A batch the journal cannot store (a full disk) stays unconfirmed:
polling backs off and fetches it again, and while the disk stays full each sender is told
once (channels/unstored.py).

An update PTB cannot parse makes `get_updates` raise for the whole batch, every time: the
poll request keeps the raw batch, so the unreadable update is quarantined (journal.py),
confirmed and skipped with one warning, and the rest are read one by one. Polling that has
failed for over a minute makes `failing()` report the last error (the manager shows the
channel as failing).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawgate.channels.access import AccessPolicy
from clawgate.channels.base import StreamOpened
from clawgate.channels.chat_channel import ChatChannel
from clawgate.channels.journal import is_stop
from clawgate.channels.live import LiveReplies, StreamLog
from clawgate.channels.reactions import TELEGRAM_MARKS, StatusReactions
from clawgate.channels.telegram.http import bot_request, trusting
from clawgate.channels.telegram.ids import parse_message_id, split_chat_id
from clawgate.channels.telegram.journal import InboundJournal
from clawgate.channels.telegram.media import MediaFetcher
from clawgate.channels.telegram.normalise import BotIdentity, Normaliser
from clawgate.channels.telegram.raw_request import RawKeeping, raw_keeping_request
from clawgate.channels.telegram.sender import ApiCalls, LiveSurface, Reactor, Sender, Typing
from clawgate.channels.unstored import Unstored, until_stored
from clawgate.kernel.bus import InboundMessage, MessageBus, OutboundMessage, ReplyDraft
from clawgate.kernel.errors import ChannelError, CredentialsRejected, one_line
from clawgate.kernel.retry import Backoff, Retry, retrying
from clawgate.kernel.storage import DiskWriter

if TYPE_CHECKING:
    from telegram import Bot, Update
    from telegram.request import HTTPXRequest

    from clawgate.kernel.config import TelegramConfig

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]

BOT_COMMANDS = (
    ("new", "Start a fresh session"),
    ("stop", "Cancel the running reply"),
    ("help", "List the commands"),
    ("status", "Model, session and usage"),
    ("model", "Show or switch the model"),
    ("usage", "What the model cost (owner only)"),
)
ALLOWED_UPDATES = ["message", "edited_message", "callback_query"]
POLL_BACKOFF = Backoff(first=1.0, factor=2.0, cap=60.0)
SEND_ATTEMPTS = 5
TYPING_INTERVAL = 4.0
TYPING_MAX = 120.0
# Polling that has failed without a success for this long is shown as failing.
FAILING_AFTER = 60.0


class TelegramChannel(ChatChannel):
    name = "telegram"

    def __init__(
        self,
        config: TelegramConfig,
        bus: MessageBus,
        *,
        policy: AccessPolicy,
        workspace: Path,
        state_dir: Path,
        writer: DiskWriter | None = None,
        sleep: Sleep = asyncio.sleep,
        send_attempts: int = SEND_ATTEMPTS,
        typing_interval: float = TYPING_INTERVAL,
        typing_max: float = TYPING_MAX,
        read_timeout: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        workspaces: Mapping[str, Path] | None = None,
    ) -> None:
        """`workspaces`: on a bot several agents answer through, each agent's workspace by
        name, where the files its replies attach are found (else `workspace`)."""
        super().__init__(bus)
        self.config = config
        self._streaming = config.streaming
        self.policy = policy
        self.workspace = workspace
        writer = writer or DiskWriter()
        self.journal = InboundJournal(state_dir / "journal.jsonl", writer=writer)
        self._sleep = sleep
        self._read_timeout = read_timeout
        self._bot: Bot | None = None
        self._identity = BotIdentity()
        calls = ApiCalls(attempts=send_attempts, sleep=sleep)
        self._sender = Sender(self._require_bot, calls, workspace)
        self._agent_senders = {
            agent: Sender(self._require_bot, calls, path)
            for agent, path in (workspaces or {}).items()
            if path != workspace
        }
        self._typing = Typing(self._require_bot, interval=typing_interval, limit=typing_max)
        self._live = LiveReplies(
            LiveSurface(self._require_bot, calls),
            StreamLog(state_dir / "streams.jsonl", writer),
            clock=clock,
            sleep=sleep,
        )
        self._reactions = StatusReactions(
            self.name, Reactor(self._require_bot), TELEGRAM_MARKS, enabled=config.reactions
        )
        self._normaliser = Normaliser(
            config,
            policy,
            self._identity,
            MediaFetcher(workspace, calls, writer),
            self._sender.reply_plain,
            self._notify_owners,
        )
        self._unstored = Unstored(self.name, self._tell)
        self._poller: asyncio.Task[None] | None = None
        self._poll_request: HTTPXRequest | None = None
        self._send_request: HTTPXRequest | None = None
        self._receiving = False
        self._clock = clock
        self.polls_failed = 0
        self._failing_since: float | None = None
        self._poll_error: str | None = None
        # Per start (reset there): bot commands set and webhook dropped; another poller seen.
        self._prepared = False
        self._in_conflict = False

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        from telegram.error import InvalidToken, TelegramError

        await self.close()  # a start after a failed one: the new bot replaces the old
        self._bot = self._make_bot()
        replay = await self.journal.load()
        try:
            await self._identify()
        except InvalidToken:
            raise CredentialsRejected(
                "telegram: the bot token was rejected; check [channels.telegram] token"
            ) from None
        except TelegramError as exc:
            # Not fatal: the polling loop keeps trying, and the rest of the gateway runs.
            log.warning("telegram: cannot reach the Bot API yet (%s); retrying", one_line(exc))
        self._receiving = True
        await self._live.recover()
        for update_id, message in replay:
            log.info("telegram: answering update %d, fetched before the last stop", update_id)
            await self._publish(message)
        self._prepared, self._in_conflict = False, False
        self._poller = asyncio.create_task(self._poll_forever(), name="telegram polling")

    async def stop(self) -> None:
        # Sends keep working after stop: the gateway flushes replies of running turns later.
        self._receiving = False
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
            self._poller = None
        self._typing.stop_all()
        if self._poll_request is not None:
            with contextlib.suppress(Exception):
                await self._poll_request.shutdown()
            self._poll_request = None

    async def close(self) -> None:
        # Turns the shutdown cancelled leave their live replies marked, not hanging.
        await self._live.cut_all()
        await self._reactions.close()
        request, self._send_request = self._send_request, None
        if request is not None:
            with contextlib.suppress(Exception):
                await request.shutdown()

    def _make_bot(self) -> Bot:
        from telegram import Bot

        if self.config.token is None:
            raise ChannelError("telegram: no token configured ([channels.telegram] token)")
        proxy = self.config.proxy
        self._poll_request = raw_keeping_request(
            read_timeout=self._read_timeout, proxy=proxy, httpx_kwargs=trusting()
        )
        # Typing actions and replies to several chats go out side by side.
        self._send_request = bot_request(
            connection_pool_size=16,
            read_timeout=self._read_timeout,
            write_timeout=self._read_timeout,
            media_write_timeout=60.0,
            proxy=proxy,
        )
        return Bot(
            self.config.token.get_secret_value(),
            base_url=self.config.base_url,
            base_file_url=self.config.base_file_url,
            request=self._send_request,
            get_updates_request=self._poll_request,
        )

    async def _identify(self) -> None:
        bot = self._require_bot()
        me = await bot.get_me()
        self._identity.id, self._identity.username = me.id, me.username or ""
        log.info("telegram: connected as @%s (id %d)", me.username, me.id)

    def connected(self) -> bool:
        """True once the Bot API has answered (getMe): until then the channel is not ready."""
        return self._identity.id is not None

    def _require_bot(self) -> Bot:
        if self._bot is None:
            raise ChannelError("telegram: channel is not started")
        return self._bot

    # -- receiving -------------------------------------------------------------------------

    def failing(self) -> str | None:
        """The last polling error, once polling has failed without a break for a minute."""
        since = self._failing_since
        if since is None or self._clock() - since < FAILING_AFTER:
            return None
        return self._poll_error

    def _poll_failed(self, error: str) -> None:
        if self._failing_since is None:
            self._failing_since = self._clock()
        self._poll_error = error

    async def _poll_forever(self) -> None:
        """Poll until cancelled; failures back off (POLL_BACKOFF), a success starts afresh."""

        def on_retry(_: int, failure: Retry, delay: float) -> None:
            # A conflict or a rejected token was logged where it happened (once, not per try).
            if failure.__cause__ is not None:
                log.warning("telegram: %s; retrying in %.0f s", failure.reason, delay)

        while True:
            await retrying(
                self._poll_once,
                attempts=None,
                backoff=POLL_BACKOFF,
                sleep=self._sleep,
                on_retry=on_retry,
            )

    async def _poll_once(self) -> None:
        """One batch of updates fetched and accepted; a failure raises Retry."""
        from telegram.error import Conflict, InvalidToken

        try:
            if not self._prepared:
                await self._prepare()
                self._prepared = True
            updates, unreadable = await self._fetch()
            if self._in_conflict:
                log.info("telegram: polling again, the other bot instance is gone")
            self._in_conflict = False
            await self._accept(updates, unreadable)
            self._failing_since = None
        except Conflict:
            if not self._in_conflict:
                log.error(
                    "telegram: another bot instance is polling this token; "
                    "retrying with backoff until it stops"
                )
            self._in_conflict = True
            self._poll_failed("another bot instance is polling this token")
            raise Retry("another bot instance is polling this token") from None
        except InvalidToken:
            log.error("telegram: the bot token was rejected; check [channels.telegram] token")
            self._poll_failed("the bot token was rejected")
            # No use asking again soon: wait the longest, until a person fixes the token.
            raise Retry("the bot token was rejected", after=POLL_BACKOFF.cap) from None
        except Exception as exc:
            self.polls_failed += 1
            self._poll_failed(f"polling failed: {one_line(exc)}")
            raise Retry(f"polling failed ({one_line(exc)})") from exc

    async def _prepare(self) -> None:
        from telegram import BotCommand

        bot = self._require_bot()
        if self._identity.id is None:
            await self._identify()
        # A webhook left behind by another tool makes every getUpdates fail; pending updates
        # are kept (never drop_pending_updates: they are messages people sent us).
        await bot.delete_webhook(drop_pending_updates=False)
        try:
            await bot.set_my_commands([BotCommand(n, d) for n, d in BOT_COMMANDS])
        except Exception as exc:
            log.warning("telegram: could not register commands (%s)", one_line(exc))

    async def _fetch(self) -> tuple[list[Update], list[int]]:
        """One getUpdates: the updates, and the ids of those PTB could not parse (already
        quarantined)."""
        from telegram import Update
        from telegram.error import TelegramError

        bot = self._require_bot()
        request = self._poll_request
        if not isinstance(request, RawKeeping):
            raise ChannelError("telegram: channel is not started")
        request.last_payload = None
        try:
            updates = await bot.get_updates(
                offset=self.journal.high + 1 if self.journal.high else None,
                timeout=self.config.poll_timeout,
                allowed_updates=ALLOWED_UPDATES,
            )
            return list(updates), []
        except TelegramError:
            raise
        except Exception:
            raw = request.last_result()
            if not isinstance(raw, list):
                raise  # not a parse failure: the request itself broke
        parsed: list[Update] = []
        bad: list[tuple[int | None, Any, str]] = []
        for item in raw:
            try:
                parsed.append(Update.de_json(item, bot))
            except Exception as exc:
                update_id = item.get("update_id") if isinstance(item, dict) else None
                bad.append((update_id if isinstance(update_id, int) else None, item, one_line(exc)))
        fresh = [b for b in bad if b[0] is None or b[0] > self.journal.high]
        await self.journal.quarantine(fresh)
        for update_id, _, why in fresh:
            log.warning(
                "telegram: update %s cannot be read (%s); kept in %s and skipped",
                update_id,
                why,
                self.journal.quarantine_path,
            )
        return parsed, [u for u, _, _ in bad if u is not None]

    async def _accept(self, updates: Iterable[Update], unreadable: Iterable[int] = ()) -> None:
        """Normalise a batch, journal it durably, then publish it."""
        entries: list[tuple[int, InboundMessage | None]] = [
            (u, None) for u in unreadable if u > self.journal.high
        ]
        for update in updates:
            if update.update_id <= self.journal.high:
                continue  # handed out again because its confirmation never arrived
            try:
                message = await self._normaliser.normalise(update)
            except Exception:
                log.exception("telegram: update %d could not be read; skipped", update.update_id)
                message = None
            entries.append((update.update_id, message))
        entries.sort(key=lambda entry: entry[0])
        # A /stop acts on the turn running now; replayed after a restart it would only
        # answer "Nothing is running", so it is journaled as nothing to answer; so is a
        # pressed button, whose card a restart expires.
        try:
            await self.journal.record(
                (u, None if m is None or is_stop(m.text) or m.choice else m) for u, m in entries
            )
        except OSError as exc:
            # Unconfirmed, so Telegram hands the batch out again at the next poll.
            await self._unstored.failed([m for _, m in entries], exc)
            raise
        self._unstored.stored()
        for _, message in entries:
            if message is not None:
                await self._publish(message)

    async def _publish(self, message: InboundMessage) -> None:
        if message.choice is not None:
            # Stops the button's spinner; what the press did comes as a message.
            query_id = message.message_id.removeprefix("callback:")
            try:
                await self._require_bot().answer_callback_query(query_id)
            except Exception as exc:
                log.info("telegram: answerCallbackQuery failed (%s)", one_line(exc))
        await self.bus.publish_inbound(message)

    async def _tell(self, chat_id: str, text: str) -> None:
        chat, _ = split_chat_id(chat_id)
        await self._sender.reply_plain(chat, text)

    async def _notify_owners(self, text: str) -> None:
        # Through the bus like any reply: the manager redacts it and the sender retries it.
        for owner in self.policy.owner_ids():
            await self.bus.publish_outbound(
                OutboundMessage(channel=self.name, chat_id=owner, text=text)
            )

    async def admitted(self, message: InboundMessage, accepted: bool) -> None:
        """The dispatcher's decision: typing starts only for a message that will be answered;
        one that will not (over the rate limit: kept in its session by now) is marked
        answered, so no restart replays it."""
        if accepted:
            if self._receiving and not is_stop(message.text):
                self._typing.start(message.chat_id)
            return
        update_id, _ = parse_message_id(message.message_id)
        if update_id is not None:
            await self.journal.answered([update_id])

    # -- sending ---------------------------------------------------------------------------

    async def _opening(self, draft: ReplyDraft, opened: StreamOpened) -> None:
        update_id, _ = parse_message_id(draft.reply_to)
        await self._answered(draft.chat_id, update_id)
        await self._live.log.opened((draft.chat_id, draft.reply_to))
        await opened(draft)

    async def _send(self, message: OutboundMessage) -> None:
        chat, thread = split_chat_id(message.chat_id)
        update_id, quote_id = parse_message_id(message.reply_to)
        live = await self._live.take(message.chat_id, message.stopped or message.reply_to)
        # At most once: the journal hears of the answer before the first request goes out.
        # Telegram cannot de-duplicate a send, so marking it afterwards would let a kill -9
        # between Telegram taking the reply and the journal line replay the update and send
        # the stored reply a second time. The cost: a kill during the send itself leaves that
        # reply stored but unsent. A send that finally fails is answered too: the manager
        # records the failure in the session.
        if message.stopped is not None:
            # "Stopped." answers the stopped turn's message alone (its reply_to, the /stop, was
            # journaled as nothing to answer): what is queued behind it still runs.
            stopped, _ = parse_message_id(message.stopped)
            if stopped is not None:
                await until_stored(
                    lambda: self.journal.answered([stopped]),
                    f"telegram: the answered mark of {stopped}",
                    self._sleep,
                )
            self._typing.stop(message.chat_id)
            if self._receiving and self.journal.waiting(message.chat_id):
                self._typing.start(message.chat_id)
        else:
            await self._answered(message.chat_id, update_id)
        sender = self._agent_senders.get(message.agent or "", self._sender)
        if message.choices:
            await sender.send_card(chat, thread, message)
            return
        if live is None:
            await sender.send(chat, thread, message, quote_id)
            return
        try:
            await sender.finish_live(chat, thread, live.ref or "", live.shown, message, quote_id)
        finally:
            await self._live.finished(live)

    async def _answered(self, chat_id: str, update_id: int | None) -> None:
        if update_id is None:
            # Not a reply to one message (a rate-limit notice, a scheduled message).
            self._typing.stop(chat_id)
            return
        # Messages of one chat run in order, one at a time, so when this update's reply goes
        # out every earlier one's turn has ended too (a replayed one skipped without a reply).
        await until_stored(
            lambda: self.journal.answered_through(chat_id, update_id),
            f"telegram: the answered mark of {update_id}",
            self._sleep,
        )
        self._typing.stop(chat_id)
        if self._receiving and any(m.chat_id == chat_id for m in self.journal.pending.values()):
            self._typing.start(chat_id)
