"""An MCP server's tool as one of ours: `<server>__<tool>`, the server's own JSON schema, and
its result as text.

The arguments are checked by the server against its schema (it answers a bad call with an
error result the model reads); the registry only makes sure they are a JSON object. The
result's text parts are joined; images, audio and binary resources are named, not inlined;
structured content without text is shown as JSON. The registry caps and redacts it like any
tool's result. Offered in owner chats, and in the others only for a server with
`shared = true` (whatever `tools.web.in_groups` says).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict

from clawgate.agent.tools.base import Tool, ToolContext, ToolParams
from clawgate.kernel.bus import Trust
from clawgate.kernel.config_sections import McpServerConfig, ToolsConfig
from clawgate.kernel.errors import ToolError

if TYPE_CHECKING:
    from clawgate.agent.tools.mcp_hub import McpHub

_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class McpTool(Tool["McpTool.Params"]):
    """Base of the class `mcp_tool` makes for each tool of a server."""

    class Params(ToolParams):
        # Whatever the server's schema names: the server checks them.
        model_config = ConfigDict(strict=True, extra="allow", frozen=True)

    def __init__(
        self, hub: McpHub, server: McpServerConfig, tool: str, schema: dict[str, Any]
    ) -> None:
        self._hub = hub
        self._server = server
        self._tool = tool
        self._schema = schema

    def parameters(self) -> dict[str, Any]:
        return self._schema

    def available(self, ctx_trust: Trust, config: ToolsConfig) -> bool:
        return ctx_trust.is_owner or self._server.shared

    async def run(self, params: Params, ctx: ToolContext) -> str:
        result = await self._hub.call(self._server.name, self._tool, params.model_dump())
        text = result_text(result)
        if getattr(result, "is_error", False):
            raise ToolError(f"{self.name}: {text or 'the tool failed'}")
        return text or "(no output)"


def mcp_tool(hub: McpHub, server: McpServerConfig, spec: Any) -> McpTool:
    """The tool `spec` (an mcp.types.Tool) of `server`, named `<server>__<tool>` (characters a
    model API refuses in a name replaced by "_"); called by its own name."""
    schema = dict(spec.input_schema or {"type": "object", "properties": {}})
    schema.pop("title", None)
    # Model APIs take function names of [A-Za-z0-9_-], at most 64; MCP names may hold more.
    name = _NAME_UNSAFE.sub("_", f"{server.name}__{spec.name}")[:64]
    named = type(
        f"McpTool_{name}",
        (McpTool,),
        {
            "name": name,
            "description": spec.description or f"{spec.name} (MCP server {server.name})",
        },
    )
    tool: McpTool = named(hub, server, spec.name, schema)
    return tool


def result_text(result: Any) -> str:
    """A CallToolResult as text for the model."""
    parts = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(text if text is not None else f"[resource {resource.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}]")
        else:
            parts.append(f"[{kind}: {getattr(block, 'mime_type', '')}]")
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False))
    return "\n".join(parts)
