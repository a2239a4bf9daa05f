"""Status reactions on the message being answered (`reactions = true`): 👀 when its turn
starts, replaced by a mark for how it ended once its reply has gone out.

Telegram accepts only the emoji on its reaction list: ✅ and ⚠️ are not on it (python-telegram-bot
sends them as custom emoji and Telegram answers REACTION_INVALID), so Telegram marks 👍 / 😱
and Discord ✅ / ⚠️. A stopped turn's 👀 is taken away. Where the bot may not react (a group
without the permission) the first refusal is logged once and that chat gets no more attempts
in this process: no error spam. Reactions never hold up a reply: the 👀 goes out in the
background, and any failure other than a refusal is only logged.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Protocol

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Marks:
    working: str
    done: str
    failed: str


TELEGRAM_MARKS = Marks(working="👀", done="👍", failed="😱")
DISCORD_MARKS = Marks(working="👀", done="✅", failed="⚠️")


class ReactionRefused(Exception):
    """The chat does not let the bot react (no permission, reactions turned off)."""


class Reactor(Protocol):
    """A platform's way to set the bot's own reaction on a message."""

    async def react(
        self, chat_id: str, message_id: str, emoji: str | None, previous: str | None
    ) -> None:
        """Make the bot's reaction `emoji` (None: none), in place of `previous`; raises
        ReactionRefused when the chat does not allow it."""
        ...


class StatusReactions:
    """One channel's status reactions, by (chat, platform message id)."""

    def __init__(self, platform: str, reactor: Reactor, marks: Marks, *, enabled: bool) -> None:
        self._platform = platform
        self._reactor = reactor
        self._marks = marks
        self._enabled = enabled
        self._refused: set[str] = set()
        self._shown: dict[tuple[str, str], str] = {}
        self._pending: dict[tuple[str, str], asyncio.Task[None]] = {}

    def started(self, chat_id: str, message_id: str) -> None:
        """A turn starts for this message: 👀, in the background."""
        if not self._enabled or chat_id in self._refused:
            return
        key = (chat_id, message_id)
        if key in self._pending or key in self._shown:
            return
        task = asyncio.create_task(
            self._set(key, self._marks.working), name=f"{self._platform} reaction"
        )
        self._pending[key] = task
        task.add_done_callback(
            lambda done: self._pending.pop(key) if self._pending.get(key) is done else None
        )

    async def ended(self, chat_id: str, message_id: str, *, failed: bool | None) -> None:
        """Its reply went out: the mark for how it ended (`failed` None: stopped, no mark)."""
        key = (chat_id, message_id)
        pending = self._pending.pop(key, None)
        if pending is not None:
            await asyncio.gather(pending, return_exceptions=True)
        if key not in self._shown:
            return  # no 👀 went up (off, refused, or a turn of an earlier run)
        mark = None if failed is None else self._marks.failed if failed else self._marks.done
        await self._set(key, mark)
        self._shown.pop(key, None)

    async def close(self) -> None:
        for task in self._pending.values():
            task.cancel()
        await asyncio.gather(*self._pending.values(), return_exceptions=True)
        self._pending.clear()

    async def _set(self, key: tuple[str, str], emoji: str | None) -> None:
        chat_id, message_id = key
        if chat_id in self._refused:
            return
        try:
            await self._reactor.react(chat_id, message_id, emoji, self._shown.get(key))
        except ReactionRefused as exc:
            self._refused.add(chat_id)
            log.info(
                "%s: no reactions in chat %s (%s); not trying there again",
                self._platform,
                chat_id,
                exc,
            )
            return
        except Exception as exc:
            log.debug("%s: reaction in %s failed: %s", self._platform, chat_id, exc)
            return
        if emoji is not None:
            self._shown[key] = emoji
