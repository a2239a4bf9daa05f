"""Per-sender flood protection: a sliding one-minute window of `limits.messages_per_minute`.

A limit may delay an owner's messages, never lose them; for anyone else, what is over the
limit is stored and marked, never silently dropped.

- Others: the dispatcher asks before it queues a message, slash commands included (each one
  writes records and may cost a model call). Over the limit a message gets no turn and no
  model call: it is kept in its session as an `OverLimit` record (agent/session/records.py)
  and only then is its channel told it will not be answered (its journal marks it done).
  The sender is told so once per window, then nothing until the window has room again.
- Owners (an owner's DM, or an owner's own message in a group): every message is queued;
  right before its turn `wait_turn` waits until the sender's window has room, so a flood (or
  a backlog replayed after a restart) is answered in order, `per_minute` a minute. The owner
  is told once that the rest will come later (again only for a flood a window after it).

A backlog replayed after a restart counts like a flood happening now, whatever its age.
The owner's terminal (`cli`) and the scheduler's own sessions (`cron`, `heartbeat`) are
never limited. A scheduled run that reports to a shared chat is charged to that chat
(`admit_scheduled`), so a job created from a group spends the group's budget.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from enum import Enum

from clawgate.kernel.bus import InboundMessage

WINDOW_SECONDS = 60.0
EXEMPT_CHANNELS = frozenset({"cli", "cron", "heartbeat"})


class Verdict(Enum):
    ACCEPT = "accept"
    NOTIFY = "notify"  # over the limit; tell the sender once
    OVER = "over"  # over the limit (already told in this window)


def limit_notice(per_minute: int) -> str:
    return (
        f"You're sending messages faster than I can answer (limit {per_minute} per minute), "
        "so I'm ignoring the ones over the limit. Please send them again in a minute."
    )


def delay_notice(per_minute: int) -> str:
    return (
        f"You're sending messages faster than my limit of {per_minute} per minute; "
        "I'll answer the rest in order as the limit allows, nothing is lost."
    )


class RateLimiter:
    """Counts accepted messages per (channel, sender) over the last `window` seconds.

    Messages over the limit do not count, so a sender who keeps going still gets
    `per_minute` answers a minute. `per_minute = 0` turns the limiter off. `sleep` waits on
    `clock` (an owner's delayed turn), so a test moving one moves the other.
    """

    def __init__(
        self,
        per_minute: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        window: float = WINDOW_SECONDS,
    ) -> None:
        self.per_minute = per_minute
        self.window = window
        self._clock = clock
        self._sleep = sleep
        self._accepted: dict[str, deque[float]] = {}
        self._notified: dict[str, float] = {}
        self._delayed: dict[str, float] = {}  # when an owner's turn last waited (wait_turn)
        self._last_sweep = clock()

    @staticmethod
    def sender_key(message: InboundMessage) -> str:
        # A message without a sender (rare: some channel posts) is counted per chat.
        return f"{message.channel}:{message.sender_id or 'chat ' + message.chat_id}"

    @staticmethod
    def chat_key(session_key: str) -> str:
        """The budget of a chat as a whole: where its scheduled runs are counted."""
        channel, _, chat_id = session_key.partition(":")
        return f"{channel}:chat {chat_id}"

    def exempt(self, message: InboundMessage) -> bool:
        return self.per_minute <= 0 or message.channel in EXEMPT_CHANNELS

    def check(self, message: InboundMessage) -> Verdict:
        """Decide on one message and record it; call once per message."""
        if self.exempt(message):
            return Verdict.ACCEPT
        return self._take(self.sender_key(message))

    async def wait_turn(
        self, message: InboundMessage, notify: Callable[[], Awaitable[None]]
    ) -> None:
        """An owner's message about to run: wait until the sender's window has room, then
        count it. `notify` runs when a wait starts, unless the sender's turns were waiting
        less than a window ago (a backlog of several windows gets one notice)."""
        if self.exempt(message):
            return
        key = self.sender_key(message)
        while self._take(key) is not Verdict.ACCEPT:
            last = self._delayed.get(key)
            if last is None or self._clock() - last > self.window:
                await notify()
            self._delayed[key] = self._clock()
            await self._sleep(self._room_in(key))
            self._delayed[key] = self._clock()

    def admit_scheduled(self, session_key: str) -> bool:
        """Charge one scheduled run to the chat it reports to; False when that chat's budget
        for this window is spent (the run is skipped, nobody is notified)."""
        if self.per_minute <= 0:
            return True
        return self._take(self.chat_key(session_key)) is Verdict.ACCEPT

    def _take(self, key: str) -> Verdict:
        now = self._clock()
        self._sweep(now)
        accepted = self._accepted.setdefault(key, deque())
        _expire(accepted, now - self.window)
        if len(accepted) < self.per_minute:
            accepted.append(now)
            return Verdict.ACCEPT
        notified = self._notified.get(key)
        if notified is not None and now - notified < self.window:
            return Verdict.OVER
        self._notified[key] = now
        return Verdict.NOTIFY

    def _room_in(self, key: str) -> float:
        """Seconds until the oldest message counted for `key` leaves the window."""
        accepted = self._accepted.get(key)
        if not accepted:
            return 0.0
        return max(accepted[0] + self.window - self._clock(), 0.0)

    def _sweep(self, now: float) -> None:
        """Forget senders quiet for a whole window, so one-off senders do not pile up."""
        if now - self._last_sweep < self.window:
            return
        self._last_sweep = now
        horizon = now - self.window
        for key in list(self._accepted):
            _expire(self._accepted[key], horizon)
            if not self._accepted[key]:
                del self._accepted[key]
        for stamps in (self._notified, self._delayed):
            for key, at in list(stamps.items()):
                if at <= horizon:
                    del stamps[key]


def _expire(times: deque[float], horizon: float) -> None:
    while times and times[0] <= horizon:
        times.popleft()
