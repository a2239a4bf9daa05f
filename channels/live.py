"""Replies that show while they are written: one platform message, edited as the text grows.

A chat channel with `streaming = "edit"` is handed each `ReplyDraft` of a turn (the gateway
relays the agent's progress, gateway/daemon/streaming.py) and keeps one `LiveReply` per
message being answered:

- the first piece shows once the draft holds FIRST_CHARS characters, or FIRST_WAIT seconds
  after the first draft; then the same message is edited with the latest draft at most once
  every EDIT_EVERY seconds (a platform's "slow down" pushes the next edit back by its wait);
  drafts in between are skipped, never queued;
- live text is plain and cut to one message (`Surface.limit`); the complete reply comes as
  the `OutboundMessage`, and the channel edits the message into its formatted first part and
  sends the rest as new messages with its own splitting rules (`LiveReplies.take`);
- before the first piece is posted, the channel's `opening` runs (the inbound journal marks
  the message answered, the session records `Streamed`), and the stream log below holds the
  reply open; every piece shown is noted there too. A reply still open when the channel
  starts again (a kill -9 mid-reply) is marked cut (`recover`): its message is edited into
  what it showed plus CUT_LINE, or, if its id never reached the log, CUT_LINE is sent alone.

The stream log, `<state dir>/streams.jsonl`, one JSON object a line:

    {"open": reply_to, "chat": chat}                       fsynced before the first post
    {"shown": reply_to, "chat": chat, "ref": id, "text": t} each piece shown (write only)
    {"done": reply_to, "chat": chat}                       finished, stopped or marked

Once no reply is open and the log has grown past COMPACT_AFTER lines it is emptied.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from clawgate.kernel.bus import ReplyDraft
from clawgate.kernel.storage import DiskWriter

log = logging.getLogger(__name__)

FIRST_CHARS = 30
FIRST_WAIT = 1.0
EDIT_EVERY = 1.0
COMPACT_AFTER = 200
CUT_LINE = "✂️ (cut off: I restarted before finishing this reply; ask again for the rest)"
STOPPED_LINE = "⏹ Stopped."
# How often a cut mark is tried again after the platform asked to slow down.
MARK_TRIES = 3

Key = tuple[str, str]  # (chat_id, reply_to)
Opening = Callable[[], Awaitable[None]]
Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]


class SlowDown(Exception):
    """The platform refused an edit for now (a 429): try again after `seconds`."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"slow down for {seconds:g} s")
        self.seconds = seconds


class Surface(Protocol):
    """What a channel gives its live replies: a plain message posted and edited."""

    @property
    def limit(self) -> int:
        """The most characters a live message shows."""
        ...

    async def post(self, chat_id: str, reply_to: str, text: str) -> str:
        """Send `text` as a new message answering `reply_to`; its platform id."""
        ...

    async def edit(self, chat_id: str, ref: str, text: str) -> None:
        """Replace the text of message `ref`; SlowDown when the platform asks to wait."""
        ...


def with_line(text: str, line: str) -> str:
    """`text` with one line under it (the line alone when there is no text)."""
    return f"{text.rstrip()}\n\n{line}" if text.strip() else line


def error_tail(shown: str, error: str) -> str:
    """A partial reply whose turn failed: its unfinished last line replaced by the error."""
    head = shown.rstrip()
    cut = head.rfind("\n")
    head = head[:cut].rstrip() if cut > 0 else ""
    return with_line(head, error)


@dataclass(frozen=True)
class OpenStream:
    chat_id: str
    reply_to: str
    ref: str | None
    text: str


class StreamLog:
    """The replies that began to show and have not been finished (see the module doc)."""

    def __init__(self, path: Path, writer: DiskWriter) -> None:
        self.path = path
        self._writer = writer
        self._open: set[Key] = set()
        self._lines = 0
        self._lock = asyncio.Lock()

    async def load(self) -> list[OpenStream]:
        """The replies left open by the last run, in the order they opened."""
        return await asyncio.to_thread(self._load)

    def holds(self, key: Key) -> bool:
        """Whether the reply is open in the log."""
        return key in self._open

    async def opened(self, key: Key) -> None:
        await self._add({"open": key[1], "chat": key[0]}, sync=True)
        self._open.add(key)

    async def shown(self, key: Key, ref: str, text: str) -> None:
        # A write() survives kill -9; losing it to a power cut costs only the latest text.
        await self._add({"shown": key[1], "chat": key[0], "ref": ref, "text": text}, sync=False)

    async def done(self, key: Key) -> None:
        await self._add({"done": key[1], "chat": key[0]}, sync=False)
        self._open.discard(key)
        async with self._lock:
            # Decided under the lock: a reply that opened while this one's line was written
            # is in `_open` by now, and its line must not be emptied away.
            if not self._open and self._lines >= COMPACT_AFTER:
                await asyncio.to_thread(self._writer.replace, self.path, b"")
                self._lines = 0

    async def _add(self, line: dict[str, Any], *, sync: bool) -> None:
        data = json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n"
        async with self._lock:
            await asyncio.to_thread(self._append, data, sync)
            self._lines += 1

    def _append(self, data: str, sync: bool) -> None:
        self._writer.mkdir(self.path.parent)
        self._writer.append(self.path, data)
        if sync:
            self._writer.fsync(self.path)

    def _load(self) -> list[OpenStream]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        found: dict[Key, OpenStream] = {}
        for line in raw.split(b"\n"):
            if not line.strip():
                continue
            self._lines += 1
            try:
                entry = json.loads(line)
                if "open" in entry:
                    key = (str(entry["chat"]), str(entry["open"]))
                    found[key] = OpenStream(key[0], key[1], None, "")
                elif "shown" in entry:
                    key = (str(entry["chat"]), str(entry["shown"]))
                    found[key] = OpenStream(key[0], key[1], str(entry["ref"]), str(entry["text"]))
                elif "done" in entry:
                    found.pop((str(entry["chat"]), str(entry["done"])), None)
            except (ValueError, KeyError, TypeError) as exc:
                # A torn last line after a crash: at worst a piece shown is not remembered.
                log.warning("%s: line skipped (%s)", self.path, exc)
        self._open = set(found)
        return list(found.values())


class LiveReply:
    """One reply being shown as it is written; its pump task posts and edits."""

    def __init__(
        self,
        key: Key,
        surface: Surface,
        opening: Opening,
        stream_log: StreamLog,
        *,
        clock: Clock,
        sleep: Sleep,
    ) -> None:
        self.chat_id, self.reply_to = key
        self.key = key
        self.ref: str | None = None  # the platform id of the message, once posted
        self.shown = ""  # the reply's text as the message last showed it
        self._text = ""
        self._status: str | None = None
        self._surface = surface
        self._opening = opening
        self._log = stream_log
        self._clock = clock
        self._sleep = sleep
        self._changed = asyncio.Event()
        self._busy = False
        self._closing = False
        self.next_edit = 0.0  # on the clock: no edit before it
        self._last_view = ""
        self._task = asyncio.create_task(self._pump(), name=f"live reply {self.chat_id}")

    def update(self, draft: ReplyDraft) -> None:
        self._text, self._status = draft.text, draft.status
        self._changed.set()

    async def close(self) -> None:
        """Stop posting and editing; a request in flight is let finish (its id is kept)."""
        self._closing = True
        if not self._busy:
            self._task.cancel()
        results = await asyncio.gather(self._task, return_exceptions=True)
        if isinstance(results[0], Exception):
            log.error("live reply in %s failed", self.chat_id, exc_info=results[0])

    def _views(self) -> tuple[str, str]:
        """(the text part, the whole message) as it would show now."""
        status = self._status or ""
        room = self._surface.limit - (len(status) + 2 if status else 0)
        text = self._text
        if len(text) > room:
            text = text[: max(room - 2, 0)].rstrip() + " …"
        return text, with_line(text, status) if status else text

    def _ready(self, first: float) -> bool:
        if len(self._text) >= FIRST_CHARS:
            return True
        return bool(self._views()[1].strip()) and self._clock() >= first + FIRST_WAIT

    async def _pump(self) -> None:
        first = self._clock()
        while not self._ready(first):
            self._changed.clear()
            await self._until_changed(first + FIRST_WAIT - self._clock())
        await self._open()
        while self.ref is not None and not self._closing:
            await self._changed.wait()
            self._changed.clear()
            wait = self.next_edit - self._clock()
            if wait > 0:
                await self._sleep(wait)
            text, view = self._views()
            if view.strip() and view != self._last_view:
                await self._show(text, view)

    async def _until_changed(self, timeout: float) -> None:
        if timeout <= 0 or not self._views()[1].strip():
            await self._changed.wait()
            return
        waits = {
            asyncio.ensure_future(self._changed.wait()),
            asyncio.ensure_future(self._sleep(timeout)),
        }
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()

    async def _open(self) -> None:
        self._busy = True
        try:
            await self._opening()
            text, view = self._views()
            self.ref = await self._surface.post(self.chat_id, self.reply_to, view)
            self._noted(text, view)
            await self._log.shown(self.key, self.ref, text)
        except Exception as exc:
            # The complete reply is sent the usual way when it comes (LiveReplies.take).
            log.warning("live reply in %s not shown: %s", self.chat_id, exc)
        finally:
            self._busy = False

    async def _show(self, text: str, view: str) -> None:
        assert self.ref is not None
        self._busy = True
        try:
            await self._surface.edit(self.chat_id, self.ref, view)
        except SlowDown as slow:
            self.next_edit = self._clock() + slow.seconds
            self._changed.set()  # the latest text goes out once the wait is over
            return
        except Exception as exc:
            # A live edit is a preview: the final edit (or its follow-up) carries the reply.
            log.info("live edit in %s failed: %s", self.chat_id, exc)
            return
        finally:
            self._busy = False
        self._noted(text, view)
        await self._log.shown(self.key, self.ref, text)

    def _noted(self, text: str, view: str) -> None:
        self.shown, self._last_view = text, view
        self.next_edit = self._clock() + EDIT_EVERY


class LiveReplies:
    """A channel's live replies by (chat, message answered), and its stream log."""

    def __init__(
        self, surface: Surface, stream_log: StreamLog, *, clock: Clock, sleep: Sleep
    ) -> None:
        self._surface = surface
        self.log = stream_log
        self._clock = clock
        self._sleep = sleep
        self._live: dict[Key, LiveReply] = {}
        self._recovered = False

    def update(self, draft: ReplyDraft, opening: Opening) -> None:
        key = (draft.chat_id, draft.reply_to)
        live = self._live.get(key)
        if live is None:
            live = LiveReply(
                key, self._surface, opening, self.log, clock=self._clock, sleep=self._sleep
            )
            self._live[key] = live
        live.update(draft)

    async def take(self, chat_id: str, reply_to: str | None) -> LiveReply | None:
        """The live reply to `reply_to`, stopped, for the channel to finish; None when there is
        none or nothing of it was posted (the reply then goes out the usual way)."""
        live = self._live.pop((chat_id, reply_to or ""), None)
        if live is None:
            return None
        await live.close()
        # The final edit keeps to the pace of the live ones.
        wait = live.next_edit - self._clock()
        if wait > 0 and live.ref is not None:
            await self._sleep(wait)
        if live.ref is None:
            if self.log.holds(live.key):  # opened, never shown: the reply goes out whole
                await self.log.done(live.key)
            return None
        return live

    async def finished(self, live: LiveReply) -> None:
        await self.log.done(live.key)

    async def cut_all(self) -> None:
        """At shutdown: replies still showing are marked cut (their turns were cancelled)."""
        for key in list(self._live):
            live = await self.take(*key)
            if live is not None and live.ref is not None:
                await self._mark(OpenStream(live.chat_id, live.reply_to, live.ref, live.shown))

    async def recover(self) -> None:
        """At the first start: mark every reply the last run left open (see the module doc).
        Later starts of the same process leave the log alone: its open replies are live."""
        if self._recovered:
            return
        self._recovered = True
        for stream in await self.log.load():
            log.info("reply in %s was cut off by a restart; marking it", stream.chat_id)
            await self._mark(stream)

    async def _mark(self, stream: OpenStream) -> None:
        key = (stream.chat_id, stream.reply_to)
        # Done before the request: a mark is sent at most once, like any reply.
        await self.log.done(key)
        try:
            if stream.ref is None:
                await self._surface.post(stream.chat_id, stream.reply_to, CUT_LINE)
                return
            for _ in range(MARK_TRIES):
                try:
                    await self._surface.edit(
                        stream.chat_id, stream.ref, with_line(stream.text, CUT_LINE)
                    )
                    return
                except SlowDown as slow:
                    await self._sleep(slow.seconds)
        except Exception as exc:
            log.warning("cut reply in %s not marked: %s", stream.chat_id, exc)
