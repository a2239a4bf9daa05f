"""The one retry helper: a bounded or unbounded number of attempts, Retry-After honoured."""

from __future__ import annotations

import pytest

from clawgate.kernel.retry import Backoff, RetriesExhausted, Retry, retrying


class Clock:
    def __init__(self) -> None:
        self.slept: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


async def test_until_it_lands_when_attempts_is_none() -> None:
    clock, tries = Clock(), []

    async def attempt() -> str:
        tries.append(1)
        if len(tries) < 6:
            raise Retry("not yet")
        return "landed"

    result = await retrying(
        attempt, attempts=None, backoff=Backoff(schedule=(30.0, 120.0)), sleep=clock.sleep
    )
    assert result == "landed"
    assert clock.slept == [30.0, 120.0, 120.0, 120.0, 120.0]


async def test_exhausted_keeps_the_last_failure_and_other_errors_pass() -> None:
    clock = Clock()

    async def attempt() -> None:
        raise Retry("busy", after=1000.0)

    backoff = Backoff(first=1.0, cap=30.0, after_cap=300.0)
    with pytest.raises(RetriesExhausted) as raised:
        await retrying(attempt, attempts=3, backoff=backoff, sleep=clock.sleep)
    assert raised.value.attempts == 3 and raised.value.last.reason == "busy"
    assert clock.slept == [300.0, 300.0]  # the server's ask, up to after_cap, not cap

    async def broken() -> None:
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        await retrying(broken, attempts=3, backoff=backoff, sleep=clock.sleep)
    with pytest.raises(ValueError):
        await retrying(broken, attempts=0, backoff=backoff, sleep=clock.sleep)
