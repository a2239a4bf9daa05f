"""Streamed completions: chunks in, text deltas out, and at the end one ordinary completion.

Both model paths yield the provider's chunks (the direct path parses the SSE lines, the
litellm path passes litellm's chunk objects on); `StreamAssembler` folds them into the body
a non-streamed call would have returned, so `LLMResponse` and everything after it do not
know the difference. `Relay` carries the text deltas to the listener across retries and
fallbacks (see `LLMClient.chat`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any


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


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


@dataclass
class _CallParts:
    id: str | None = None
    name: str = ""
    arguments: str = ""


class StreamAssembler:
    """Accumulates one streamed answer (choice 0): content, tool calls by index with their
    arguments joined across chunks, the finish reason and the usage chunk."""

    def __init__(self) -> None:
        self._content: list[str] = []
        self._calls: dict[int, _CallParts] = {}
        self._usage: Any = None
        self.finish_reason = ""  # set once the answer is complete

    def add(self, chunk: Any) -> str:
        """Take one chunk; return the text it adds (possibly empty)."""
        usage = _field(chunk, "usage")
        if usage:
            self._usage = usage
        added = ""
        for choice in _field(chunk, "choices") or []:
            if (_field(choice, "index") or 0) != 0:
                continue
            reason = _field(choice, "finish_reason")
            if reason:
                self.finish_reason = str(reason)
            delta = _field(choice, "delta")
            if delta is None:
                continue
            content = _field(delta, "content")
            if isinstance(content, str) and content:
                self._content.append(content)
                added += content
            for call in _field(delta, "tool_calls") or []:
                self._add_call(call)
        return added

    def _add_call(self, call: Any) -> None:
        index = _field(call, "index")
        if not isinstance(index, int):
            index = len(self._calls)
        parts = self._calls.setdefault(index, _CallParts())
        if call_id := _field(call, "id"):
            parts.id = str(call_id)
        function = _field(call, "function")
        if function is None:
            return
        if (name := _field(function, "name")) and not parts.name:
            parts.name = str(name)
        arguments = _field(function, "arguments")
        if isinstance(arguments, str):
            parts.arguments += arguments
        elif arguments is not None:
            # A provider that sends the arguments as an object sends them whole.
            parts.arguments = json.dumps(arguments)

    def completion(self) -> dict[str, Any]:
        """The body a non-streamed call would have returned."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._content) or None}
        if self._calls:
            message["tool_calls"] = [
                {
                    "id": parts.id,
                    "type": "function",
                    "function": {"name": parts.name, "arguments": parts.arguments or "{}"},
                }
                for _, parts in sorted(self._calls.items())
            ]
        body: dict[str, Any] = {
            "object": "chat.completion",
            "created": int(time.time()),
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
        }
        if self._usage is not None:
            body["usage"] = self._usage
        return body


def as_chunk(completion: dict[str, Any]) -> dict[str, Any]:
    """A whole completion as one chunk, for a server that answered a streamed request
    without streaming."""
    choices = []
    for choice in completion.get("choices") or []:
        message = dict(_field(choice, "message") or {})
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            message["tool_calls"] = [
                {**call, "index": i} if isinstance(call, dict) else call
                for i, call in enumerate(calls)
            ]
        choices.append(
            {
                "index": _field(choice, "index") or 0,
                "delta": message,
                "finish_reason": _field(choice, "finish_reason") or "stop",
            }
        )
    return {"choices": choices, "usage": completion.get("usage")}


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

    async def collect(self, chunks: AsyncIterator[Any]) -> dict[str, Any]:
        """Play `chunks` through: deltas to the listener, the assembled completion back.
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
        return assembler.completion()


class StreamCut(Exception):
    """The connection closed mid-answer without an error: a transient failure, retried."""
