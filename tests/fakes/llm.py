"""A fake OpenAI-compatible server that tests script, reached by litellm over loopback.

    fake.script(tool_call("write_file", path="todo.md"), text("Saved."))

Each chat request consumes one scripted reply; when the queue is empty `fake.handler`
(if set) decides, otherwise the fake answers a placeholder and counts it in `unscripted`.
It runs inside the test's event loop, so scripted replies can wait on the test's events.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import inspect
import json
import math
import struct
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.fakes.server import LoopbackServer

EMBEDDING_DIM = 64


@dataclass(frozen=True)
class Call:
    """One tool call inside an assistant message; `arguments` is the raw JSON text sent."""

    name: str
    arguments: str
    id: str | None = None


@dataclass(frozen=True)
class Text:
    content: str
    finish_reason: str = "stop"


@dataclass(frozen=True)
class ToolCalls:
    calls: tuple[Call, ...]
    content: str | None = None


@dataclass(frozen=True)
class Error:
    status: int
    message: str
    type: str = "invalid_request_error"
    code: str | None = None
    retry_after: float | None = None


@dataclass(frozen=True)
class Hang:
    pass


@dataclass(frozen=True)
class Delayed:
    seconds: float
    reply: Reply


@dataclass(frozen=True)
class Gated:
    event: asyncio.Event
    reply: Reply


@dataclass(frozen=True)
class Paused:
    """Streamed: the first `after` chunks, then nothing until `event` is set, then the rest
    (a request that does not stream gets the whole reply once `event` is set)."""

    after: int
    event: asyncio.Event
    reply: Text | ToolCalls


@dataclass(frozen=True)
class Dripped:
    """Streamed one chunk every `every` seconds, as a model writes (whole if not streamed)."""

    every: float
    reply: Text | ToolCalls


@dataclass(frozen=True)
class Cut:
    """The answer starts, then the connection closes half-way through its body (or, with
    `error`, a stream goes on with that error event, as OpenAI reports a failure mid-way)."""

    reply: Text | ToolCalls
    error: Error | None = None
    # Streamed: the first half goes out, then nothing until `hold` is set, then the error.
    hold: asyncio.Event | None = None


@dataclass(frozen=True)
class Garbage:
    """HTTP 200 with a body that is not the JSON it claims to be."""

    body: str


Reply = Text | ToolCalls | Error | Hang | Delayed | Gated | Paused | Dripped | Cut | Garbage
Handler = Callable[[dict[str, Any]], "Reply | Awaitable[Reply]"]


def text(content: str, finish_reason: str = "stop") -> Text:
    return Text(content, finish_reason)


def call(name: str, _id: str | None = None, **arguments: Any) -> Call:
    return Call(name, json.dumps(arguments), _id)


def tool_call(name: str, _id: str | None = None, **arguments: Any) -> ToolCalls:
    return ToolCalls((call(name, _id, **arguments),))


def tool_calls(*calls: Call, content: str | None = None) -> ToolCalls:
    return ToolCalls(tuple(calls), content)


def raw_tool_call(name: str, raw_arguments: str, _id: str | None = None) -> ToolCalls:
    return ToolCalls((Call(name, raw_arguments, _id),))


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_exceeded",
}


def error(
    status: int,
    message: str = "fake provider error",
    retry_after: float | None = None,
    code: str | None = None,
) -> Error:
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return Error(status, message, kind, code, retry_after)


def context_overflow(limit: int = 8192, requested: int = 9000) -> Error:
    # The wording is OpenAI's; litellm recognises context overflows by it.
    message = (
        f"This model's maximum context length is {limit} tokens. However, your messages "
        f"resulted in {requested} tokens. Please reduce the length of the messages."
    )
    return Error(400, message, "invalid_request_error", "context_length_exceeded")


def hang() -> Hang:
    return Hang()


def delay(seconds: float, reply: Reply) -> Delayed:
    return Delayed(seconds, reply)


def gate(event: asyncio.Event, reply: Reply) -> Gated:
    return Gated(event, reply)


def pause(event: asyncio.Event, reply: Text | ToolCalls, after: int = 2) -> Paused:
    """`reply`, streamed up to `after` chunks (the role chunk counts), then held until
    `event` is set: a test sees a partial answer for as long as it likes."""
    return Paused(after, event, reply)


def drip(every: float, reply: Text | ToolCalls) -> Dripped:
    """`reply` streamed one chunk (a word) every `every` seconds."""
    return Dripped(every, reply)


def cut(
    reply: Text | ToolCalls, error: Error | None = None, hold: asyncio.Event | None = None
) -> Cut:
    """`reply`, cut off mid-way: half the JSON body (or half the SSE chunks), then the
    connection closes without the rest; with `error`, a stream sends it as an event and ends
    (once `hold` is set, if given)."""
    return Cut(reply, error, hold)


def garbage(body: str = '{"id": "chatcmpl-x", "choices": [{"message": ') -> Garbage:
    return Garbage(body)


def embed_text(content: str) -> list[float]:
    """A deterministic unit vector from a hashed bag of words: shared words -> closer vectors."""
    vector = [0.0] * EMBEDDING_DIM
    for word in content.lower().split():
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        bucket = int.from_bytes(digest[:4], "little") % EMBEDDING_DIM
        vector[bucket] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vector))
    if norm == 0:
        vector[0], norm = 1.0, 1.0
    return [v / norm for v in vector]


def _words(value: Any) -> int:
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, list):
        return sum(_words(v) for v in value)
    if isinstance(value, dict):
        return sum(_words(v) for v in value.values())
    return 0


def _content_text(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


class FakeLLM(LoopbackServer):
    """`POST /v1/chat/completions` (plain and SSE) and `POST /v1/embeddings` on 127.0.0.1."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.transcription_requests: list[dict[str, Any]] = []
        self.embedding_requests: list[dict[str, Any]] = []
        # The usage reported with each chat answer, in order (what a ledger should record);
        # `cached_tokens` > 0 reports that many prompt tokens as served from a cache.
        self.usages: list[dict[str, Any]] = []
        self.cached_tokens = 0
        self.handler: Handler | None = None
        self.unscripted = 0
        self._queue: deque[Reply] = deque()
        self._arrived = asyncio.Condition()
        super().__init__()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/embeddings", self._embeddings)
        app.router.add_post("/v1/audio/transcriptions", self._transcriptions)

    def script(self, *replies: Reply) -> None:
        self._queue.extend(replies)

    @property
    def pending(self) -> int:
        """Scripted replies not yet consumed."""
        return len(self._queue)

    # A timeout parameter on purpose: a test waiting on the fake must never hang the suite.
    async def wait_for_requests(self, n: int, timeout: float = 5) -> list[dict[str, Any]]:
        async with asyncio.timeout(timeout), self._arrived:
            await self._arrived.wait_for(lambda: len(self.requests) >= n)
        return self.requests

    def last_messages(self) -> list[dict[str, Any]]:
        if not self.requests:
            raise AssertionError("the fake LLM received no chat request")
        return self.requests[-1].get("messages", [])

    def last_system_prompt(self) -> str | None:
        for message in self.last_messages():
            if message.get("role") == "system":
                return _content_text(message.get("content"))
        return None

    async def _next_reply(self, body: dict[str, Any]) -> Reply:
        if self._queue:
            return self._queue.popleft()
        if self.handler is not None:
            reply = self.handler(body)
            return await reply if inspect.isawaitable(reply) else reply
        self.unscripted += 1
        return text("(fake: no scripted reply)")

    async def _until_stopping(self, seconds: float | None = None) -> bool:
        """Wait up to `seconds` (forever if None); True if the server is stopping."""
        try:
            async with asyncio.timeout(seconds):
                await self._stopping.wait()
        except TimeoutError:
            return False
        return True

    async def _resolve(self, reply: Reply) -> Reply | None:
        """Play out Hang/Delayed/Gated; None means give up because the server is stopping."""
        while True:
            match reply:
                case Hang():
                    await self._until_stopping()
                    return None
                case Delayed(seconds, inner):
                    if await self._until_stopping(seconds):
                        return None
                    reply = inner
                case Gated(event, inner):
                    if await self._held(event):
                        return None
                    reply = inner
                case _:
                    return reply

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        async with self._arrived:
            self.requests.append(body)
            self._arrived.notify_all()
        reply = await self._resolve(await self._next_reply(body))
        if reply is None:
            return web.Response(status=503, text="fake LLM stopping")
        if isinstance(reply, Error):
            return _error_response(reply)
        if isinstance(reply, Garbage):
            return web.Response(body=reply.body.encode(), content_type="application/json")
        if isinstance(reply, Cut):
            return await self._cut(request, body, reply.reply, reply.error, reply.hold)
        pause, every = None, 0.0
        if isinstance(reply, Dripped):
            every, reply = reply.every, reply.reply
        if isinstance(reply, Paused):
            pause, reply = reply, reply.reply
            if not body.get("stream") and await self._held(pause.event):
                return web.Response(status=503, text="fake LLM stopping")
        assert isinstance(reply, Text | ToolCalls)
        usage: dict[str, Any] = _usage(body, reply)
        if self.cached_tokens:
            usage["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        self.usages.append(usage)
        if body.get("stream"):
            return await self._stream(request, body, reply, pause, every, usage)
        return web.json_response({**_completion(body, reply), "usage": usage})

    async def _held(self, event: asyncio.Event) -> bool:
        """Wait for `event`; True if the server stopped first."""
        waiters = [
            asyncio.ensure_future(event.wait()),
            asyncio.ensure_future(self._stopping.wait()),
        ]
        _, pending = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        return not event.is_set()

    async def _stream(
        self,
        request: web.Request,
        body: dict[str, Any],
        reply: Text | ToolCalls,
        pause: Paused | None = None,
        every: float = 0.0,
        usage: dict[str, Any] | None = None,
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        sent = 0
        async for chunk in _chunks(body, reply):
            if usage is not None and "usage" in chunk:
                chunk = {**chunk, "usage": usage}
            if pause is not None and sent == pause.after and await self._held(pause.event):
                return response
            if every and sent > 1 and await self._until_stopping(every):
                return response
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
            sent += 1
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def _cut(
        self,
        request: web.Request,
        body: dict[str, Any],
        reply: Text | ToolCalls,
        error: Error | None = None,
        hold: asyncio.Event | None = None,
    ) -> web.StreamResponse:
        if body.get("stream"):
            chunks = [f"data: {json.dumps(c)}\n\n".encode() async for c in _chunks(body, reply)]
            head, headers = b"".join(chunks[: len(chunks) // 2]), {}
        else:
            payload = json.dumps(_completion(body, reply)).encode()
            # The length promises the whole body; the connection closes after half of it.
            head, headers = payload[: len(payload) // 2], {"Content-Length": str(len(payload))}
        content_type = "text/event-stream" if body.get("stream") else "application/json"
        response = web.StreamResponse(headers={"Content-Type": content_type, **headers})
        await response.prepare(request)
        await response.write(head)
        if hold is not None and body.get("stream") and await self._held(hold):
            return response
        if error is not None and body.get("stream"):
            event = {"error": {"message": error.message, "type": error.type, "code": error.code}}
            await response.write(f"data: {json.dumps(event)}\n\ndata: [DONE]\n\n".encode())
            await response.write_eof()
        elif request.transport is not None:
            request.transport.close()
        return response

    async def _embeddings(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.embedding_requests.append(body)
        inputs = body.get("input", [])
        inputs = [inputs] if isinstance(inputs, str) else list(inputs)
        data: list[dict[str, Any]] = []
        for index, item in enumerate(inputs):
            vector = embed_text(item if isinstance(item, str) else " ".join(map(str, item)))
            encoded: Any = vector
            if body.get("encoding_format") == "base64":
                encoded = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        tokens = _words(inputs)
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "model": body.get("model", ""),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    async def _transcriptions(self, request: web.Request) -> web.Response:
        """Multipart upload in, `{"text": ...}` out: the transcript names the file's size so a
        test can tell the real bytes arrived."""
        form = await request.post()
        upload = form.get("file")
        data = upload.file.read() if hasattr(upload, "file") else b""
        self.transcription_requests.append({"model": form.get("model"), "bytes": len(data)})
        return web.json_response({"text": f"transcript of {len(data)} bytes of audio"})


def _error_response(reply: Error) -> web.Response:
    payload = {
        "error": {"message": reply.message, "type": reply.type, "param": None, "code": reply.code}
    }
    headers = {}
    if reply.retry_after is not None:
        headers["Retry-After"] = f"{reply.retry_after:g}"
    return web.json_response(payload, status=reply.status, headers=headers)


def _usage(body: dict[str, Any], reply: Text | ToolCalls) -> dict[str, int]:
    # Word counts stand in for tokens: deterministic, and they grow with the conversation.
    prompt = _words([m.get("content") for m in body.get("messages", [])])
    if isinstance(reply, Text):
        completion = _words(reply.content)
    else:
        completion = _words(reply.content) + sum(_words(c.arguments) + 1 for c in reply.calls)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _tool_call_ids(reply: ToolCalls) -> list[str]:
    return [c.id or f"call_{uuid.uuid4().hex[:12]}" for c in reply.calls]


def _completion(body: dict[str, Any], reply: Text | ToolCalls) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant"}
    if isinstance(reply, Text):
        message["content"] = reply.content
        finish_reason = reply.finish_reason
    else:
        message["content"] = reply.content
        message["tool_calls"] = [
            {"id": _id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for _id, c in zip(_tool_call_ids(reply), reply.calls, strict=True)
        ]
        finish_reason = "tool_calls"
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": _usage(body, reply),
    }


async def _chunks(body: dict[str, Any], reply: Text | ToolCalls) -> AsyncIterator[dict[str, Any]]:
    base = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", ""),
    }

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        return {**base, "choices": [choice]}

    yield chunk({"role": "assistant", "content": ""})
    if isinstance(reply, Text):
        # Split on spaces, keeping them, so joined deltas reproduce the content exactly.
        words = reply.content.split(" ")
        for i, word in enumerate(words):
            yield chunk({"content": word if i == len(words) - 1 else word + " "})
        finish_reason = reply.finish_reason
    else:
        if reply.content:
            yield chunk({"content": reply.content})
        for index, (_id, c) in enumerate(zip(_tool_call_ids(reply), reply.calls, strict=True)):
            head = {"index": index, "id": _id, "type": "function"}
            yield chunk({"tool_calls": [{**head, "function": {"name": c.name, "arguments": ""}}]})
            half = len(c.arguments) // 2
            for part in (c.arguments[:half], c.arguments[half:]):
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
        finish_reason = "tool_calls"
    yield chunk({}, finish_reason)
    if (body.get("stream_options") or {}).get("include_usage"):
        yield {**base, "choices": [], "usage": _usage(body, reply)}


def unsupported_temperature(value: Any) -> Error:
    """OpenAI's answer when a reasoning model is sent a temperature other than its own."""
    message = (
        f"Unsupported value: 'temperature' does not support {value} with this model. "
        "Only the default (1) value is supported."
    )
    return Error(400, message, "invalid_request_error", "unsupported_value")


def fixed_temperature(model: str, answer: Handler) -> Handler:
    """A handler for a provider whose `model` takes no temperature but its default (1), as
    OpenAI's reasoning models: such a request is refused, every other one goes to `answer`."""

    def handle(body: dict[str, Any]) -> Reply | Awaitable[Reply]:
        sent = body.get("temperature")
        if body.get("model") == model and sent is not None and sent != 1:
            return unsupported_temperature(sent)
        return answer(body)

    return handle
