"""Per-sender flood protection: a sliding one-minute window of `limits.messages_per_minute`.

The dispatcher asks before it queues a message, slash commands included (each one writes
records and may cost a model call). Over the limit a message is ignored: never stored, never
answered, never shown as being worked on (its channel hears it was refused); the sender is
told so once per window, then nothing until the window has room again. A backlog replayed
after a restart counts like a flood happening now: what a sender queued while the gateway
was down is answered up to the limit, whatever its age. The owner's terminal (`cli`) and
the scheduler's own sessions (`cron`, `heartbeat`) are never limited. Owners in chat apps
are: a stuck client can flood too. A scheduled run that reports to a shared chat is charged
to that chat (`admit_scheduled`), so a job created from a group spends the group's budget.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from enum import Enum

from clawgate.kernel.bus import InboundMessage

WINDOW_SECONDS = 60.0
EXEMPT_CHANNELS = frozenset({"cli", "cron", "heartbeat"})


class Verdict(Enum):
    ACCEPT = "accept"
    NOTIFY = "notify"  # dropped; tell the sender once
    DROP = "drop"  # dropped silently (already told in this window)


def limit_notice(per_minute: int) -> str:
    return (
        f"You're sending messages faster than I can answer (limit {per_minute} per minute), "
        "so I'm ignoring the ones over the limit. Please send them again in a minute."
    )


class RateLimiter:
    """Counts accepted messages per (channel, sender) over the last `window` seconds.

    Dropped messages do not count, so a sender who keeps going still gets `per_minute`
    answers a minute. `per_minute = 0` turns the limiter off.
    """

    def __init__(
        self,
        per_minute: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        window: float = WINDOW_SECONDS,
    ) -> None:
        self.per_minute = per_minute
        self.window = window
        self._clock = clock
        self._accepted: dict[str, deque[float]] = {}
        self._notified: dict[str, float] = {}
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
            return Verdict.DROP
        self._notified[key] = now
        return Verdict.NOTIFY

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
        for key, at in list(self._notified.items()):
            if at <= horizon:
                del self._notified[key]


def _expire(times: deque[float], horizon: float) -> None:
    while times and times[0] <= horizon:
        times.popleft()
