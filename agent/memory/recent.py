"""The owner's recent daily logs as a system-prompt part."""

from __future__ import annotations

import asyncio
import os
from datetime import date, timedelta
from typing import Any

from clawgate.agent.context import PromptPart
from clawgate.agent.memory.store import MemoryStore
from clawgate.kernel.bus import Trust

DAILY_CAP_CHARS = 4_000


def daily_logs_part(store: MemoryStore):
    """Today's and yesterday's logs (each capped to its newest part), owner sessions only."""

    # (days, their files' stamps) -> the logs read then: two stats on the loop thread are
    # cheaper than a thread hop to read files that have not changed since the last turn.
    cache: dict[str, Any] = {}

    def stamps(days: list[date]) -> tuple[tuple[int, int, int] | None, ...]:
        found: list[tuple[int, int, int] | None] = []
        for day in days:
            try:
                info = os.stat(store.daily_path(day))
            except OSError:
                found.append(None)
            else:
                found.append((info.st_mtime_ns, info.st_size, info.st_ino))
        return tuple(found)

    async def part(trust: Trust, incoming_text: str) -> PromptPart | None:
        if not trust.is_owner:
            return None
        today = store.now().date()
        days = [today - timedelta(days=1), today]
        key = (days, stamps(days))  # taken before reading: a change while reading shows next turn
        if cache.get("key") == key:
            logs = cache["logs"]
        else:
            logs = await asyncio.to_thread(store.recent_daily)
            cache.update(key=key, logs=logs)
        if not logs:
            return None
        blocks = []
        for day, text in logs:
            if len(text) > DAILY_CAP_CHARS:
                text = "[older lines cut]\n" + text[-DAILY_CAP_CHARS:]
            blocks.append(f"### memory/{day.isoformat()}.md\n{text.strip()}")
        return PromptPart("daily logs", "\n\n".join(blocks))

    return part
