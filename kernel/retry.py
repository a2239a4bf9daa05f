"""The one retry loop: attempts, a backoff schedule, and a server's Retry-After honoured.

Callers decide what is worth retrying by raising `Retry` (optionally with the delay the
server asked for); any other exception passes straight through. The clock is injected
(`sleep`), so tests move time instead of waiting for it. Every retry of one action in the
project goes through `retrying`: the model calls, the Discord and Telegram sends, the
archive of a session's transcript and the dashboard's bind to a taken port (both retry until
they succeed: `attempts=None`). The supervisors that restart a long-running task (channels,
MCP servers) and the scheduler, which moves a failed job's next run, take only their delays
from a `Backoff`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from clawgate.kernel.errors import RetriesExhausted, Retry

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """Delay before attempt n+1 after n failures: `first * factor**(n-1)`, at most `cap`.

    `schedule`, when given, lists the delays explicitly (the last one repeats).
    A server's Retry-After is honoured up to `after_cap` (`cap` when not given): a server may
    rightly ask for longer than our own backoff would ever wait.
    """

    first: float = 1.0
    factor: float = 2.0
    cap: float = 300.0
    schedule: tuple[float, ...] = ()
    after_cap: float | None = None

    def delay(self, failures: int, after: float | None = None) -> float:
        if after is not None:
            return min(max(after, 0.0), self.cap if self.after_cap is None else self.after_cap)
        if self.schedule:
            return self.schedule[min(failures, len(self.schedule)) - 1]
        return min(self.first * self.factor ** max(failures - 1, 0), self.cap)


async def retrying(
    attempt: Callable[[], Awaitable[T]],
    *,
    attempts: int | None,
    backoff: Backoff,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    on_retry: Callable[[int, Retry, float], None] | None = None,
) -> T:
    """Run `attempt` up to `attempts` times (None: until it stops raising `Retry`), sleeping
    between tries. `on_retry(failures so far, the failure, the delay)` runs before each sleep."""
    if attempts is not None and attempts < 1:
        raise ValueError("attempts must be at least 1")
    number = 0
    while True:
        number += 1
        try:
            return await attempt()
        except Retry as failure:
            if number == attempts:
                raise RetriesExhausted(number, failure) from failure
            delay = backoff.delay(number, failure.after)
            if on_retry is not None:
                on_retry(number, failure, delay)
            await sleep(delay)
