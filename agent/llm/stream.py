"""Streamed answers: typed chunks in, text deltas out, and at the end one `LLMResponse`.

Every path's `stream` yields `Chunk`s (the direct path parses SSE lines into them, the
litellm path reads litellm's chunk objects, a FunctionModel cuts its answer up);
`StreamAssembler` folds them into the response a non-streamed call would have returned,
so nothing after the model layer knows the difference. `Relay` carries the text deltas to
the listener across retries and fallbacks (see `LLMClient.chat`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from clawgate.agent.llm.protocol import USAGE_KEYS, Chunk, LLMResponse, ToolCallPiece, tool_call


@dataclass(frozen=True)
class TextDelta:
    """A piece of the reply's text as the model produced it.

    `restart` is set on the first delta of an attempt that follows one which had already
    sent text and then failed: what the listener received before belongs to no reply and
    is to be dropped.
    """

    text: str
    restart: bool = False


OnDelta = Callable[[TextDelta], Awaitable[None]]


@dataclass
class _CallParts:
    id: str | None = None
    name: str = ""
    arguments: str = ""


class StreamAssembler:
    """Accumulates one streamed answer: content, tool calls by index with their arguments
    joined across chunks, the finish reason and the usage chunk."""

    def __init__(self) -> None:
        self._content: list[str] = []
        self._calls: dict[int, _CallParts] = {}
        self._usage: dict[str, int] | None = None
        self.finish_reason = ""  # set once the answer is complete

    def add(self, chunk: Chunk) -> str:
        """Take one chunk; return the text it adds (possibly empty)."""
        if chunk.usage:
            self._usage = chunk.usage
        if chunk.finish_reason:
            self.finish_reason = chunk.finish_reason
        if chunk.text:
            self._content.append(chunk.text)
        for piece in chunk.tool_calls:
            self._add_call(piece)
        return chunk.text

    def _add_call(self, piece: ToolCallPiece) -> None:
        index = piece.index if piece.index is not None else len(self._calls)
        parts = self._calls.setdefault(index, _CallParts())
        if piece.id:
            parts.id = piece.id
        if piece.name and not parts.name:
            parts.name = piece.name
        if piece.arguments is not None:
            # A provider that sends the arguments as an object sends them whole.
            parts.arguments = piece.arguments if piece.whole else parts.arguments + piece.arguments

    def response(self, model: str) -> LLMResponse:
        """The response a non-streamed call would have returned."""
        calls = [
            tool_call(parts.id, parts.name, parts.arguments or "{}")
            for _, parts in sorted(self._calls.items())
        ]
        usage = self._usage or dict.fromkeys(USAGE_KEYS, 0)
        return LLMResponse("".join(self._content) or None, calls, self.finish_reason, usage, model)


class Relay:
    """One `chat` call's listener: passes text deltas on, marks the first delta of an attempt
    that replaces one which had already sent text, and pushes the attempt's deadline back
    whenever a chunk arrives (a long reply is not a hung one)."""

    def __init__(self, listener: OnDelta, idle_timeout: float) -> None:
        self._listener = listener
        self._idle_timeout = idle_timeout
        self._sent = False  # this attempt sent text
        self._restart = False  # the next delta starts over
        self.deadline: asyncio.Timeout | None = None  # the running attempt's

    def new_attempt(self) -> None:
        if self._sent:
            self._restart = True
        self._sent = False

    def alive(self) -> None:
        if self.deadline is not None:
            self.deadline.reschedule(asyncio.get_running_loop().time() + self._idle_timeout)

    async def emit(self, text: str) -> None:
        if not text:
            return
        delta = TextDelta(text, restart=self._restart)
        self._restart = False
        self._sent = True
        await self._listener(delta)

    async def collect(self, chunks: AsyncIterator[Chunk], model: str) -> LLMResponse:
        """Play `chunks` through: deltas to the listener, the assembled response back.
        Raises StreamCut when the chunks end before the answer did."""
        assembler = StreamAssembler()
        try:
            async for chunk in chunks:
                self.alive()
                await self.emit(assembler.add(chunk))
        finally:
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                await aclose()
        if not assembler.finish_reason:
            raise StreamCut("the stream ended before the answer did")
        return assembler.response(model)


class StreamCut(Exception):
    """The connection closed mid-answer without an error: a transient failure, retried."""
