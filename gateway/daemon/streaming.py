"""Replies that stream into chat channels: each agent's turn progress (agent/progress.py)
relayed as `ReplyDraft`s to the channel manager, for the platforms whose channels show
replies as they are written (`streaming = "edit"`, channels/live.py). No observer is
registered for any other platform, so their turns run exactly as without streaming.

A draft holds the reply so far up to its last whitespace: a word still being written (half a
secret, say) never shows before the redactor can see it whole. A new model call after a tool
step starts the text afresh (what the model said before calling the tool is not the reply).
A tool step shows as one line while it runs: in an owner's private chat with its main
argument (`⏳ exec: ls -la`), elsewhere with its name only, since arguments and paths are the
owner's business.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from clawgate.agent.progress import (
    Progress,
    ProgressWatchers,
    TextDelta,
    ToolStarted,
    TurnEnded,
)
from clawgate.channels.manager import ChannelManager
from clawgate.kernel.bus import InboundMessage, ReplyDraft

STATUS_DETAIL_CHARS = 40


@dataclass
class _Turn:
    text: str = ""
    status: str | None = None
    after_tool: bool = False


def whole_words(text: str) -> str:
    """`text` up to and including its last whitespace."""
    end = max(text.rfind(" "), text.rfind("\n"), text.rfind("\t"))
    return text[: end + 1]


def tool_line(event: ToolStarted, message: InboundMessage) -> str:
    """The status line of a running tool step, as this chat may see it."""
    if not (message.trust.is_owner and (message.facts is None or message.facts.private)):
        return f"⏳ {event.name}"
    detail = _main_argument(event.arguments)
    if not detail:
        return f"⏳ {event.name}"
    if len(detail) > STATUS_DETAIL_CHARS:
        detail = detail[: STATUS_DETAIL_CHARS - 1] + "…"
    return f"⏳ {event.name}: {detail}"


def _main_argument(arguments: str) -> str:
    """The first text argument of a call, on one line ("" when there is none)."""
    try:
        values = json.loads(arguments)
    except ValueError:
        return ""
    if not isinstance(values, dict):
        return ""
    for value in values.values():
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())
    return ""


class StreamRelay:
    """One per gateway: the progress of every streamed turn, as drafts to the channels."""

    def __init__(self, manager: ChannelManager) -> None:
        self._manager = manager
        self._turns: dict[tuple[str | None, str, str], _Turn] = {}

    def attach(self, progress: ProgressWatchers, platforms: Iterable[str]) -> None:
        """Stream the turns of an agent (its loop's `progress`) on these platforms."""
        for platform in platforms:
            progress.watch(platform, self._observe)

    async def _observe(self, message: InboundMessage, event: Progress) -> None:
        if not message.message_id:
            return  # answers no message (a scheduled turn): sent whole
        key = (message.agent, message.session_key, message.message_id)
        if isinstance(event, TurnEnded):
            self._turns.pop(key, None)
            return
        turn = self._turns.setdefault(key, _Turn())
        if isinstance(event, TextDelta):
            if event.restart or turn.after_tool:
                turn.text, turn.after_tool = "", False
            turn.text += event.text
            turn.status = None
        elif isinstance(event, ToolStarted):
            turn.status, turn.after_tool = tool_line(event, message), True
        else:
            return  # a tool finished: its line stays until the text goes on
        await self._manager.stream(
            ReplyDraft(
                channel=message.channel,
                chat_id=message.chat_id,
                reply_to=message.message_id,
                text=whole_words(turn.text),
                status=turn.status,
                agent=message.agent,
            )
        )
