"""The per-channel watermark: the id of the newest message examined in each channel.

`<data_dir>/channels/discord/state.json`:
`{"version": 1, "last_seen": {"<channel id>": "<message id>", ...}}`, a kernel JsonDocument
(replaced atomically). A message to answer is in the inbound journal before the watermark
passes it (so a crash in between replays it from the journal, never loses it); after a fresh
gateway session catch-up reads each channel's history after the watermark.

A damaged file is never a reason not to start, nor to skip catch-up: it is moved aside as
`state.json.damaged-<UTC time>` (a warning, once), `load` says so, and the channel rebuilds
the watermarks from its journal (catchup.py's `recover`); only then is a fresh file written.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

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
        self._writer = writer
        self._last_seen: dict[str, int] = {}
        self._dirty = False
        self._lock = asyncio.Lock()
        # While the watermarks are rebuilt, nothing is saved: a crash before the rebuild
        # is done leaves no file, so the next start rebuilds them again.
        self.rebuilding = False

    async def load(self) -> Literal["read", "missing", "damaged"]:
        """Read the file: "damaged" if it was damaged or unreadable (and is moved aside)."""
        last_seen = await asyncio.to_thread(self._read)
        self._last_seen = last_seen if isinstance(last_seen, dict) else {}
        return "read" if isinstance(last_seen, dict) else last_seen

    def rebuild(self) -> None:
        """Save nothing until `rebuilt`: the watermarks are lost and being set again."""
        self.rebuilding = True

    def rebuilt(self) -> None:
        self.rebuilding = False
        self._dirty = True

    def last_seen(self, chat_id: str) -> int:
        return self._last_seen.get(chat_id, 0)

    def items(self) -> list[tuple[str, int]]:
        return list(self._last_seen.items())

    def note_seen(self, chat_id: str, message_id: int) -> None:
        if message_id > self._last_seen.get(chat_id, 0):
            self._last_seen[chat_id] = message_id
            self._dirty = True

    def seed(self, chat_id: str, floor: int) -> None:
        """Catch up on `chat_id` from `floor` on (or from the age bound, if that is later)."""
        self._last_seen[chat_id] = max(self._last_seen.get(chat_id, 0), floor)
        self._dirty = True

    def forget(self, chat_id: str) -> None:
        self._last_seen.pop(chat_id, None)
        self._dirty = True

    async def flush(self) -> None:
        """Save if anything changed; a failed save is retried by the next flush."""
        async with self._lock:
            if not self._dirty or self.rebuilding:
                return
            self._dirty = False
            try:
                await asyncio.to_thread(self._doc.replace, dict(self._last_seen))
            except OSError as exc:
                self._dirty = True
                log.warning("%s: not saved: %s", self.path, exc)

    def _read(self) -> dict[str, int] | Literal["missing", "damaged"]:
        if not self.path.exists():
            return "missing"
        try:
            return self._doc.load()
        except DocumentDamaged as exc:
            aside = self.path.with_name(
                f"{self.path.name}.damaged-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
            )
            try:
                self._writer.move(self.path, aside)
                kept = f"kept as {aside.name}"
            except OSError as move_failed:
                kept = f"not moved aside ({move_failed})"
            log.warning("%s: damaged (%s), %s; catching up from the journal", self.path, exc, kept)
            return "damaged"
        except OSError as exc:
            log.warning("%s: unreadable (%s); catching up from the journal", self.path, exc)
            return "damaged"


def _parse(data: object) -> dict[str, int]:
    if not isinstance(data, dict) or not isinstance(data["last_seen"], dict):
        raise ValueError("expected an object with a last_seen object")
    return {str(k): int(v) for k, v in data["last_seen"].items()}


def _dump(last_seen: dict[str, int]) -> dict[str, object]:
    return {
        "version": STATE_VERSION,
        "last_seen": {k: str(v) for k, v in sorted(last_seen.items())},
    }
