"""What the web and MCP tool tests share: a tool context in a tmp workspace at a given trust,
and one call through the real registry (validation, redaction, the result cap)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clawgate.agent.memory.lock import MemoryLock
from clawgate.agent.tools import Tool, ToolContext, ToolRegistry, default_tools
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import ToolsConfig
from clawgate.kernel.storage import DiskWriter


def tool_context(
    workspace: Path, trust: Trust = Trust.OWNER, *, secrets: tuple[str, ...] = (), **web: Any
) -> ToolContext:
    writer = DiskWriter()
    ctx = ToolContext(
        workspace=workspace.resolve(),
        trust=trust,
        session_key="telegram:1" if trust.is_owner else "telegram:-100",
        config=ToolsConfig(web=web),
        secrets=secrets,
        writer=writer,
        memory_lock=MemoryLock(workspace.resolve(), writer),
    )
    ctx.make_root()
    return ctx


async def call(
    ctx: ToolContext, name: str, tools: list[Tool[Any]] | None = None, **args: Any
) -> str:
    registry = ToolRegistry(default_tools() if tools is None else tools)
    return await registry.execute(name, json.dumps(args), ctx)
