"""Scripting the model's side of memory consolidation: spotting the consolidation request and
answering it with a save_memory call."""

from __future__ import annotations

from typing import Any

from tests.fakes.llm import ToolCalls, tool_call


def is_consolidation(request: dict[str, Any]) -> bool:
    return any(t["function"]["name"] == "save_memory" for t in request.get("tools") or [])


def save(entry: str = "Ann planned the Lisbon trip.", memory: str | None = None) -> ToolCalls:
    args = {"history_entry": entry}
    if memory is not None:
        args["memory_update"] = memory
    return tool_call("save_memory", **args)
