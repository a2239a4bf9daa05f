"""A fake of Anthropic's Messages API on 127.0.0.1: `POST /v1/messages`, plain and SSE.

Each request's JSON body and headers are kept (`requests`, `headers`). Answers are scripted
with the FakeLLM's reply types (`text(...)`, `tool_calls(call(...))`, `error(...)`), sent in
the Messages API's shape: content blocks, `stop_reason`, usage with the cache counts; a
streamed request gets message_start, content_block_start/delta/stop per block (text deltas,
a tool's input as partial JSON in two pieces), message_delta and message_stop.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

from aiohttp import web

from tests.fakes.llm import Error, Reply, Text, ToolCalls
from tests.fakes.server import LoopbackServer

_STOP = {"stop": "end_turn", "length": "max_tokens"}


def _blocks(reply: Text | ToolCalls) -> list[dict[str, Any]]:
    if isinstance(reply, Text):
        return [{"type": "text", "text": reply.content}]
    blocks: list[dict[str, Any]] = []
    if reply.content:
        blocks.append({"type": "text", "text": reply.content})
    for n, call in enumerate(reply.calls):
        blocks.append(
            {
                "type": "tool_use",
                "id": call.id or f"toolu_{n:02d}",
                "name": call.name,
                "input": json.loads(call.arguments),
            }
        )
    return blocks


class FakeAnthropic(LoopbackServer):
    """Scripted answers in order; unscripted requests get a fixed text."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        # What usage reports as read from / written to the prompt cache, per answer.
        self.cache_read = 0
        self.cache_write = 0
        self._queue: deque[Reply] = deque()
        super().__init__()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages", self._messages)

    def script(self, *replies: Reply) -> None:
        self._queue.extend(replies)

    def _usage(self, output: int) -> dict[str, int]:
        return {
            "input_tokens": 11,
            "output_tokens": output,
            "cache_read_input_tokens": self.cache_read,
            "cache_creation_input_tokens": self.cache_write,
        }

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        reply = self._queue.popleft() if self._queue else Text("(fake: no scripted reply)")
        if isinstance(reply, Error):
            error = {"type": "error", "error": {"type": reply.type, "message": reply.message}}
            return web.json_response(error, status=reply.status)
        if not isinstance(reply, Text | ToolCalls):
            raise NotImplementedError(f"{type(reply).__name__} is not served by this fake")
        blocks = _blocks(reply)
        reason = "tool_use" if isinstance(reply, ToolCalls) else _STOP[reply.finish_reason]
        if not body.get("stream"):
            return web.json_response(
                {
                    "id": "msg_fake",
                    "type": "message",
                    "role": "assistant",
                    "model": body.get("model"),
                    "content": blocks,
                    "stop_reason": reason,
                    "stop_sequence": None,
                    "usage": self._usage(7),
                }
            )
        return await self._stream(request, body, blocks, reason)

    async def _stream(
        self, request: web.Request, body: dict[str, Any], blocks: list[dict[str, Any]], reason: str
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)

        async def send(event: str, data: dict[str, Any]) -> None:
            await response.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())

        usage = self._usage(1)
        start = {"id": "msg_fake", "type": "message", "role": "assistant", "content": []}
        await send("message_start", {"type": "message_start", "message": {**start, "usage": usage}})
        await send("ping", {"type": "ping"})
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                opened: dict[str, Any] = {"type": "text", "text": ""}
                words = block["text"].split(" ")
                deltas = [
                    {"type": "text_delta", "text": w + (" " if i < len(words) - 1 else "")}
                    for i, w in enumerate(words)
                ]
            else:
                opened = {**block, "input": {}}
                raw = json.dumps(block["input"])
                half = len(raw) // 2
                deltas = [
                    {"type": "input_json_delta", "partial_json": part}
                    for part in (raw[:half], raw[half:])
                ]
            await send(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opened},
            )
            for delta in deltas:
                await send(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            await send("content_block_stop", {"type": "content_block_stop", "index": index})
        await send(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": reason, "stop_sequence": None},
                "usage": {"output_tokens": 7},
            },
        )
        await send("message_stop", {"type": "message_stop"})
        await response.write_eof()
        return response
