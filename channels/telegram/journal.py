"""Telegram's inbound journal: every fetched update is on disk before Telegram hears it was
received (the shared journal, channels/journal.py, keyed by update id).

`<data_dir>/channels/telegram/journal.jsonl`. A batch is appended and fsynced before the
next getUpdates confirms it: `high`, from which the next offset is computed, moves only once
the whole batch is on disk. An update is marked answered just before the first request of
its reply goes out (at most once: see the adapter's `send`).

An update python-telegram-bot cannot parse is kept, raw, in `quarantine.jsonl` beside the
journal (`{"update": id, "error": ..., "raw": {...}}`) before it is journaled as seen, so
skipping it loses nothing a person could look at.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from clawgate.channels.journal import Journal
from clawgate.kernel.sanitise import sanitise


class InboundJournal(Journal):
    """The journal of fetched updates, and the quarantine of unreadable ones."""

    async def quarantine(self, entries: Iterable[tuple[int | None, Any, str]]) -> None:
        """Keep unparseable updates (id, raw JSON, why), fsynced, before they are confirmed.
        `why` is for a person to read and may quote the update: it is stored sanitised;
        `raw` stays exactly as it came."""
        lines = [{"update": u, "error": sanitise(why), "raw": raw} for u, raw, why in entries]
        if lines:
            async with self._lock:
                await asyncio.to_thread(self._append_to, self.quarantine_path, lines)

    @property
    def quarantine_path(self) -> Path:
        return self.path.with_name("quarantine.jsonl")
