"""Turn stored session messages into what the model is sent, repaired so providers accept it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from clawgate.agent.session import StoredMessage

MISSING_RESULT = "[no result: the tool call was interrupted before it finished]"


def repair_tool_pairs(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every assistant tool call gets exactly one result right after it; orphans are dropped.

    Providers reject a history where a tool call has no result, a result has no call, or a
    call has two results. Stored history can hold any of these after /stop, a crash mid-turn
    or a consolidation cut, so the repair runs on every request instead of trusting the file.
    """
    repaired: list[dict[str, Any]] = []
    pending: dict[str, str] = {}  # call id -> tool name, for the latest assistant message
    answered: set[str] = set()

    def close_pending() -> None:
        for call_id, name in pending.items():
            if call_id not in answered:
                repaired.append(
                    {
                        "role": "tool",
                        "tool_call_id": call_id,
                        "name": name,
                        "content": MISSING_RESULT,
                    }
                )
        pending.clear()
        answered.clear()

    for message in messages:
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id in pending and call_id not in answered:
                answered.add(call_id)
                repaired.append(message)
            continue  # orphan or duplicate result
        close_pending()
        repaired.append(message)
        if role == "assistant":
            for call in message.get("tool_calls") or []:
                call_id = call.get("id")
                if call_id and call_id not in pending:
                    pending[call_id] = call.get("function", {}).get("name", "")
    close_pending()
    return repaired


def to_model_messages(messages: Iterable[StoredMessage]) -> list[dict[str, Any]]:
    """Strip storage fields (seq, timestamp) and repair pairs: the history as the model sees it."""
    return repair_tool_pairs([message.to_provider() for message in messages])
