"""The tools the model may call, and the one entry point that runs a call and never raises."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from clawgate.agent.tools.base import Tool, ToolContext, ToolError, describe_os_error, redact
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import ToolsConfig

logger = logging.getLogger(__name__)

# JSON schema type name -> the Python types json.loads produces for it.
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "null": (type(None),),
}


class ToolRegistry:
    """Holds tools by name; `execute` turns every failure into text the model can read."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def names(self, trust: Trust, config: ToolsConfig) -> list[str]:
        return [name for name, tool in self._tools.items() if tool.available(trust, config)]

    def schemas(self, trust: Trust, config: ToolsConfig) -> list[dict[str, Any]]:
        """OpenAI-style function schemas of the tools available at this trust."""
        return [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            }
            for tool in self._tools.values()
            if tool.available(trust, config)
        ]

    async def execute(self, name: str, raw_arguments: str | dict | None, ctx: ToolContext) -> str:
        """Run one tool call. Returns the result or an "Error: ..." text; never raises.

        CancelledError is the one exception let through, so /stop can end a turn.
        """
        text = await self._run(name, raw_arguments, ctx)
        return _cap(redact(text, ctx.secrets), ctx.config.max_result_chars)

    async def _run(self, name: str, raw_arguments: str | dict | None, ctx: ToolContext) -> str:
        tool = self._tools.get(name)
        if tool is None or not tool.available(ctx.trust, ctx.config):
            # A hidden tool reads exactly like a missing one, so trust levels are not revealed.
            available = ", ".join(self.names(ctx.trust, ctx.config)) or "none"
            return f"Error: unknown tool {name!r}. Available tools: {available}"
        try:
            args = _parse_arguments(tool, raw_arguments)
            _validate(tool, args)
            result = await tool.run(args, ctx)
        except ToolError as exc:
            return str(exc)
        except OSError as exc:
            return f"Error: {name} failed: {describe_os_error(exc)}"
        except Exception as exc:
            logger.error("tool %s crashed: %s", name, redact(repr(exc), ctx.secrets))
            return f"Error: {name} failed: {type(exc).__name__}: {exc}"
        return result if isinstance(result, str) else str(result)


def _parse_arguments(tool: Tool, raw: str | dict | None) -> dict[str, Any]:
    value: Any = raw
    if value is None or (isinstance(value, str) and not value.strip()):
        return {}
    if isinstance(value, str):
        value = _loads(tool, value)
        if isinstance(value, str):
            # Some models JSON-encode the arguments object twice.
            try:
                value = json.loads(value)
            except ValueError:
                pass  # a plain JSON string: reported below as not an object
    if not isinstance(value, dict):
        raise ToolError(
            f"the arguments for {tool.name} must be a JSON object, got {_json_type(value)}"
        )
    return value


def _loads(tool: Tool, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ToolError(f"the arguments for {tool.name} are not valid JSON ({exc})") from None


def _validate(tool: Tool, args: dict[str, Any]) -> None:
    """A light check against the schema: required keys present, basic JSON types right."""
    schema = tool.parameters
    missing = [key for key in schema.get("required", ()) if key not in args]
    if missing:
        names = ", ".join(repr(k) for k in missing)
        raise ToolError(f"{tool.name} is missing required argument(s): {names}")
    for key, spec in schema.get("properties", {}).items():
        if key not in args or "type" not in spec:
            continue
        wanted = spec["type"] if isinstance(spec["type"], list) else [spec["type"]]
        if not any(_is_type(args[key], t) for t in wanted):
            raise ToolError(
                f"argument {key!r} of {tool.name} must be {' or '.join(wanted)}, "
                f"got {_json_type(args[key])}"
            )


def _is_type(value: Any, json_type: str) -> bool:
    types = _JSON_TYPES.get(json_type)
    if types is None:
        return True  # a schema type we do not check
    if isinstance(value, bool) and json_type != "boolean":
        return False  # bool is an int subclass in Python, never in JSON
    return isinstance(value, types)


def _json_type(value: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _is_type(value, name):
            return name
    return type(value).__name__


def _cap(text: str, limit: int) -> str:
    """Keep the head and tail of an oversized result, with a marker saying how much went."""
    if len(text) <= limit:
        return text
    # The real cut has no more digits than len(text), so this marker is never too short.
    marker_len = len(f"\n\n[... {len(text)} characters cut ...]\n\n")
    keep = max(limit - marker_len, 0)
    head = keep * 2 // 3
    tail = keep - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n\n[... {cut} characters cut ...]\n\n{text[len(text) - tail :]}"
