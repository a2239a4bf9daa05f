"""send_file: the model sends a file or photo into the current chat, within its trust's reach."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from clawgate.agent.tools.base import Tool, ToolContext, ToolError
from clawgate.agent.tools.paths import resolve_path
from clawgate.kernel.bus import OutboundMessage

MAX_SEND_BYTES = 45 * 1024 * 1024  # under Telegram's 50 MB bot upload limit


class SendFile(Tool):
    name: ClassVar[str] = "send_file"
    description: ClassVar[str] = (
        "Send a file from the workspace to the user in this chat (images arrive as photos). "
        "Use it when the user asks for a file, not to show text you can write in the reply."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "The file, relative to the workspace"},
            "caption": {"type": "string", "description": "Optional text sent with the file"},
        },
        "required": ["path"],
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        if ctx.outbox is None or not ctx.channel:
            raise ToolError("this chat cannot receive files")
        path = resolve_path(args["path"], ctx)
        stat = await asyncio.to_thread(lambda: path.stat() if path.is_file() else None)
        if stat is None:
            raise ToolError(f"file not found: {args['path']}")
        if stat.st_size > MAX_SEND_BYTES:
            raise ToolError(f"{args['path']} is {stat.st_size // 1_000_000} MB; the limit is 45 MB")
        relative = path.relative_to(ctx.workspace).as_posix()
        caption = str(args.get("caption") or "")
        await ctx.outbox(
            OutboundMessage(
                channel=ctx.channel, chat_id=ctx.chat_id, text=caption, media=(relative,)
            )
        )
        return f"Sent {args['path']} ({stat.st_size} bytes) to the chat."
