"""What the two chat channels (Telegram, Discord) share above the Channel contract: replies
shown while they are written (live.py) and status reactions on the message a turn answers
(reactions.py). The platform parts are each adapter's `_opening` and `_send`."""

from __future__ import annotations

from abc import abstractmethod

from clawgate.channels.base import Channel, StreamOpened
from clawgate.channels.live import LiveReplies
from clawgate.channels.reactions import StatusReactions
from clawgate.kernel.bus import InboundMessage, OutboundMessage, ReplyDraft


class ChatChannel(Channel):
    """With `streaming = "edit"` its drafts go to its `LiveReplies`, which call `_opening`
    once; every reply then ends the 👀 its turn started with."""

    _live: LiveReplies
    _reactions: StatusReactions
    _streaming: str  # the channel's `streaming` setting

    @property
    def streams(self) -> bool:
        return self._streaming == "edit"

    async def stream(self, draft: ReplyDraft, opened: StreamOpened) -> None:
        if self.streams:
            self._live.update(draft, lambda: self._opening(draft, opened))

    async def turn_started(self, message: InboundMessage) -> None:
        if message.message_id and not message.text.startswith("/"):
            self._reactions.started(message.chat_id, message.message_id)

    async def send(self, message: OutboundMessage) -> None:
        """One reply, then the status reaction on the message it answers."""
        failed = None if message.stopped else message.is_error
        try:
            await self._send(message)
        except Exception:
            failed = True
            raise
        finally:
            if answered := message.stopped or message.reply_to:
                await self._reactions.ended(message.chat_id, answered, failed=failed)

    @abstractmethod
    async def _opening(self, draft: ReplyDraft, opened: StreamOpened) -> None:
        """Before a live reply's first post: answered in the journal (the same rule as any
        reply's first request), held open in the stream log, recorded in the session."""

    @abstractmethod
    async def _send(self, message: OutboundMessage) -> None:
        """The reply itself, split and formatted for the platform."""
