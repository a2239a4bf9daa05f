"""The tools the model may call, and the one entry point that runs a call and never raises.

The schema each tool offers is its `Params.model_json_schema()` (titles stripped, built once
per tool); the model's arguments are parsed with `json.loads` (which also unwraps
double-encoded arguments) and checked with the same `Params` model, strict JSON types.
`execute` turns an unknown or hidden tool, malformed JSON, missing or mistyped arguments and
OSError into one `Error: ...` line for the model; a crash is logged and reported the same
way. Only CancelledError passes, so /stop can end a turn. Every result is scrubbed by the
kernel `Redactor` (`ctx.redact`) and capped at `tools.max_result_chars`, head and tail kept.

Besides its own tools, a registry asks its `sources` (the MCP servers' tools, which come and
go as servers start and die) at each lookup; a source's tool never shadows a built-in one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from pydantic import ValidationError

from clawgate.agent.tools.base import Tool, ToolContext
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import ToolsConfig
from clawgate.kernel.errors import ToolError, describe_validation, one_line

logger = logging.getLogger(__name__)

# pydantic's error type for a value of the wrong JSON type -> the type the schema asks for.
_EXPECTED = {
    "string_type": "string",
    "int_type": "integer",
    "float_type": "number",
    "bool_type": "boolean",
    "dict_type": "object",
    "model_type": "object",
    "list_type": "array",
}


class ToolSource(Protocol):
    """Tools that change while the gateway runs (agent/tools/mcp_hub.py)."""

    def tools(self) -> Sequence[Tool[Any]]: ...


class ToolRegistry:
    """Holds tools by name; `execute` turns every failure into text the model can read."""

    def __init__(self, tools: Iterable[Tool[Any]] = (), sources: Sequence[ToolSource] = ()) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        # Built once per tool: generating a pydantic schema costs far more than a turn's routing.
        self._parameters: dict[str, dict[str, Any]] = {}
        self._sources = sources
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool[Any]) -> None:
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        self._parameters[tool.name] = tool.parameters()

    def _current(self) -> dict[str, Tool[Any]]:
        if not self._sources:
            return self._tools
        merged = dict(self._tools)
        for source in self._sources:
            for tool in source.tools():
                merged.setdefault(tool.name, tool)
        return merged

    def names(self, trust: Trust, config: ToolsConfig) -> list[str]:
        return [name for name, tool in self._current().items() if tool.available(trust, config)]

    def schemas(self, trust: Trust, config: ToolsConfig) -> list[dict[str, Any]]:
        """OpenAI-style function schemas of the tools available at this trust."""
        return [
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": tool.description,
                    "parameters": self._parameters.get(name) or tool.parameters(),
                },
            }
            for name, tool in self._current().items()
            if tool.available(trust, config)
        ]

    async def execute(self, name: str, raw_arguments: str | dict | None, ctx: ToolContext) -> str:
        """Run one tool call. Returns the result or an "Error: ..." text; never raises.

        CancelledError is the one exception let through, so /stop can end a turn.
        """
        text = await self._run(name, raw_arguments, ctx)
        return _cap(ctx.redact(text), ctx.config.max_result_chars)

    async def _run(self, name: str, raw_arguments: str | dict | None, ctx: ToolContext) -> str:
        tool = self._current().get(name)
        if tool is None or not tool.available(ctx.trust, ctx.config):
            # A hidden tool reads exactly like a missing one, so trust levels are not revealed.
            available = ", ".join(self.names(ctx.trust, ctx.config)) or "none"
            return f"Error: unknown tool {name!r}. Available tools: {available}"
        try:
            args = _parse_arguments(tool, raw_arguments)
            result = await tool.run(_validate(tool, args), ctx)
        except ToolError as exc:
            return str(exc)
        except OSError as exc:
            return f"Error: {name} failed: {one_line(exc)}"
        except Exception as exc:
            logger.error("tool %s crashed: %s", name, ctx.redact(repr(exc)))
            return f"Error: {name} failed: {type(exc).__name__}: {exc}"
        return result if isinstance(result, str) else str(result)


def _parse_arguments(tool: Tool[Any], raw: str | dict | None) -> dict[str, Any]:
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


def _loads(tool: Tool[Any], text: str) -> Any:
    # json.loads rather than model_validate_json: it keeps a lone surrogate escape ("\ud800")
    # as text, and it lets a double-encoded object be unwrapped first.
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ToolError(f"the arguments for {tool.name} are not valid JSON ({exc})") from None


def _validate(tool: Tool[Any], args: dict[str, Any]) -> Any:
    """The arguments as the tool's `Params`, or a ToolError naming the first problem."""
    try:
        return tool.Params.model_validate(args)
    except ValidationError as exc:
        raise ToolError(_describe(tool, exc)) from None


def _describe(tool: Tool[Any], error: ValidationError) -> str:
    problems = error.errors()
    missing = [p["loc"][0] for p in problems if p["type"] == "missing" and len(p["loc"]) == 1]
    if missing:
        names = ", ".join(repr(key) for key in missing)
        return f"{tool.name} is missing required argument(s): {names}"
    first = problems[0]
    expected = _EXPECTED.get(first["type"])
    if expected and len(first["loc"]) == 1:
        return (
            f"argument {first['loc'][0]!r} of {tool.name} must be {expected}, "
            f"got {_json_type(first['input'])}"
        )
    return f"{tool.name}: {describe_validation(error)}"


def _json_type(value: Any) -> str:
    """What JSON calls the type of a value json.loads produced."""
    match value:
        case None:
            return "null"
        case bool():
            return "boolean"
        case int():
            return "integer"
        case float():
            return "number"
        case str():
            return "string"
        case list():
            return "array"
        case dict():
            return "object"
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
