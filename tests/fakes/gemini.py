"""A fake of Google's Gemini API on 127.0.0.1: `POST /v1beta/models/<model>:generateContent`
and `:streamGenerateContent?alt=sse`.

Each request's JSON body, path and query are kept (`requests`, `paths`, `queries`,
`headers`). Answers are scripted with the FakeLLM's reply types (`text(...)`,
`tool_calls(call(...))`, `error(...)`) and sent in the API's shape: one candidate whose
content parts hold text and `functionCall`s, `finishReason`, `usageMetadata`; a streamed
request gets the text in word-sized events, the calls whole, usage in the last event.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

from aiohttp import web

from tests.fakes.llm import Error, Reply, Text, ToolCalls
from tests.fakes.server import LoopbackServer

_STATUS = {400: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL"}


class FakeGemini(LoopbackServer):
    """Scripted answers in order; unscripted requests get a fixed text."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.queries: list[dict[str, str]] = []
        self.headers: list[dict[str, str]] = []
        self.cached_tokens = 0
        self._queue: deque[Reply] = deque()
        super().__init__()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1beta/models/{call}", self._call)

    def script(self, *replies: Reply) -> None:
        self._queue.extend(replies)

    def _usage(self) -> dict[str, int]:
        usage = {"promptTokenCount": 11, "candidatesTokenCount": 7, "totalTokenCount": 18}
        if self.cached_tokens:
            usage["cachedContentTokenCount"] = self.cached_tokens
        return usage

    async def _call(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        self.paths.append(request.path)
        self.queries.append(dict(request.query))
        self.headers.append(dict(request.headers))
        reply = self._queue.popleft() if self._queue else Text("(fake: no scripted reply)")
        if isinstance(reply, Error):
            status = _STATUS.get(reply.status, "UNKNOWN")
            error = {"error": {"code": reply.status, "message": reply.message, "status": status}}
            return web.json_response(error, status=reply.status)
        if not isinstance(reply, Text | ToolCalls):
            raise NotImplementedError(f"{type(reply).__name__} is not served by this fake")
        parts: list[dict[str, Any]] = []
        if reply.content:
            parts.append({"text": reply.content})
        if isinstance(reply, ToolCalls):
            parts += [
                {"functionCall": {"name": c.name, "args": json.loads(c.arguments)}}
                for c in reply.calls
            ]
        reason = (
            "MAX_TOKENS" if isinstance(reply, Text) and reply.finish_reason == "length" else "STOP"
        )
        if not request.path.endswith(":streamGenerateContent"):
            return web.json_response(
                {
                    "candidates": [
                        {"content": {"role": "model", "parts": parts}, "finishReason": reason}
                    ],
                    "usageMetadata": self._usage(),
                }
            )
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        pieces: list[dict[str, Any]] = []
        for part in parts:
            if "text" in part:
                words = part["text"].split(" ")
                pieces += [
                    {"text": w + (" " if i < len(words) - 1 else "")} for i, w in enumerate(words)
                ]
            else:
                pieces.append(part)
        for n, piece in enumerate(pieces):
            event: dict[str, Any] = {
                "candidates": [{"content": {"role": "model", "parts": [piece]}, "index": 0}]
            }
            if n == len(pieces) - 1:
                event["candidates"][0]["finishReason"] = reason
                event["usageMetadata"] = self._usage()
            await response.write(f"data: {json.dumps(event)}\r\n\r\n".encode())
        await response.write_eof()
        return response
