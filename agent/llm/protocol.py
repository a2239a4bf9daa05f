"""The one model protocol: what a request is, what an answer is, what every path implements.

A path (agent/llm/direct.py, agent/llm/litellm_path.py, agent/llm/function.py) is a
`Model`: one model name served one way. It turns a `ModelRequest` into an `LLMResponse`
(`complete`) or into the answer's pieces as they arrive (`stream`, typed `Chunk`s), and
says what an exception it raised amounts to (`failure`). Each path normalises its own
wire format into these types; nothing above the paths reads a provider's dict or object.
Retries and fallbacks wrap models (agent/llm/wrappers.py); `LLMClient` composes them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from clawgate.agent.llm.failures import Failure

USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the model produced it; the tool registry validates it


@dataclass(frozen=True)
class LLMResponse:
    content: str | None
    tool_calls: list[ToolCall]
    finish_reason: str
    usage: dict[str, int]
    model: str


@dataclass(frozen=True)
class ModelRequest:
    """One chat completion as every path receives it: OpenAI's message and tool shapes."""

    messages: list[dict[str, Any]]
    temperature: float | None  # None: not sent (the model's own default)
    max_tokens: int
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None

    def params(self) -> dict[str, Any]:
        """The request's fields as a chat-completions body has them (no model, no stream)."""
        body: dict[str, Any] = {"messages": self.messages, "max_tokens": self.max_tokens}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.tools:
            body["tools"] = self.tools
        if self.tool_choice is not None:
            body["tool_choice"] = self.tool_choice
        return body


@dataclass(frozen=True)
class ToolCallPiece:
    """Part of one streamed tool call: providers send the id and name once and the
    arguments in fragments; `whole` marks arguments a provider sent as one object."""

    index: int | None
    id: str | None = None
    name: str | None = None
    arguments: str | None = None
    whole: bool = False


@dataclass(frozen=True)
class Chunk:
    """One piece of a streamed answer (choice 0 only): text, tool-call pieces, and at the
    end the finish reason and the usage."""

    text: str = ""
    tool_calls: tuple[ToolCallPiece, ...] = ()
    finish_reason: str | None = None
    usage: dict[str, int] | None = None


class Model(Protocol):
    """One model name served by one path."""

    @property
    def name(self) -> str:
        """The configured name (`openai/gpt-4o-mini`), as errors and responses report it."""
        ...

    async def complete(self, request: ModelRequest) -> LLMResponse:
        """The whole answer at once."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        """The answer as it arrives; it ends with a chunk carrying the finish reason.
        Closing the iterator early closes the connection."""
        ...

    def failure(self, exc: Exception) -> Failure:
        """What an exception raised by `complete` or `stream` amounts to; kind "other" when
        it is no provider failure this path knows."""
        ...


def usage_from(counts: Any) -> dict[str, int]:
    """The three token counts from a usage mapping a provider sent (missing ones 0), and
    `cached_tokens` (OpenAI's prompt_tokens_details) when the provider reports any."""
    if not isinstance(counts, dict):
        return dict.fromkeys(USAGE_KEYS, 0)
    usage = {key: int(counts.get(key) or 0) for key in USAGE_KEYS}
    details = counts.get("prompt_tokens_details")
    if isinstance(details, dict) and details.get("cached_tokens"):
        usage["cached_tokens"] = int(details["cached_tokens"])
    return usage


def tool_call(call_id: str | None, name: str | None, arguments: Any) -> ToolCall:
    """A tool call as a path read it: arguments kept as the raw text the model sent (an
    object serialised, none as `{}`), and an id made up when the provider sent none."""
    if arguments is None:
        arguments = "{}"
    elif not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    return ToolCall(
        id=call_id or f"call_{uuid.uuid4().hex[:12]}", name=name or "", arguments=arguments
    )
