"""A model whose answers come from a Python function: the protocol served in-process.

    def answer(request: ModelRequest) -> LLMResponse | str:
        return "Saved." if request.tools else "Hi!"

    llm = LLMClient(config.model_copy(update={"model": "scripted"}),
                    models=[FunctionModel(answer, name="scripted")])

The function gets each `ModelRequest` and returns the answer (a string is a plain text
reply), or raises `FunctionFailure(status, detail)` to fail the way a provider's HTTP
status would; that failure is classified, retried and passed to fallbacks like any
other. A streamed call gets the same answer cut into word-sized chunks. It lets a test
(or a bench) script the model without a server; the loopback fakes in tests/fakes/ stay
the way to test the real paths.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace

from clawgate.agent.llm.direct import status_failure
from clawgate.agent.llm.failures import Failure
from clawgate.agent.llm.protocol import (
    USAGE_KEYS,
    Chunk,
    LLMResponse,
    ModelRequest,
    ToolCallPiece,
)

ModelFunction = Callable[[ModelRequest], "LLMResponse | str | Awaitable[LLMResponse | str]"]


class FunctionFailure(Exception):
    """Raised by a model function: fail as a provider answering HTTP `status` would."""

    def __init__(self, status: int, detail: str = "", retry_after: float | None = None) -> None:
        super().__init__(detail or f"HTTP {status}")
        self.status = status
        self.detail = detail
        self.retry_after = retry_after


class FunctionModel:
    """The protocol (agent/llm/protocol.py) over a Python function."""

    def __init__(self, function: ModelFunction, *, name: str = "function") -> None:
        self._function = function
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    async def complete(self, request: ModelRequest) -> LLMResponse:
        answer = self._function(request)
        if inspect.isawaitable(answer):
            answer = await answer
        if isinstance(answer, str):
            return LLMResponse(answer, [], "stop", dict.fromkeys(USAGE_KEYS, 0), self._name)
        return replace(answer, model=self._name)

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        response = await self.complete(request)
        for word in re.findall(r"\S+\s*", response.content or ""):
            yield Chunk(text=word)
        calls = tuple(
            ToolCallPiece(i, call.id, call.name, call.arguments, whole=True)
            for i, call in enumerate(response.tool_calls)
        )
        yield Chunk(
            tool_calls=calls, finish_reason=response.finish_reason or "stop", usage=response.usage
        )

    def failure(self, exc: Exception) -> Failure:
        if isinstance(exc, FunctionFailure):
            body = json.dumps({"error": {"message": exc.detail}}).encode()
            headers = {} if exc.retry_after is None else {"retry-after": str(exc.retry_after)}
            return status_failure(exc.status, body, headers)
        return Failure("other", None, str(exc), type(exc).__name__)
