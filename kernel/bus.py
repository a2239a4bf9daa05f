"""The message bus: the types every channel and the agent share, and the queues between them.

This module is a leaf: it imports nothing else from clawgate, so `channels` and `agent`
can both depend on it without depending on each other.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Trust(StrEnum):
    """Who is talking. Decided in one place, `clawgate.channels.access` (`AccessPolicy.trust`),
    from the current access rules and a message's `ChatFacts`, again each time a message is
    handled. Everything downstream decides by this."""

    OWNER = "owner"  # a private chat with an owner; every cli:* session
    ALLOWED = "allowed"  # a private chat with someone approved to chat
    GROUP = "group"  # any group or channel chat

    @property
    def is_owner(self) -> bool:
        return self is Trust.OWNER


class ChatFacts(BaseModel):
    """What trust is computed from, taken from the platform's message payload (never from a
    client's cache): a private chat and the other person's platform id, or a group and every
    id `group_allow` may name (the chat, a Discord guild or a thread's parent channel) - and
    the sender's id, which decides only whether the owner may run owner-only commands.
    `username` is only ever set by Telegram, whose @usernames the README lets owners list."""

    model_config = ConfigDict(frozen=True)

    private: bool
    user_id: str = ""
    username: str | None = None
    group_ids: tuple[str, ...] = ()

    @classmethod
    def stored(cls, value: Any) -> ChatFacts | None:
        """Facts as a session recorded them; None when absent or unreadable."""
        try:
            return cls.model_validate(value) if value else None
        except ValueError:
            return None


def _now() -> datetime:
    return datetime.now(UTC)


class Choice(BaseModel):
    """One button under an outbound message. `id` comes back as `InboundMessage.choice` when
    someone presses it; a channel shows `label` and never interprets `id`."""

    model_config = ConfigDict(frozen=True)

    id: str
    label: str


class InboundMessage(BaseModel):
    """One platform message, normalised by its channel."""

    model_config = ConfigDict(frozen=True)

    channel: str
    chat_id: str
    message_id: str = ""
    sender_id: str = ""
    sender_name: str = ""
    text: str = ""
    media: tuple[str, ...] = ()
    trust: Trust = Trust.GROUP
    # None: a channel without access rules (the terminal) or a message stored before facts
    # were recorded; the gateway then decides without them (see channels/access.py).
    facts: ChatFacts | None = None
    # The sender is an owner, whatever the chat's trust: in a group the owner may still run
    # the owner-only commands (/model NAME, /new, /compact). Set by the gateway from the rules.
    sender_is_owner: bool = False
    mentioned: bool = False
    reply_to: str | None = None
    timestamp: datetime = Field(default_factory=_now)
    # The agent that answers: set by the gateway's router (gateway/daemon/routing.py); a channel
    # that knows it (the control socket, for `clawgate agent --agent NAME`) may set it first.
    agent: str | None = None
    # A pressed button (`Choice.id`) instead of a message: never a turn; the gateway answers
    # it, deciding by `facts` whether the one who pressed may.
    choice: str | None = None

    @property
    def session_key(self) -> str:
        """The session inside the agent's workspace (sessions/<channel>_<chat>.jsonl)."""
        return f"{self.channel}:{self.chat_id}"

    @property
    def agent_session_key(self) -> str:
        """The session across agents (`work/telegram:123`): where several agents meet."""
        return agent_key(self.agent, self.session_key)


class OutboundMessage(BaseModel):
    """One reply on its way back to a channel."""

    model_config = ConfigDict(frozen=True)

    channel: str
    chat_id: str
    text: str
    media: tuple[str, ...] = ()
    reply_to: str | None = None
    # On the "Stopped." notice (whose reply_to is the /stop): the platform id of the message
    # whose turn the /stop ended. A channel marks that message answered, and only that one:
    # the messages queued behind it still get their turns.
    stopped: str | None = None
    # True when the text explains a failure (model unreachable...) rather than answering;
    # the terminal channel exits non-zero on it, chat channels send it like any reply.
    is_error: bool = False
    # The session seq of the assistant message this delivers, so the delivery can be recorded.
    seq: int | None = None
    # The trust of the session that attached `media`: the channel sends only files inside
    # that trust's reach (kernel.areas.Reach); the narrowest unless a producer says otherwise.
    trust: Trust = Trust.GROUP
    # The agent that wrote it: the reply leaves through that agent's bot on the platform.
    agent: str | None = None
    # Buttons under the text (an exec approval card); a channel without buttons shows the
    # labels as text and the terminal asks y/N.
    choices: tuple[Choice, ...] = ()
    # Set when another process may try this very send again (a cluster's outbound row): a
    # channel whose platform deduplicates sends by a key of ours (Discord's nonce, see
    # Channel.dedupes_sends) derives it from this, so however often it is tried it posts once.
    dedupe_key: str | None = None

    @property
    def session_key(self) -> str:
        return f"{self.channel}:{self.chat_id}"

    @property
    def agent_session_key(self) -> str:
        return agent_key(self.agent, self.session_key)


class ReplyDraft(BaseModel):
    """A reply still being written, for a channel that shows it as it grows (`streaming`).

    Each draft is the whole reply so far, not a piece of it: a channel may skip any draft and
    show only the latest. The complete reply still comes as an `OutboundMessage` with the
    same `reply_to`; the channel turns what it showed into that one reply (one delivery).
    """

    model_config = ConfigDict(frozen=True)

    channel: str
    chat_id: str
    # The platform id of the message being answered: the one reply this draft becomes.
    reply_to: str
    text: str = ""
    # One short line for the tool step running now ("⏳ exec: ls -la"), shown under the text
    # until the text goes on.
    status: str | None = None
    agent: str | None = None

    @property
    def session_key(self) -> str:
        return f"{self.channel}:{self.chat_id}"


def agent_key(agent: str | None, session_key: str) -> str:
    """`agent/channel:chat`; the bare session key when no agent is named."""
    return f"{agent}/{session_key}" if agent else session_key


class MessageBus:
    """Two unbounded queues: channels publish inbound, the dispatcher publishes outbound."""

    def __init__(self) -> None:
        self.inbound: asyncio.Queue[InboundMessage] = asyncio.Queue()
        self.outbound: asyncio.Queue[OutboundMessage] = asyncio.Queue()

    async def publish_inbound(self, message: InboundMessage) -> None:
        await self.inbound.put(message)

    async def publish_outbound(self, message: OutboundMessage) -> None:
        await self.outbound.put(message)
