"""The contract every chat adapter fulfils. Channels know the bus types and nothing else."""

from __future__ import annotations

from abc import ABC, abstractmethod

from gateway.bus import MessageBus, OutboundMessage


class ChannelError(Exception):
    """A channel could not start or send; the message is one line for a person."""


class Channel(ABC):
    """Receives platform messages, publishes them as InboundMessage; sends OutboundMessage."""

    name: str  # the `channel` part of session keys: "telegram", "discord", "cli"
    max_message_chars: int = 4096

    def __init__(self, bus: MessageBus) -> None:
        self.bus = bus

    @abstractmethod
    async def start(self) -> None:
        """Connect and begin publishing inbound messages; return once ready."""

    @abstractmethod
    async def stop(self) -> None:
        """Stop receiving; already-published messages are the dispatcher's to finish."""

    @abstractmethod
    async def send(self, message: OutboundMessage) -> None:
        """Deliver one reply, split and formatted for the platform."""
