"""The channel manager: supervision with backoff, status, and outbound delivery."""

from __future__ import annotations

import asyncio
import logging

import pytest

from clawgate.channels.base import Channel
from clawgate.channels.manager import ChannelManager
from clawgate.kernel.bus import MessageBus, OutboundMessage
from clawgate.kernel.errors import ChannelError

WAIT = 5.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Sleeps:
    """Records each backoff delay and moves the clock past it; parks for good after
    `park_after` delays."""

    def __init__(self, clock: Clock | None = None, park_after: int | None = None) -> None:
        self.clock = clock or Clock()
        self.delays: list[float] = []
        self.park_after = park_after
        self.parked = asyncio.Event()

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        if self.park_after is not None and len(self.delays) > self.park_after:
            self.parked.set()
            await asyncio.Event().wait()
        self.clock.now += delay
        await asyncio.sleep(0)


class FakeChannel(Channel):
    def __init__(
        self,
        bus: MessageBus,
        name: str,
        *,
        start_errors: list[Exception] | None = None,
        send_error: Exception | None = None,
    ) -> None:
        super().__init__(bus)
        self.name = name
        self.start_errors = list(start_errors or [])
        self.send_error = send_error
        self.starts = 0
        self.stops = 0
        self.sent: list[OutboundMessage] = []
        self.ready: asyncio.Queue[int] = asyncio.Queue()

    async def start(self) -> None:
        self.starts += 1
        if self.start_errors:
            raise self.start_errors.pop(0)
        self.ready.put_nowait(self.starts)

    async def stop(self) -> None:
        self.stops += 1

    async def send(self, message: OutboundMessage) -> None:
        if self.send_error is not None:
            raise self.send_error
        self.sent.append(message)


class DyingChannel(FakeChannel):
    """Reports death through wait_closed(), as a websocket client would."""

    def __init__(self, bus: MessageBus, name: str) -> None:
        super().__init__(bus, name)
        self._closed: asyncio.Future[None] | None = None

    async def start(self) -> None:
        self._closed = asyncio.get_running_loop().create_future()
        await super().start()

    async def stop(self) -> None:
        await super().stop()
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)

    async def wait_closed(self) -> None:
        assert self._closed is not None
        await self._closed

    def die(self, error: Exception) -> None:
        assert self._closed is not None
        self._closed.set_exception(error)


def reply(channel: str, text: str = "hi") -> OutboundMessage:
    return OutboundMessage(channel=channel, chat_id="1", text=text)


async def test_failed_start_is_retried_with_backoff(caplog: pytest.LogCaptureFixture) -> None:
    bus = MessageBus()
    flaky = FakeChannel(
        bus, "flaky", start_errors=[ChannelError("token rejected"), ChannelError("no network")]
    )
    good = FakeChannel(bus, "good")
    clock = Clock()
    sleeps = Sleeps(clock)
    manager = ChannelManager(bus, [flaky, good], sleep=sleeps, clock=clock)
    assert manager.status()["flaky"]["state"] == "stopped"

    with caplog.at_level(logging.INFO, logger="clawgate.channels.manager"):
        await manager.start_all()
        assert good.starts == 1
        assert await asyncio.wait_for(flaky.ready.get(), WAIT) == 3

    assert sleeps.delays == [1.0, 2.0]
    status = manager.status()
    # since = when it last changed state: after the 1 s and 2 s waits of the fake clock.
    assert status["flaky"] == {
        "state": "running",
        "last_error": "no network",
        "restarts": 2,
        "since": 1003.0,
    }
    assert status["good"]["state"] == "running"
    assert (status["good"]["last_error"], status["good"]["restarts"]) == (None, 0)
    messages = [r.getMessage() for r in caplog.records]
    assert "channel good ready" in messages
    assert "channel flaky failed to start: token rejected; retrying in 1 s" in messages
    assert messages.count("channel flaky ready") == 1
    # A half-done start is cleaned up before the next attempt.
    assert flaky.stops == 2

    await manager.stop_all()
    assert {s["state"] for s in manager.status().values()} == {"stopped"}


async def test_backoff_doubles_to_five_minutes() -> None:
    bus = MessageBus()
    broken = FakeChannel(bus, "broken", start_errors=[ChannelError("down")] * 20)
    sleeps = Sleeps(park_after=11)
    manager = ChannelManager(bus, [broken], sleep=sleeps)
    await manager.start_all()
    await asyncio.wait_for(sleeps.parked.wait(), WAIT)
    assert sleeps.delays == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]
    status = manager.status()["broken"]
    assert status["state"] == "failed" and status["last_error"] == "down"
    await manager.stop_all()


async def test_failing_channel_does_not_hold_up_the_others() -> None:
    bus = MessageBus()
    broken = FakeChannel(
        bus,
        "broken",
        start_errors=[ChannelError("Unauthorized: bad token")],
        send_error=ChannelError("not connected"),
    )
    good = FakeChannel(bus, "good")
    sleeps = Sleeps(park_after=0)  # the broken channel waits out its backoff for good
    deliveries: list[tuple[str, str | None]] = []

    async def on_delivery(message: OutboundMessage, error: str | None) -> None:
        deliveries.append((message.channel, error))

    manager = ChannelManager(bus, [broken, good], on_delivery=on_delivery, sleep=sleeps)
    await manager.start_all()
    await asyncio.wait_for(sleeps.parked.wait(), WAIT)
    assert manager.status()["broken"]["state"] == "failed"
    assert manager.status()["broken"]["last_error"] == "Unauthorized: bad token"

    outbound = asyncio.create_task(manager.run_outbound())
    try:
        for message in (reply("broken"), reply("good"), reply("nowhere"), reply("good", "2")):
            await bus.publish_outbound(message)
        await asyncio.wait_for(bus.outbound.join(), WAIT)
    finally:
        outbound.cancel()
        await asyncio.gather(outbound, return_exceptions=True)

    assert [m.text for m in good.sent] == ["hi", "2"]  # one chat: in order
    # Different chats go out side by side, so only the set of outcomes is fixed.
    assert sorted(deliveries, key=str) == sorted(
        [
            ("broken", "not connected"),
            ("good", None),
            ("nowhere", "no channel named 'nowhere' is running"),
            ("good", None),
        ],
        key=str,
    )
    await manager.stop_all()


async def test_delivery_hook_failure_does_not_stop_outbound() -> None:
    bus = MessageBus()
    good = FakeChannel(bus, "good")
    calls: list[str] = []

    async def on_delivery(message: OutboundMessage, error: str | None) -> None:
        calls.append(message.text)
        if message.text == "first":
            raise OSError("disk full")

    manager = ChannelManager(bus, [good], on_delivery=on_delivery)
    outbound = asyncio.create_task(manager.run_outbound())
    try:
        await bus.publish_outbound(reply("good", "first"))
        await bus.publish_outbound(reply("good", "second"))
        await asyncio.wait_for(bus.outbound.join(), WAIT)
    finally:
        outbound.cancel()
        await asyncio.gather(outbound, return_exceptions=True)
    assert calls == ["first", "second"]


async def test_channel_that_dies_is_restarted() -> None:
    bus = MessageBus()
    dying = DyingChannel(bus, "discord")
    clock = Clock()
    sleeps = Sleeps(clock)
    manager = ChannelManager(bus, [dying], sleep=sleeps, clock=clock)
    await manager.start_all()
    assert await asyncio.wait_for(dying.ready.get(), WAIT) == 1

    dying.die(ChannelError("gateway connection lost"))
    assert await asyncio.wait_for(dying.ready.get(), WAIT) == 2
    assert sleeps.delays == [1.0]
    status = manager.status()["discord"]
    assert status["state"] == "running" and status["restarts"] == 1
    assert status["last_error"] == "gateway connection lost"
    assert dying.stops == 1  # the dead client was closed before the new start

    # Dying again soon keeps doubling; after a long healthy run the backoff starts afresh.
    dying.die(ChannelError("again"))
    assert await asyncio.wait_for(dying.ready.get(), WAIT) == 3
    clock.now += 600
    dying.die(ChannelError("after a long run"))
    assert await asyncio.wait_for(dying.ready.get(), WAIT) == 4
    assert sleeps.delays == [1.0, 2.0, 1.0]

    # Stopping closes the connection too; that is not a death to recover from.
    await manager.stop_all()
    assert sleeps.delays == [1.0, 2.0, 1.0]
    assert dying.starts == 4
    assert manager.status()["discord"]["state"] == "stopped"
