"""What was said in an allowed group without addressing the bot, kept as context.

With `require_mention`, a group message that does not address the bot stops in the channel;
without the conversation around it, "@bot what do you think?" cannot be answered. Each
group keeps its last few such messages (bounded in count, length and age, in memory only),
and the next message that addresses the bot carries them, quoted, ahead of its own text.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

MAX_CHARS = 500
MAX_AGE_SECONDS = 3600.0


class RecentChatter:
    def __init__(self, limit: int, *, clock: Callable[[], float] = time.time) -> None:
        self.limit = limit
        self._clock = clock
        self._chats: dict[str, deque[tuple[float, str, str]]] = {}

    def keep(self, chat_id: str, sender: str, text: str) -> None:
        if self.limit <= 0 or not text.strip():
            return
        if len(text) > MAX_CHARS:
            text = text[:MAX_CHARS] + "…"
        kept = self._chats.setdefault(chat_id, deque(maxlen=self.limit))
        kept.append((self._clock(), sender, text))

    def with_context(self, chat_id: str, body: str) -> str:
        """`body` preceded by the group's recent chatter, which is then forgotten: from here
        on it is part of the session."""
        kept = self._chats.pop(chat_id, None)
        cutoff = self._clock() - MAX_AGE_SECONDS
        lines = [
            f"> {sender}: {line}"
            for at, sender, text in kept or ()
            if at >= cutoff
            for line in text.splitlines()
        ]
        if not lines:
            return body
        return "\n".join(["Earlier in this group (not addressed to you):", *lines, body])
