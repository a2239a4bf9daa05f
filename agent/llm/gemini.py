"""Google's Gemini API, direct: one JSON POST to `<base>/models/<model>:generateContent`
(streamed: `:streamGenerateContent?alt=sse`) on the direct path's aiohttp session, instead
of litellm's conversion on every call.

The request carries the content litellm's conversion sends for the same `ModelRequest`:
user and assistant turns as `user` and `model` contents (consecutive turns of one role
joined), tool calls as `functionCall` parts, tool results as `functionResponse` parts
named after the call they answer, images as inline data, OpenAI tool definitions as
`functionDeclarations` (an empty `properties` dropped, which the API refuses), max_tokens
and temperature in `generationConfig`. The system prompt goes in `systemInstruction`, the
API's own place for it. Gemini caches a repeated prompt prefix by itself (implicit
caching): nothing to mark; the cached share comes back as `cached_tokens`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from clawgate.agent.llm.anthropic import arguments_of, text_of
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

_FINISH = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
}
_CHOICE = {"auto": "AUTO", "required": "ANY", "none": "NONE"}


def request_body(request: ModelRequest) -> dict[str, Any]:
    """The generateContent body for one request (the model is in the URL)."""
    system: list[dict[str, Any]] = []
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # tool call id -> function name: a result is named, not id'd
    for message in request.messages:
        role = message.get("role")
        if role == "system":
            system += _parts(message.get("content"))
        elif role == "assistant":
            parts = _parts(message.get("content"))
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                names[call.get("id") or ""] = function.get("name") or ""
                parts.append(
                    {
                        "functionCall": {
                            "name": function.get("name") or "",
                            "args": arguments_of(function.get("arguments")),
                        }
                    }
                )
            _add(contents, "model", parts)
        elif role == "tool":
            answer = {"content": text_of(message.get("content"))}
            name = names.get(message.get("tool_call_id") or "", "")
            _add(contents, "user", [{"functionResponse": {"name": name, "response": answer}}])
        else:
            _add(contents, "user", _parts(message.get("content")))
    body: dict[str, Any] = {"contents": contents}
    if system:
        body["systemInstruction"] = {"parts": system}
    if request.tools:
        body["tools"] = [{"functionDeclarations": [_declaration(t) for t in request.tools]}]
        config = _tool_config(request.tool_choice)
        if config is not None:
            body["toolConfig"] = {"functionCallingConfig": config}
    generation: dict[str, Any] = {"maxOutputTokens": request.max_tokens}
    if request.temperature is not None:
        generation["temperature"] = request.temperature
    body["generationConfig"] = generation
    return body


def _add(contents: list[dict[str, Any]], role: str, parts: list[dict[str, Any]]) -> None:
    if contents and contents[-1]["role"] == role:
        contents[-1]["parts"] += parts
    else:
        contents.append({"role": role, "parts": parts})


def _parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}] if content else []
    parts: list[dict[str, Any]] = []
    for part in content or []:
        if part.get("type") == "text" and part.get("text"):
            parts.append({"text": part["text"]})
        elif part.get("type") == "image_url":
            url = (part.get("image_url") or {}).get("url", "")
            if url.startswith("data:") and ";base64," in url:
                mime, data = url[5:].split(";base64,", 1)
                parts.append({"inlineData": {"mimeType": mime, "data": data}})
            else:
                parts.append({"fileData": {"fileUri": url}})
    return parts


def _declaration(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function") or {}
    out: dict[str, Any] = {"name": function.get("name", "")}
    if function.get("description"):
        out["description"] = function["description"]
    parameters = dict(function.get("parameters") or {"type": "object"})
    if parameters.get("properties") == {}:
        del parameters["properties"]
    out["parameters"] = parameters
    return out


def _tool_config(choice: str | dict[str, Any] | None) -> dict[str, Any] | None:
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        return {"mode": "ANY", "allowedFunctionNames": [name]} if name else None
    mode = _CHOICE.get(choice or "")
    return {"mode": mode} if mode else None


def usage(counts: Any) -> dict[str, int]:
    """usageMetadata in the protocol's keys (the prompt count includes what was cached)."""
    counts = counts if isinstance(counts, dict) else {}
    prompt = int(counts.get("promptTokenCount") or 0)
    completion = int(counts.get("candidatesTokenCount") or 0)
    completion += int(counts.get("thoughtsTokenCount") or 0)
    out = {"prompt_tokens": prompt, "completion_tokens": completion}
    out["total_tokens"] = int(counts.get("totalTokenCount") or prompt + completion)
    if counts.get("cachedContentTokenCount"):
        out["cached_tokens"] = int(counts["cachedContentTokenCount"])
    return out


def _candidate_parts(body: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    candidates = body.get("candidates") or []
    if not candidates:
        return [], ""
    first = candidates[0]
    return (first.get("content") or {}).get("parts") or [], first.get("finishReason") or ""


def _finish(reason: str, called: bool) -> str:
    if called and reason in ("STOP", ""):
        return "tool_calls"
    return _FINISH.get(reason, reason.lower() or "stop")


def parse_response(body: dict[str, Any], model: str) -> LLMResponse:
    """A generateContent answer (candidate 0) as the protocol's response."""
    parts, reason = _candidate_parts(body)
    text = [p["text"] for p in parts if isinstance(p.get("text"), str)]
    calls = [
        tool_call(None, p["functionCall"].get("name"), p["functionCall"].get("args"))
        for p in parts
        if isinstance(p.get("functionCall"), dict)
    ]
    return LLMResponse(
        "".join(text) if text else None,
        calls,
        _finish(reason, bool(calls)),
        usage(body.get("usageMetadata")),
        model,
    )


class GeminiModel(EndpointModel):
    """One `gemini/` model name on the direct path (the protocol in protocol.py)."""

    async def complete(self, request: ModelRequest) -> LLMResponse:
        def build() -> dict[str, Any]:
            return request_body(request)

        async with await self._transport.send(self._target, build, ":generateContent") as response:
            content = await response.read()
        if response.status >= 300:
            raise HTTPFailure(status_failure(response.status, content, response.headers))
        return parse_response(parsed_body(content), self._name)

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        def build() -> dict[str, Any]:
            return request_body(request)

        suffix = ":streamGenerateContent?alt=sse"
        async with await self._transport.send(self._target, build, suffix) as response:
            if response.status >= 300:
                content = await response.read()
                raise HTTPFailure(status_failure(response.status, content, response.headers))
            async for chunk in _events(response):
                yield chunk

    def failure(self, exc: Exception) -> Failure:
        return failure(exc)


async def _events(response: aiohttp.ClientResponse) -> AsyncIterator[Chunk]:
    """Each SSE event (a partial answer) as a chunk; calls arrive whole, usage cumulative."""
    calls = 0
    reason = ""
    counts: dict[str, Any] | None = None
    async for line in sse_lines(response.content):
        if not line.startswith(b"data:"):
            continue
        event = parsed_body(line[5:].strip())
        if event.get("error"):
            error = event["error"]
            status = error.get("code") if isinstance(error, dict) else None
            raise HTTPFailure(
                status_failure(status or 500, json.dumps({"error": error}).encode(), {})
            )
        parts, found_reason = _candidate_parts(event)
        reason = found_reason or reason
        counts = event.get("usageMetadata") or counts
        text = "".join(p["text"] for p in parts if isinstance(p.get("text"), str))
        pieces = []
        for part in parts:
            if isinstance(part.get("functionCall"), dict):
                found = part["functionCall"]
                arguments = json.dumps(found.get("args") or {})
                pieces.append(ToolCallPiece(calls, None, found.get("name"), arguments, whole=True))
                calls += 1
        if text or pieces:
            yield Chunk(text, tuple(pieces))
    yield Chunk(finish_reason=_finish(reason, calls > 0), usage=usage(counts))
