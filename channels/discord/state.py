"""The per-channel watermark: the id of the newest message examined in each channel.

`<data_dir>/channels/discord/state.json`:
`{"version": 1, "last_seen": {"<channel id>": "<message id>", ...}}`, a kernel JsonDocument
(replaced atomically; a damaged file means no catch-up this time, never no start).
A message to answer is in the inbound journal before the watermark passes it (so a crash
in between replays it from the journal, never loses it); after a fresh gateway session
catch-up reads each channel's history after the watermark.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from clawgate.kernel.errors import DocumentDamaged
from clawgate.kernel.json_document import JsonDocument
from clawgate.kernel.storage import DiskWriter

log = logging.getLogger(__name__)

STATE_VERSION = 1


class Watermarks:
    def __init__(self, path: Path, writer: DiskWriter) -> None:
        self.path = path
        self._doc: JsonDocument[dict[str, int]] = JsonDocument(
            path, default=dict, parse=_parse, dump=_dump, writer=writer
        )
        self._last_seen: dict[str, int] = {}
        self._dirty = False
        self._lock = asyncio.Lock()

    async def load(self) -> None:
        self._last_seen = await asyncio.to_thread(self._read)

    def last_seen(self, chat_id: str) -> int:
        return self._last_seen.get(chat_id, 0)

    def items(self) -> list[tuple[str, int]]:
        return list(self._last_seen.items())

    def note_seen(self, chat_id: str, message_id: int) -> None:
        if message_id > self._last_seen.get(chat_id, 0):
            self._last_seen[chat_id] = message_id
            self._dirty = True

    def forget(self, chat_id: str) -> None:
        self._last_seen.pop(chat_id, None)
        self._dirty = True

    async def flush(self) -> None:
        """Save if anything changed; a failed save is retried by the next flush."""
        async with self._lock:
            if not self._dirty:
                return
            self._dirty = False
            try:
                await asyncio.to_thread(self._doc.replace, dict(self._last_seen))
            except OSError as exc:
                self._dirty = True
                log.warning("%s: not saved: %s", self.path, exc)

    def _read(self) -> dict[str, int]:
        try:
            return self._doc.load()
        except (OSError, DocumentDamaged) as exc:
            # Only catch-up depends on it: start without, rather than not at all.
            log.warning("%s: unreadable (%s); no catch-up this time", self.path, exc)
            return {}


def _parse(data: object) -> dict[str, int]:
    if not isinstance(data, dict) or not isinstance(data["last_seen"], dict):
        raise ValueError("expected an object with a last_seen object")
    return {str(k): int(v) for k, v in data["last_seen"].items()}


def _dump(last_seen: dict[str, int]) -> dict[str, object]:
    return {
        "version": STATE_VERSION,
        "last_seen": {k: str(v) for k, v in sorted(last_seen.items())},
    }
