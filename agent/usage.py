"""Token counts of each session's latest turn: the loop records them, `/status` reports them."""

from __future__ import annotations


class TurnUsage:
    """Shared by the AgentLoop (which records) and the CommandHandler (which reports)."""

    def __init__(self) -> None:
        self._last: dict[str, dict[str, int]] = {}

    def record(self, session_key: str, usage: dict[str, int]) -> None:
        """The running totals of the session's current turn (replaces the previous turn's)."""
        self._last[session_key] = usage

    def last(self, session_key: str) -> dict[str, int]:
        return self._last.get(session_key, {})

    def forget(self, session_key: str) -> None:
        """The session started afresh (/new): its last turn belongs to the archived one."""
        self._last.pop(session_key, None)
