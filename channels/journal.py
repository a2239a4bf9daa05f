"""An inbound journal: every message a channel received is on disk before the platform's
mark (Telegram's confirmed offset, Discord's per-channel watermark) passes it, and stays
pending until its reply is on its way. Shared by the Telegram and Discord channels.

One JSON object a line (`id` names the record's id field: Telegram's "update", Discord's
"id", its message snowflake):

    {id: n, "message": {...}}   received, to be answered (an InboundMessage)
    {id: n}                     seen, nothing to answer
    {"answered": n}             its reply went out (or was given up on)
    {"high": n}                 first line after compaction: the highest id seen

`record` appends and fsyncs a batch and only then moves `high` (a failed or short write
raises, and nothing advances). A channel marks a message answered just before the first
request of its reply goes out (at most once): the reply's message and the chat's earlier ones
(`answered_through`), or, for a "Stopped." notice, the stopped message alone. On start, whatever was journaled but never
answered is published again. A platform mark that was lost (Discord's damaged state.json) is
rebuilt from `seen_through(chat)`: the last compaction's high, or the chat's newest record
since, whichever is later; no message after it was ever answered.

Compaction writes the new journal to a temp file, reads it back (size and every line
parsed) and only then renames it over the journal; a failure keeps the old one.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from clawgate.kernel.bus import InboundMessage
from clawgate.kernel.storage import DiskWriter

log = logging.getLogger(__name__)


def is_stop(text: str) -> bool:
    """A /stop acts on the turn running now; replayed after a restart it would only answer
    "Nothing is running", so a channel journals it as nothing to answer."""
    head = text.strip().split(maxsplit=1)[0] if text.strip() else ""
    return head.split("@", 1)[0].lower() == "/stop"


class Journal:
    """Append-only record of received messages, so none is lost or answered twice."""

    def __init__(
        self,
        path: Path,
        *,
        writer: DiskWriter | None = None,
        compact_after: int = 1000,
        id_field: str = "update",
    ) -> None:
        self.path = path
        self.compact_after = compact_after
        self.id_field = id_field
        self.high = 0  # the highest id recorded
        self.pending: dict[int, InboundMessage] = {}
        # What a lost platform mark is rebuilt from (Discord's state.json): the high of the
        # last compaction, and each chat's highest id recorded since.
        self._compacted_high = 0
        self._chat_high: dict[str, int] = {}
        self._writer = writer or DiskWriter()
        self._lines = 0
        # After a failed compaction, the next try waits for this many lines.
        self._compact_at = compact_after
        self._lock = asyncio.Lock()

    async def load(self) -> list[tuple[int, InboundMessage]]:
        """Read the journal; the unanswered messages, oldest first."""
        await asyncio.to_thread(self._load)
        return sorted(self.pending.items())

    async def record(self, entries: Iterable[tuple[int, InboundMessage | None]]) -> None:
        """Append one batch and fsync it: after this the batch may be confirmed."""
        entries = list(entries)
        if not entries:
            return
        lines = []
        for record_id, message in entries:
            line: dict[str, Any] = {self.id_field: record_id}
            if message is not None:
                line["message"] = message.model_dump(mode="json")
            lines.append(line)
        async with self._lock:
            await asyncio.to_thread(self._append, lines)
            for record_id, message in entries:
                self.high = max(self.high, record_id)
                if message is not None:
                    self.pending[record_id] = message
                    self._note_chat(message.chat_id, record_id)

    async def answered(self, record_ids: Iterable[int]) -> None:
        ids = [u for u in record_ids if u in self.pending]
        if not ids:
            return
        async with self._lock:
            await asyncio.to_thread(self._append, [{"answered": u} for u in ids])
            for record_id in ids:
                self.pending.pop(record_id, None)
            if self._lines > self._compact_at and self._lines > 2 * len(self.pending):
                await asyncio.to_thread(self._compact)

    async def answered_through(self, chat_id: str, record_id: int) -> None:
        """A reply to `record_id` went out: a chat's messages run in order, one at a time, so
        every earlier one of that chat has had its turn too (one replayed and skipped has no
        reply of its own). Never for a "Stopped." notice: a /stop overtakes the queue, so
        only the stopped message is marked (`answered`), never those queued behind it."""
        await self.answered(
            [u for u, m in self.pending.items() if m.chat_id == chat_id and u <= record_id]
        )

    def waiting(self, chat_id: str) -> bool:
        """Whether a message of this chat is still unanswered."""
        return any(m.chat_id == chat_id for m in self.pending.values())

    @property
    def ran_before(self) -> bool:
        """Whether the journal held anything at its load: the channel received before."""
        return self._lines > 0 or self.high > 0

    def chats(self) -> list[str]:
        """The chats the journal names (received in since its last compaction)."""
        return sorted(self._chat_high)

    def seen_through(self, chat_id: str) -> int:
        """An id of `chat_id` at or below which every message the channel handled lies: any
        message to answer is recorded before it is answered, so none after it was."""
        return max(self._compacted_high, self._chat_high.get(chat_id, 0))

    def _note_chat(self, chat_id: str, record_id: int) -> None:
        self._chat_high[chat_id] = max(self._chat_high.get(chat_id, 0), record_id)

    def _load(self) -> None:
        self.pending.clear()
        self._chat_high.clear()
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
                    self._compacted_high = max(self._compacted_high, int(entry["high"]))
                else:
                    record_id = int(entry[self.id_field])
                    self.high = max(self.high, record_id)
                    if entry.get("message") is not None:
                        message = InboundMessage.model_validate(entry["message"])
                        self.pending[record_id] = message
                        self._note_chat(message.chat_id, record_id)
            except (ValueError, KeyError, TypeError) as exc:
                # A torn last line after a crash: its platform mark never passed it, so
                # the platform hands it out again.
                log.warning("%s: line %d skipped (%s)", self.path, number, exc)
        for record_id in answered:
            self.pending.pop(record_id, None)

    def _append(self, lines: list[dict[str, Any]]) -> None:
        self._append_to(self.path, lines)
        self._lines += len(lines)

    def _append_to(self, path: Path, lines: list[dict[str, Any]]) -> None:
        # Complete or raise; the writer starts a fresh line after a torn one, so a record
        # never glues onto it.
        self._writer.mkdir(path.parent)
        self._writer.append(path, _encode(lines))
        self._writer.fsync(path)

    def _compact(self) -> None:
        lines: list[dict[str, Any]] = [{"high": self.high}]
        lines += [
            {self.id_field: u, "message": m.model_dump(mode="json")}
            for u, m in sorted(self.pending.items())
        ]
        data = _encode(lines).encode("utf-8")
        temp = self.path.with_name(f".{self.path.name}.compacting")
        try:
            temp.unlink(missing_ok=True)
            self._writer.append(temp, data)
            self._writer.fsync(temp)
            _verify(temp, len(data), len(lines))
            self._writer.move(temp, self.path)
        except (OSError, ValueError) as exc:
            # The old journal is still whole and still right: keep it, try again later.
            log.warning("%s: compaction failed (%s); the journal is kept as it was", self.path, exc)
            temp.unlink(missing_ok=True)
            self._compact_at = self._lines + self.compact_after
            return
        self._lines = len(lines)
        self._compact_at = self.compact_after
        self._compacted_high = self.high
        self._chat_high = {}
        for record_id, message in self.pending.items():
            self._note_chat(message.chat_id, record_id)


def _verify(path: Path, size: int, count: int) -> None:
    """What is on disk is what was meant: its size, and every line a JSON object."""
    raw = path.read_bytes()
    if len(raw) != size:
        raise ValueError(f"the new file has {len(raw)} bytes, not {size}")
    lines = raw.split(b"\n")
    if lines.pop() != b"" or len(lines) != count:
        raise ValueError("the new file does not hold every line")
    for line in lines:
        if not isinstance(json.loads(line), dict):
            raise ValueError("the new file holds a line that is no record")


def _encode(lines: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
