"""What a chat channel does while its journal cannot store what arrives (a full disk).

A message is kept until it is durably stored: Telegram leaves the batch unconfirmed, so
getUpdates hands it out again; Discord's inbound worker holds it (and what queued behind it)
and retries the write, its watermark left before it. Either way the write is retried with
backoff (`STORE_BACKOFF`), and once it has failed twice in a row (the disk stays full) the
sender of each message waiting is told once, until a write succeeds again; a chat told in
one outage is told again only in the next.

The notice answers nothing (no reply target): the message it speaks of is still to be
answered, once stored.

A reply waits the same way for its "answered" line (`until_stored`): at most once means no
request goes out before that line is on disk, so a full disk delays the reply, and a stop
meanwhile leaves the message pending, answered after the restart.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable

from clawgate.kernel.bus import InboundMessage
from clawgate.kernel.errors import Retry, one_line
from clawgate.kernel.retry import Backoff, retrying

log = logging.getLogger(__name__)

STORE_BACKOFF = Backoff(first=0.5, factor=2.0, cap=30.0)
# Failed writes in a row before the senders are told: one failure may be a passing blip.
TELL_AFTER = 2
UNSTORED_NOTICE = (
    "I can't store your message right now: the disk I keep messages on is full. "
    "I'll answer it once it is stored; there's no need to send it again."
)

Tell = Callable[[str, str], Awaitable[None]]  # (chat id, text); must not raise
Sleep = Callable[[float], Awaitable[None]]


class Unstored:
    """Counts a journal's failed writes in a row and tells each waiting chat once."""

    def __init__(self, channel: str, tell: Tell, *, tell_after: int = TELL_AFTER) -> None:
        self.channel = channel
        self.failures = 0  # failed writes since the last one that succeeded
        self._tell = tell
        self._tell_after = tell_after
        self._told: set[str] = set()

    async def failed(self, waiting: Iterable[InboundMessage | None], exc: OSError) -> None:
        """A write of `waiting` failed: log it, and tell their chats once it keeps failing."""
        self.failures += 1
        log.warning(
            "%s: could not store the messages received (%s, failure %d); kept and retried",
            self.channel,
            one_line(exc),
            self.failures,
        )
        if self.failures < self._tell_after:
            return
        for message in waiting:
            if message is None or message.chat_id in self._told:
                continue
            self._told.add(message.chat_id)
            await self._tell(message.chat_id, UNSTORED_NOTICE)

    def stored(self) -> None:
        """A write succeeded: the outage (if any) is over."""
        if self.failures:
            log.info("%s: messages stored again after %d failures", self.channel, self.failures)
        self.failures = 0
        self._told.clear()

    def delay(self) -> float:
        """How long to wait before the next try."""
        return STORE_BACKOFF.delay(self.failures)


async def until_stored(write: Callable[[], Awaitable[None]], what: str, sleep: Sleep) -> None:
    """Run a journal write until it lands, backing off while it fails (OSError)."""

    async def attempt() -> None:
        try:
            await write()
        except OSError as exc:
            raise Retry(f"{what} not stored ({one_line(exc)})") from exc

    def on_retry(_: int, failure: Retry, delay: float) -> None:
        log.warning("%s; retrying in %.1f s", failure.reason, delay)

    await retrying(attempt, attempts=None, backoff=STORE_BACKOFF, sleep=sleep, on_retry=on_retry)
