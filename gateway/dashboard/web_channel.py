"""The browser chat as a channel: the dashboard's owner talks to the assistant in `web:<name>`.

Like the control socket (gateway/daemon/control.py), this is a channel on the bus: what the owner
types is published as an owner `InboundMessage`, and replies come back through the channel
manager's `send`, so the dispatcher's order and /stop, slash commands, session records and
delivery records are those of every other channel. What only a browser gets is the turn as
it runs: the channel watches its turns (`AgentLoop.progress`) and hands each event, and each
reply, to every open event stream of that conversation (the dashboard's chat page, one per
browser tab; see gateway/dashboard/chat.py).

One channel serves every agent of the gateway: the page names the agent it talks to
(`InboundMessage.agent`, which the router honours), and a conversation's event streams are
kept per agent (`agent/name`), so two agents' `web:owner` never see each other's turns.

A reply is part of the session transcript, which the page shows on load: one sent while no
tab is open is recorded as delivered and seen on the next visit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from clawgate.agent.progress import (
    Progress,
    ProgressWatchers,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnEnded,
)
from clawgate.channels.base import Channel
from clawgate.gateway.dashboard.markdown import to_html
from clawgate.kernel.bus import InboundMessage, MessageBus, OutboundMessage, Trust, agent_key
from clawgate.kernel.config import Config
from clawgate.kernel.errors import ChannelError

if TYPE_CHECKING:
    from clawgate.agent.runtime import AgentRuntime

log = logging.getLogger(__name__)

DEFAULT_CONVERSATION = "owner"
# A conversation name is one path segment and one session-key part, readable as typed.
NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_TEXT_CHARS = 100_000
# Events a tab may fall behind by before it is dropped (its page reconnects and reloads).
STREAM_BACKLOG = 2000

Event = dict[str, Any]


def valid_name(name: str) -> bool:
    return NAME.fullmatch(name) is not None


def progress_event(event: Progress) -> Event:
    """A turn's progress as the browser receives it (JSON)."""
    if isinstance(event, TextDelta):
        return {"type": "delta", "text": event.text, "restart": event.restart}
    if isinstance(event, ToolStarted):
        return {"type": "tool_started", **asdict(event)}
    if isinstance(event, ToolFinished):
        return {"type": "tool_finished", **asdict(event)}
    assert isinstance(event, TurnEnded)
    return {"type": "turn_ended"}


def web_chat(config: Config, bus: MessageBus, runtimes: Sequence[AgentRuntime]) -> list[Channel]:
    """The daemon's web chat channel over every agent's runtime (the default one first), when
    the dashboard that serves it is on."""
    if not config.dashboard.enabled:
        return []
    return [WebChannel(bus, [r.loop.progress for r in runtimes], runtimes[0].config.agent_name)]


class WebChannel(Channel):
    """Publishes what the browser sends as owner messages of `web:<name>`; fans replies and
    turn progress out to the conversation's open event streams."""

    name = "web"

    def __init__(
        self, bus: MessageBus, progress: Sequence[ProgressWatchers], default_agent: str
    ) -> None:
        super().__init__(bus)
        self._progress = list(progress)
        # Whose turns a message naming no agent are (a gateway of one agent names none).
        self._default = default_agent
        self._streams: dict[str, set[asyncio.Queue[Event | None]]] = {}
        self._running = False

    async def start(self) -> None:
        for watchers in self._progress:
            watchers.watch(self.name, self._observe)
        self._running = True

    async def stop(self) -> None:
        self._running = False
        for watchers in self._progress:
            watchers.unwatch(self.name, self._observe)
        self.end_streams()

    def end_streams(self) -> None:
        """End every open event stream: the dashboard's server, stopping first, would else
        wait its shutdown timeout on each open tab."""
        for queues in self._streams.values():
            for queue in queues:
                _end(queue)
        self._streams.clear()

    def end_stream(self, queue: asyncio.Queue[Event | None]) -> None:
        """End one open event stream (its browser session ended)."""
        _end(queue)

    async def send(self, message: OutboundMessage) -> None:
        event: Event = {
            "type": "reply",
            "text": message.text,
            # The page shows the reply's Markdown rendered; an error stays plain text.
            "html": None if message.is_error else to_html(message.text),
            "is_error": message.is_error,
            "reply_to": message.reply_to,
            "seq": message.seq,
            "files": [str(item) for item in message.media],
        }
        if message.choices:  # an exec approval card: its buttons post to /approvals/answer
            event["choices"] = [{"id": c.id, "label": c.label} for c in message.choices]
        self._publish(self._stream(message.agent, message.chat_id), event)

    def _stream(self, agent: str | None, conversation: str) -> str:
        return agent_key(agent or self._default, conversation)

    async def say(self, conversation: str, text: str, agent: str | None = None) -> str:
        """Publish what the owner typed in `conversation` of `agent` (None: the default
        one); the id its reply will carry."""
        if not self._running:
            raise ChannelError("the web chat is not running")
        if not valid_name(conversation):
            raise ValueError(f"not a conversation name: {conversation!r}")
        message_id = uuid.uuid4().hex
        self._publish(
            self._stream(agent, conversation), {"type": "user", "id": message_id, "text": text}
        )
        await self.bus.publish_inbound(
            InboundMessage(
                channel=self.name,
                chat_id=conversation,
                message_id=message_id,
                sender_id="owner",
                sender_name="owner",
                text=text[:MAX_TEXT_CHARS],
                trust=Trust.OWNER,
                mentioned=True,
                agent=agent,
            )
        )
        return message_id

    @contextlib.asynccontextmanager
    async def events(
        self, conversation: str, agent: str | None = None
    ) -> AsyncIterator[asyncio.Queue[Event | None]]:
        """A queue receiving the conversation's events while the block runs; None in it means
        the stream is over (the gateway stops, or the reader fell too far behind)."""
        conversation = self._stream(agent, conversation)
        queue: asyncio.Queue[Event | None] = asyncio.Queue(STREAM_BACKLOG)
        if not self._running:
            _end(queue)
        else:
            self._streams.setdefault(conversation, set()).add(queue)
        try:
            yield queue
        finally:
            queues = self._streams.get(conversation)
            if queues is not None:
                queues.discard(queue)
                if not queues:
                    del self._streams[conversation]

    def watching(self, conversation: str, agent: str | None = None) -> int:
        """How many event streams the conversation has open."""
        return len(self._streams.get(self._stream(agent, conversation), ()))

    async def _observe(self, message: InboundMessage, event: Progress) -> None:
        stream = self._stream(message.agent, message.chat_id)
        if stream in self._streams:
            # `for`: the message whose turn this is, as its reply's `reply_to` will say.
            self._publish(stream, {**progress_event(event), "for": message.message_id})

    def _publish(self, conversation: str, event: Event) -> None:
        for queue in list(self._streams.get(conversation, ())):
            try:
                queue.put_nowait(event)
            except asyncio.QueueFull:
                log.warning("web chat: a browser stopped reading %s; dropping it", conversation)
                self._streams[conversation].discard(queue)
                _end(queue)


def _end(queue: asyncio.Queue[Event | None]) -> None:
    """Put the end marker in, making room for it if the queue is full."""
    while True:
        try:
            queue.put_nowait(None)
            return
        except asyncio.QueueFull:
            queue.get_nowait()
