"""The contract every chat adapter fulfils. Channels know the bus types and nothing else."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import PurePosixPath

from clawgate.kernel.bus import MessageBus, OutboundMessage, Trust


def media_folder(trust: Trust, platform: str, chat: str) -> PurePosixPath:
    """Where a chat's downloads go, relative to the workspace. Owner chats keep theirs
    private; anything else lands under public/, the only folder those sessions can reach."""
    base = PurePosixPath("media") if trust.is_owner else PurePosixPath("public/media")
    return base / platform / chat


def as_seen_by(trust: Trust, relative: str) -> str:
    """A workspace-relative path as the session's file tools name it (public/ is their root)."""
    return relative if trust.is_owner else relative.removeprefix("public/")


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
