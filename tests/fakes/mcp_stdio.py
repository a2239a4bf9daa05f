"""The fake MCP server of mcp_server.py over stdio, without the SDK: the same tools, and on the
wire what the SDK's server sends for them (newline-delimited JSON-RPC; the tool list with its
generated input and output schemas; text and structured results; an unknown tool or bad
arguments as an error result). Importing the SDK's server costs a new process ~1.3 s of CPU
(its pydantic types), and the suite starts ~17 of these; tests/test_mcp.py's
`test_the_stdio_fake_answers_as_the_sdk_server_does` compares the two message for message.

Run as a script: `python mcp_stdio.py`."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
CAPABILITIES = {
    "prompts": {"listChanged": False},
    "resources": {"listChanged": False, "subscribe": False},
    "tools": {"listChanged": False},
}
JSON_TYPES = {str: "string", int: "integer"}


def _crash() -> str:
    os._exit(3)


# name: (description, the function's name, its parameters, its result type, what it does)
TOOLS: dict[str, tuple[str, str, dict[str, type], type, Callable[..., Any]]] = {
    "shout": ("Upper-case a text.", "shout", {"text": str}, str, lambda text: text.upper()),
    "add": ("Add two integers.", "add", {"a": int, "b": int}, int, lambda a, b: a + b),
    "whoami": (
        "The FAKE_MCP_TOKEN and GATEWAY_SECRET variables this process sees.",
        "whoami",
        {},
        str,
        lambda: (
            f"token={os.environ.get('FAKE_MCP_TOKEN', '-')} "
            f"gateway={os.environ.get('GATEWAY_SECRET', '-')}"
        ),
    ),
    "pid": (
        "This server's process id (a test kills it from outside).",
        "pid",
        {},
        int,
        os.getpid,
    ),
    "crash": ("Die at once, as a crashing server does.", "crash", {}, str, _crash),
    "notes.search": (
        "A name with a dot, as some servers use.",
        "notes_search",
        {"query": str},
        str,
        lambda query: f"found {query}",
    ),
    "hidden": (
        "A tool an allowlist leaves out.",
        "hidden",
        {},
        str,
        lambda: "should not be offered",
    ),
}


def _schema(title: str, fields: dict[str, type]) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "properties": {
            name: {"title": name.replace("_", " ").title(), "type": JSON_TYPES[kind]}
            for name, kind in fields.items()
        }
    }
    if fields:
        schema["required"] = list(fields)
    schema.update(type="object", title=title)
    return schema


def tool_list() -> list[dict[str, Any]]:
    return [
        {
            "description": description,
            "inputSchema": _schema(f"{function}Arguments", params),
            "name": name,
            "outputSchema": _schema(f"{function}Output", {"result": result}),
        }
        for name, (description, function, params, result, _) in TOOLS.items()
    ]


def _error(text: str) -> dict[str, Any]:
    return {"content": [{"text": text, "type": "text"}], "isError": True}


def _lax(value: Any, kind: type) -> Any:
    """The argument as pydantic's lax mode takes it (an int from its digits), or None."""
    if kind is int and isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return value if type(value) is kind else None


def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    if name not in TOOLS:
        return _error(f"Unknown tool: {name}")
    _, _, params, _, run = TOOLS[name]
    given = {p: _lax(arguments.get(p), kind) for p, kind in params.items()}
    wrong = [p for p, value in given.items() if value is None]
    if wrong:
        return _error(f"Error executing tool {name}: invalid arguments {wrong}")
    value = run(**given)
    return {
        "content": [{"text": str(value), "type": "text"}],
        "isError": False,
        "structuredContent": {"result": value},
    }


def answer(request: dict[str, Any]) -> dict[str, Any] | None:
    """The reply to one JSON-RPC message; None for a notification."""
    if "id" not in request:
        return None
    method, params = request.get("method"), request.get("params") or {}
    result: dict[str, Any]
    if method == "initialize":
        asked = params.get("protocolVersion")
        result = {
            "capabilities": CAPABILITIES,
            "protocolVersion": asked if asked in VERSIONS else VERSIONS[-1],
            "serverInfo": {"name": "fake-tools", "version": ""},
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": tool_list()}
    elif method == "tools/call":
        result = call(params.get("name", ""), params.get("arguments") or {})
    elif method == "resources/list":
        result = {"resources": []}
    elif method == "prompts/list":
        result = {"prompts": []}
    else:
        error = {"code": -32601, "message": "Method not found"}
        return {"jsonrpc": "2.0", "id": request["id"], "error": error}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def serve() -> None:
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        reply = answer(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    serve()
