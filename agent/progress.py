"""What a turn is doing while it runs, for the channels that show it (the web chat).

A channel that wants to watch its turns registers one observer under its name with
`ProgressWatchers.watch`; for every turn of that channel the loop then reports, in order,
the reply's text as the model streams it (`TextDelta`), each tool call as it starts
(`ToolStarted`) and its result (`ToolFinished`), and the end of the turn (`TurnEnded`).
Turns of other channels are not streamed and cost one dict lookup. Arguments and results
pass the runtime's one redactor and are cut to `MAX_SHOWN_CHARS`; an observer that fails
is logged and never fails the turn.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clawgate.agent.llm.stream import TextDelta
from clawgate.kernel.bus import InboundMessage
from clawgate.kernel.secrets import Redactor

if TYPE_CHECKING:
    from clawgate.agent.llm import ToolCall

__all__ = [
    "MAX_SHOWN_CHARS",
    "Observer",
    "Progress",
    "ProgressWatchers",
    "TextDelta",
    "ToolFinished",
    "ToolStarted",
    "TurnEnded",
    "TurnProgress",
]

log = logging.getLogger(__name__)

MAX_SHOWN_CHARS = 4000


@dataclass(frozen=True)
class ToolStarted:
    call_id: str
    name: str
    arguments: str  # the raw JSON the model sent, redacted and cut


@dataclass(frozen=True)
class ToolFinished:
    call_id: str
    name: str
    result: str  # what the model gets back, redacted and cut


@dataclass(frozen=True)
class TurnEnded:
    pass


Progress = TextDelta | ToolStarted | ToolFinished | TurnEnded
# Told the message whose turn it is and what just happened.
Observer = Callable[[InboundMessage, Progress], Awaitable[None]]


def _shown(text: str, redact: Redactor) -> str:
    # Redact before cutting: a secret split by the cut would no longer match.
    text = redact(text)
    if len(text) <= MAX_SHOWN_CHARS:
        return text
    return text[: MAX_SHOWN_CHARS - 1] + "…"


class TurnProgress:
    """One turn's reporter: built by `ProgressWatchers.for_turn`, used by the loop."""

    def __init__(self, message: InboundMessage, observer: Observer, redact: Redactor) -> None:
        self._message = message
        self._observer = observer
        self._redact = redact
        self._failed = False

    async def _tell(self, event: Progress) -> None:
        try:
            await self._observer(self._message, event)
        except Exception:
            if not self._failed:  # once per turn: a broken watcher must not flood the log
                log.exception("%s: progress observer failed", self._message.session_key)
            self._failed = True

    async def text(self, delta: TextDelta) -> None:
        await self._tell(delta)

    async def tool_started(self, call: ToolCall) -> None:
        await self._tell(ToolStarted(call.id, call.name, _shown(call.arguments, self._redact)))

    async def tool_finished(self, call: ToolCall, result: str) -> None:
        await self._tell(ToolFinished(call.id, call.name, _shown(result, self._redact)))

    async def ended(self) -> None:
        await self._tell(TurnEnded())


class ProgressWatchers:
    """The observers registered per channel name (at most one each)."""

    def __init__(self, redact: Redactor) -> None:
        self._redact = redact
        self._by_channel: dict[str, Observer] = {}

    def watch(self, channel: str, observer: Observer) -> None:
        self._by_channel[channel] = observer

    def unwatch(self, channel: str, observer: Observer) -> None:
        if self._by_channel.get(channel) == observer:
            del self._by_channel[channel]

    def for_turn(self, message: InboundMessage) -> TurnProgress | None:
        observer = self._by_channel.get(message.channel)
        if observer is None:
            return None
        return TurnProgress(message, observer, self._redact)
