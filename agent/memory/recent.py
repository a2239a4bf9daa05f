"""The owner's recent daily logs as a system-prompt part."""

from __future__ import annotations

import asyncio

from clawgate.agent.context import PromptPart
from clawgate.agent.memory.store import MemoryStore
from clawgate.kernel.bus import Trust

DAILY_CAP_CHARS = 4_000


def daily_logs_part(store: MemoryStore):
    """Today's and yesterday's logs (each capped to its newest part), owner sessions only."""

    async def part(trust: Trust, incoming_text: str) -> PromptPart | None:
        if not trust.is_owner:
            return None
        logs = await asyncio.to_thread(store.recent_daily)
        if not logs:
            return None
        blocks = []
        for day, text in logs:
            if len(text) > DAILY_CAP_CHARS:
                text = "[older lines cut]\n" + text[-DAILY_CAP_CHARS:]
            blocks.append(f"### memory/{day.isoformat()}.md\n{text.strip()}")
        return PromptPart("daily logs", "\n\n".join(blocks))

    return part
