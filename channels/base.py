"""The contract every chat adapter fulfils. Channels know the bus types and nothing else."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from pathlib import Path, PurePosixPath

from clawgate.kernel.areas import Reach, chat_area, safe_file_name
from clawgate.kernel.bus import MessageBus, OutboundMessage, ReplyDraft, Trust

# Told, before a live reply's first piece is posted, which message it answers (the gateway
# records it in the session: a restart must not answer that message again).
StreamOpened = Callable[[ReplyDraft], Awaitable[None]]


def media_folder(trust: Trust, platform: str, chat: str) -> PurePosixPath:
    """Where a chat's downloads go, relative to the workspace. Owner chats keep theirs
    private; anything else lands in that chat's own area (`public/<chat>/media`), the only
    folder its session can reach. `chat` comes from the platform: made safe either way."""
    if trust.is_owner:
        return PurePosixPath("media") / platform / safe_file_name(chat, "chat")
    return chat_area(f"{platform}:{chat}") / "media"


def as_seen_by(trust: Trust, relative: str) -> str:
    """A workspace-relative path as the session's file tools name it (a non-owner's root is
    its chat area, `public/<chat>/`)."""
    if trust.is_owner:
        return relative
    return PurePosixPath(*PurePosixPath(relative).parts[2:]).as_posix()


def outbound_file(workspace: Path, message: OutboundMessage, relative: str) -> Path:
    """A file a reply carries, resolved and checked against the reach of the session that
    attached it (kernel.areas.Reach, the file tools' own check). Raises PathOutsideRoot."""
    return Reach.of(workspace, message.trust, message.session_key).workspace_file(relative)


class Channel(ABC):
    """Receives platform messages, publishes them as InboundMessage; sends OutboundMessage."""

    name: str  # the `channel` part of session keys: "telegram", "discord", "cli"

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

    @property
    def streams(self) -> bool:
        """Whether it shows replies as they are written: only then are its turns streamed."""
        return False

    @property
    def replays_unanswered(self) -> bool:
        """Whether its feed offers every message not yet answered again when it starts, in
        order (a cluster agent's inbox): the gateway's own pass over what the last run left
        unanswered must then leave its chats alone, or it answers a later message first."""
        return False

    @property
    def dedupes_sends(self) -> bool:
        """Whether a send carrying `dedupe_key` posts once however often, and by whichever
        process, it is tried again within a few minutes (the platform deduplicates it)."""
        return False

    async def stream(self, draft: ReplyDraft, opened: StreamOpened) -> None:
        """The reply to `draft.reply_to` so far. A channel that shows replies as they are
        written (channels/live.py) awaits `opened(draft)` before it posts the first piece;
        the others ignore drafts and send the complete reply."""
        return None

    async def close(self) -> None:
        """Release what sending holds (its connections). Called once after `stop`, when the
        last replies have gone out: sends keep working between the two."""
        return None  # most channels hold nothing past `stop`
