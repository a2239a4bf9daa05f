"""`StoredMessage`: a message of the transcript as the session holds it, typed and frozen.

A session keeps each message line as the dict it was validated into on load (a
`MessageLine`, records.py): a long transcript loads at the speed of that validation, and a
model object per line would cost more than the parse itself. Readers never see the dict:
`Session.messages` and its friends hand out `StoredMessage`s, a read-only typed face over
one line, made when asked for. Only the model call needs the dict form (`to_provider`).
"""

from __future__ import annotations

from typing import Any, Literal

from clawgate.agent.session.records import MessageLine, ToolCall

Role = Literal["user", "assistant", "tool"]


class StoredMessage:
    """One stored message line: `seq` and `timestamp` as the store stamped them."""

    __slots__ = ("_line",)

    def __init__(self, line: MessageLine) -> None:
        self._line = line

    @property
    def seq(self) -> int:
        return self._line["seq"]

    @property
    def role(self) -> Role:
        return self._line["role"]

    @property
    def content(self) -> str:
        return self._line.get("content", "")

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The assistant's tool calls; empty for any other message."""
        calls = self._line.get("tool_calls")
        return tuple(ToolCall.model_validate(call) for call in calls) if calls else ()

    @property
    def tool_call_id(self) -> str | None:
        """For a tool result: the id of the call it answers."""
        return self._line.get("tool_call_id")

    @property
    def name(self) -> str | None:
        """For a tool result: the tool that produced it."""
        return self._line.get("name")

    @property
    def message_id(self) -> str | None:
        """For a user message: the platform's id, so a re-delivered copy is recognised."""
        return self._line.get("message_id")

    @property
    def timestamp(self) -> str:
        return self._line.get("timestamp", "")

    def to_provider(self) -> dict[str, Any]:
        """The message as a model provider is sent it (a new dict; content always set; seq,
        timestamp and message_id stay ours)."""
        line = self._line
        sent: dict[str, Any] = {"role": line["role"], "content": line.get("content") or ""}
        calls = line.get("tool_calls")
        if calls is not None:
            sent["tool_calls"] = [dict(call) for call in calls]
        call_id = line.get("tool_call_id")
        if call_id is not None:
            sent["tool_call_id"] = call_id
        name = line.get("name")
        if name is not None:
            sent["name"] = name
        return sent

    def to_dict(self) -> dict[str, Any]:
        """The line as it is on disk (a copy)."""
        return dict(self._line)

    def with_content(self, content: str) -> StoredMessage:
        """A copy with other content: for a view that cuts a message, never for the file."""
        return StoredMessage({**self._line, "content": content})

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StoredMessage):
            return NotImplemented
        return self._line == other._line

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StoredMessage({self._line!r})"
