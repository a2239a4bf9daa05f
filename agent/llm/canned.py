"""One chat completion answered on 127.0.0.1 by this process, for the litellm warm-up.

litellm's first real call does one-off work that a mocked call skips (the OpenAI SDK's
response models, which pydantic builds on first use; litellm's service logger): ~25 ms a
first reply would otherwise pay. The warm-up makes that call to this canned answer, so no
request leaves the machine and no provider sees or bills it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web

CANNED: dict[str, Any] = {
    "id": "warm-up",
    "object": "chat.completion",
    "created": 0,
    "model": "warm-up",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "ok"},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


@asynccontextmanager
async def canned_chat_completions() -> AsyncIterator[str]:
    """The base URL (`http://127.0.0.1:<port>/v1`) of a server answering every chat
    completion with CANNED, while the block runs."""

    async def answer(request: web.Request) -> web.Response:
        await request.read()
        # Not kept alive: the client litellm keeps for this address holds no socket.
        return web.json_response(CANNED, headers={"Connection": "close"})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}/v1"
    finally:
        await runner.cleanup()
