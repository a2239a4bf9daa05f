"""Anthropic's Messages API, direct: one JSON POST to `<base>/v1/messages` on the direct
path's aiohttp session, instead of litellm's conversion and SDK on every call.

The request carries what litellm's conversion sends for the same `ModelRequest` (system
messages as system text blocks; user and assistant content as blocks; tool calls as
`tool_use`, tool results as `tool_result` blocks in a user turn; consecutive turns of one
role joined; OpenAI tool definitions as `input_schema`), plus prompt caching: the system
prompt and the history before the newest message are marked `cache_control: ephemeral`, so
a conversation's stable prefix is read from Anthropic's cache on the next call. Answers and
SSE events are read into the protocol's types; usage counts cached and cache-written input
in `prompt_tokens`, and the cache reads as `cached_tokens`, as litellm reports them.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from clawgate.agent.llm.direct import (
    EndpointModel,
    HTTPFailure,
    failure,
    parsed_body,
    sse_lines,
    status_failure,
)
from clawgate.agent.llm.failures import Failure
from clawgate.agent.llm.protocol import (
    Chunk,
    LLMResponse,
    ModelRequest,
    ToolCallPiece,
    tool_call,
)

if TYPE_CHECKING:
    import aiohttp

API_VERSION = "2023-06-01"
_CACHED = {"type": "ephemeral"}
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
}


def request_body(model: str, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
    """The Messages API body for one request."""
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    for message in request.messages:
        role = message.get("role")
        if role == "system":
            system += _blocks(message.get("content"))
            continue
        if role == "tool":
            result = {
                "type": "tool_result",
                "tool_use_id": message.get("tool_call_id") or "",
                "content": text_of(message.get("content")),
            }
            _add(turns, "user", [result])
        elif role == "assistant":
            blocks = _blocks(message.get("content"))
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.get("id") or "",
                        "name": function.get("name") or "",
                        "input": arguments_of(function.get("arguments")),
                    }
                )
            _add(turns, "assistant", blocks)
        else:
            _add(turns, "user", _blocks(message.get("content")))
    # The stable prefix: the system prompt (tools come before it, so they are cached with
    # it), and everything before the newest turn, which the next call sends again.
    if system:
        system[-1] = {**system[-1], "cache_control": _CACHED}
    if len(turns) > 1 and turns[-2]["content"]:
        turns[-2]["content"][-1] = {**turns[-2]["content"][-1], "cache_control": _CACHED}
    body: dict[str, Any] = {"model": model, "messages": turns, "max_tokens": request.max_tokens}
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.tools:
        body["tools"] = [_tool(tool) for tool in request.tools]
        choice = _tool_choice(request.tool_choice)
        if choice is not None:
            body["tool_choice"] = choice
    if system:
        body["system"] = system
    if stream:
        body["stream"] = True
    return body


def _add(turns: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    if turns and turns[-1]["role"] == role:
        turns[-1]["content"] += blocks  # the API wants turns to alternate
    else:
        turns.append({"role": role, "content": blocks})


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks = []
    for part in content or []:
        if part.get("type") == "text" and part.get("text"):
            blocks.append({"type": "text", "text": part["text"]})
        elif part.get("type") == "image_url":
            url = (part.get("image_url") or {}).get("url", "")
            blocks.append({"type": "image", "source": _image_source(url)})
    return blocks


def _image_source(url: str) -> dict[str, str]:
    if url.startswith("data:") and ";base64," in url:
        head, data = url[5:].split(";base64,", 1)
        return {"type": "base64", "media_type": head, "data": data}
    return {"type": "url", "url": url}


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if p.get("type") == "text")


def arguments_of(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw or {}
    try:
        return json.loads(raw) if raw.strip() else {}
    except ValueError:
        return {}  # what the model wrote was no JSON; the tool's error said so already


def _tool(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function") or {}
    out: dict[str, Any] = {"name": function.get("name", "")}
    if function.get("description"):
        out["description"] = function["description"]
    out["input_schema"] = function.get("parameters") or {"type": "object", "properties": {}}
    return out


def _tool_choice(choice: str | dict[str, Any] | None) -> dict[str, Any] | None:
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        return {"type": "tool", "name": name} if name else None
    return {"auto": {"type": "auto"}, "required": {"type": "any"}}.get(choice or "")


def usage(counts: Any) -> dict[str, int]:
    """Anthropic's usage in the protocol's keys: all input read, cached or not, is prompt."""
    counts = counts if isinstance(counts, dict) else {}
    read = int(counts.get("cache_read_input_tokens") or 0)
    written = int(counts.get("cache_creation_input_tokens") or 0)
    prompt = int(counts.get("input_tokens") or 0) + read + written
    completion = int(counts.get("output_tokens") or 0)
    out = {"prompt_tokens": prompt, "completion_tokens": completion}
    out["total_tokens"] = prompt + completion
    if read:
        out["cached_tokens"] = read
    return out


def parse_message(body: dict[str, Any], model: str) -> LLMResponse:
    """A Messages API answer as the protocol's response."""
    text = [b.get("text", "") for b in body.get("content") or [] if b.get("type") == "text"]
    calls = [
        tool_call(b.get("id"), b.get("name"), b.get("input"))
        for b in body.get("content") or []
        if b.get("type") == "tool_use"
    ]
    reason = body.get("stop_reason") or ""
    return LLMResponse(
        "".join(text) if text else None,
        calls,
        _FINISH.get(reason, reason),
        usage(body.get("usage")),
        model,
    )


class AnthropicModel(EndpointModel):
    """One `anthropic/` model name on the direct path (the protocol in protocol.py)."""

    async def complete(self, request: ModelRequest) -> LLMResponse:
        def build() -> dict[str, Any]:
            return request_body(self._target.model, request, stream=False)

        async with await self._transport.send(self._target, build) as response:
            content = await response.read()
        if response.status >= 300:
            raise HTTPFailure(_status_failure(response.status, content, response.headers))
        return parse_message(parsed_body(content), self._name)

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        def build() -> dict[str, Any]:
            return request_body(self._target.model, request, stream=True)

        async with await self._transport.send(self._target, build) as response:
            if response.status >= 300:
                content = await response.read()
                raise HTTPFailure(_status_failure(response.status, content, response.headers))
            if "text/event-stream" not in response.headers.get("content-type", ""):
                yield _whole(parse_message(parsed_body(await response.read()), self._name))
                return
            async for chunk in _events(response):
                yield chunk

    def failure(self, exc: Exception) -> Failure:
        return failure(exc)


async def _events(response: aiohttp.ClientResponse) -> AsyncIterator[Chunk]:
    """The SSE events of a streamed message as chunks; the last carries reason and usage."""
    counts: dict[str, Any] = {}
    reason = ""
    async for line in sse_lines(response.content):
        if not line.startswith(b"data:"):
            continue  # event names (each data line names its type too), keep-alives
        event = parsed_body(line[5:].strip())
        kind = event.get("type")
        if kind == "message_start":
            counts.update((event.get("message") or {}).get("usage") or {})
        elif kind == "content_block_start":
            index, block = event.get("index"), event.get("content_block") or {}
            if block.get("type") == "tool_use":
                piece = ToolCallPiece(index, block.get("id"), block.get("name"), None)
                yield Chunk(tool_calls=(piece,))
            elif block.get("type") == "text" and block.get("text"):
                yield Chunk(text=block["text"])
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta":
                yield Chunk(text=delta.get("text") or "")
            elif delta.get("type") == "input_json_delta":
                piece = ToolCallPiece(event.get("index"), arguments=delta.get("partial_json"))
                yield Chunk(tool_calls=(piece,))
        elif kind == "message_delta":
            reason = (event.get("delta") or {}).get("stop_reason") or reason
            counts.update({k: v for k, v in (event.get("usage") or {}).items() if v is not None})
        elif kind == "message_stop":
            break
        elif kind == "error":
            raise HTTPFailure(_stream_error(event.get("error")))
    yield Chunk(finish_reason=_FINISH.get(reason, reason or "stop"), usage=usage(counts))


def _whole(response: LLMResponse) -> Chunk:
    pieces = tuple(
        ToolCallPiece(i, call.id, call.name, call.arguments, whole=True)
        for i, call in enumerate(response.tool_calls)
    )
    return Chunk(response.content or "", pieces, response.finish_reason or "stop", response.usage)


def _stream_error(error: Any) -> Failure:
    """An error event in a started stream (`overloaded_error` is Anthropic's 529)."""
    error = error if isinstance(error, dict) else {"message": str(error)}
    status = 529 if error.get("type") == "overloaded_error" else 500
    return _status_failure(status, json.dumps({"error": error}).encode(), {})


def _status_failure(status: int, content: bytes, headers: Any) -> Failure:
    """An error response (`{"type": "error", "error": {...}}`) as a Failure; a prompt over
    the window is a context failure, which the guard answers by compacting."""
    found = status_failure(status, content, headers)
    if status == 400 and "prompt is too long" in found.detail:
        return replace(found, kind="context", type_name="ContextWindowExceededError")
    return found
