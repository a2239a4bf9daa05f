"""The inbound journal: every fetched update is on disk before Telegram hears it was received.

`<data_dir>/channels/telegram/journal.jsonl`, one JSON object a line:

    {"update": id, "message": {...}}   published, to be answered (an InboundMessage)
    {"update": id}                     seen, nothing to answer
    {"answered": id}                   its reply went out (or was given up on)
    {"high": id}                       first line after compaction: the highest id seen

A batch is appended and fsynced before the next getUpdates confirms it: `high`, from which
the next offset is computed, moves only once the whole batch is on disk (a failed or short
write raises, and the batch is fetched again). An update is marked answered just before the
first request of its reply goes out (at most once: see the adapter's `send`). On start,
whatever was journaled but never answered is published again.

An update python-telegram-bot cannot parse is kept, raw, in `quarantine.jsonl` beside the
journal (`{"update": id, "error": ..., "raw": {...}}`) before it is journaled as seen, so
skipping it loses nothing a person could look at.

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


class InboundJournal:
    """Append-only record of fetched updates, so none is lost or answered twice."""

    def __init__(
        self, path: Path, *, writer: DiskWriter | None = None, compact_after: int = 1000
    ) -> None:
        self.path = path
        self.compact_after = compact_after
        self.high = 0  # the highest update id recorded: anything at or below is a duplicate
        self.pending: dict[int, InboundMessage] = {}
        self._writer = writer or DiskWriter()
        self._lines = 0
        # After a failed compaction, the next try waits for this many lines.
        self._compact_at = compact_after
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

    async def quarantine(self, entries: Iterable[tuple[int | None, Any, str]]) -> None:
        """Keep unparseable updates (id, raw JSON, why), fsynced, before they are confirmed."""
        lines = [{"update": u, "error": why, "raw": raw} for u, raw, why in entries]
        if lines:
            async with self._lock:
                await asyncio.to_thread(self._append_to, self.quarantine_path, lines)

    @property
    def quarantine_path(self) -> Path:
        return self.path.with_name("quarantine.jsonl")

    async def answered(self, update_ids: Iterable[int]) -> None:
        ids = [u for u in update_ids if u in self.pending]
        if not ids:
            return
        async with self._lock:
            await asyncio.to_thread(self._append, [{"answered": u} for u in ids])
            for update_id in ids:
                self.pending.pop(update_id, None)
            if self._lines > self._compact_at and self._lines > 2 * len(self.pending):
                await asyncio.to_thread(self._compact)

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
            {"update": u, "message": m.model_dump(mode="json")}
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
