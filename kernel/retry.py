"""The one retry loop: attempts, a backoff schedule, and a server's Retry-After honoured.

Callers decide what is worth retrying by raising `Retry` (optionally with the delay the
server asked for); any other exception passes straight through. The clock is injected
(`sleep`), so tests move time instead of waiting for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


class Retry(Exception):
    """Raised by an attempt that failed transiently; `after` is the delay a server asked for."""

    def __init__(self, reason: str, after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.after = after


class RetriesExhausted(Exception):
    """Every attempt raised `Retry`; `last` is the final one."""

    def __init__(self, attempts: int, last: Retry) -> None:
        super().__init__(f"{last.reason} (after {attempts} attempts)")
        self.attempts = attempts
        self.last = last


@dataclass(frozen=True)
class Backoff:
    """Delay before attempt n+1 after n failures: `first * factor**(n-1)`, at most `cap`.

    `schedule`, when given, lists the delays explicitly (the last one repeats).
    A server's Retry-After is honoured up to `cap`.
    """

    first: float = 1.0
    factor: float = 2.0
    cap: float = 300.0
    schedule: tuple[float, ...] = ()

    def delay(self, failures: int, after: float | None = None) -> float:
        if after is not None:
            return min(max(after, 0.0), self.cap)
        if self.schedule:
            return self.schedule[min(failures, len(self.schedule)) - 1]
        return min(self.first * self.factor ** max(failures - 1, 0), self.cap)


async def retrying(
    attempt: Callable[[], Awaitable[T]],
    *,
    attempts: int,
    backoff: Backoff,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    on_retry: Callable[[int, Retry, float], None] | None = None,
) -> T:
    """Run `attempt` up to `attempts` times while it raises `Retry`, sleeping between tries."""
    for number in range(1, attempts + 1):
        try:
            return await attempt()
        except Retry as failure:
            if number == attempts:
                raise RetriesExhausted(attempts, failure) from failure
            delay = backoff.delay(number, failure.after)
            if on_retry is not None:
                on_retry(number, failure, delay)
            await sleep(delay)
    raise AssertionError("unreachable: attempts must be >= 1")
