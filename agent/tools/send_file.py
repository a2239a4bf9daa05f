"""send_file: the model sends a file or photo into the current chat, within its trust's reach
(agent/tools/paths.py: a non-owner chat sends only from its own area or shared/)."""

from __future__ import annotations

import asyncio
from typing import ClassVar

from pydantic import Field

from clawgate.agent.tools.base import Tool, ToolContext, ToolParams
from clawgate.agent.tools.paths import resolve_path
from clawgate.kernel.bus import OutboundMessage
from clawgate.kernel.errors import PathOutsideWorkspace, ToolError
from clawgate.kernel.storage import inside

MAX_SEND_BYTES = 45 * 1024 * 1024  # under Telegram's 50 MB bot upload limit


class SendFile(Tool["SendFile.Params"]):
    name: ClassVar[str] = "send_file"
    description: ClassVar[str] = (
        "Send a file from the workspace to the user in this chat (images arrive as photos). "
        "Use it when the user asks for a file, not to show text you can write in the reply."
    )

    class Params(ToolParams):
        path: str = Field(description="The file, relative to the workspace")
        caption: str = Field("", description="Optional text sent with the file")

    async def run(self, params: Params, ctx: ToolContext) -> str:
        if ctx.outbox is None or not ctx.channel:
            raise ToolError("this chat cannot receive files")
        shown = params.path
        path = resolve_path(shown, ctx)
        stat = await asyncio.to_thread(lambda: path.stat() if path.is_file() else None)
        if stat is None:
            raise ToolError(f"file not found: {shown}")
        if not inside(path, ctx.workspace):
            # The channel sends workspace-relative paths only, even for an unrestricted owner.
            raise PathOutsideWorkspace(f"path {shown!r} is outside the workspace")
        if stat.st_size > MAX_SEND_BYTES:
            raise ToolError(f"{shown} is {stat.st_size // 1_000_000} MB; the limit is 45 MB")
        relative = path.relative_to(ctx.workspace).as_posix()
        # The trust goes along: the channel checks the file against the same Reach again.
        await ctx.outbox(
            OutboundMessage(
                channel=ctx.channel,
                chat_id=ctx.chat_id,
                text=params.caption,
                media=(relative,),
                trust=ctx.trust,
            )
        )
        return f"Sent {shown} ({stat.st_size} bytes) to the chat."
