"""Starts the enabled channels and routes each outbound message to its channel."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable

from channels.base import Channel
from gateway.bus import MessageBus, OutboundMessage

log = logging.getLogger(__name__)

DeliveryHook = Callable[[OutboundMessage, str | None], Awaitable[None]]


class ChannelManager:
    def __init__(
        self,
        bus: MessageBus,
        channels: Iterable[Channel],
        *,
        on_delivery: DeliveryHook | None = None,
    ) -> None:
        self.bus = bus
        self.channels = {channel.name: channel for channel in channels}
        # Called with (message, None) once sent, or (message, error) once given up on.
        self._on_delivery = on_delivery

    async def start_all(self) -> None:
        for channel in self.channels.values():
            await channel.start()
            log.info("channel %s ready", channel.name)

    async def stop_all(self) -> None:
        for channel in self.channels.values():
            try:
                await channel.stop()
            except Exception:
                log.exception("channel %s did not stop cleanly", channel.name)

    async def deliver(self, message: OutboundMessage) -> None:
        channel = self.channels.get(message.channel)
        error: str | None = None
        if channel is None:
            error = f"no channel named {message.channel!r} is running"
            log.error("%s: reply dropped: %s", message.session_key, error)
        else:
            try:
                await channel.send(message)
            except Exception as exc:
                error = str(exc) or type(exc).__name__
                log.error("%s: reply not delivered: %s", message.session_key, error)
        if self._on_delivery is not None:
            await self._on_delivery(message, error)

    async def run_outbound(self) -> None:
        """Deliver outbound messages until cancelled."""
        while True:
            message = await self.bus.outbound.get()
            await self.deliver(message)
            self.bus.outbound.task_done()
