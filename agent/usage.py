"""Token counts: each session's latest turn (`/status` reports it) and the totals per day and
per session since the process started (the dashboard reports them)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime

USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")


class TurnUsage:
    """Shared by the AgentLoop (which records) and the CommandHandler (which reports)."""

    def __init__(self, today: Callable[[], date] = lambda: datetime.now().astimezone().date()):
        self._last: dict[str, dict[str, int]] = {}
        self._today = today
        # The loop passes one dict per turn and grows it after every model call; what was
        # already counted of it is kept beside it, so each call is added once.
        self._counted: dict[str, tuple[dict[str, int], dict[str, int]]] = {}
        self._totals: dict[tuple[date, str], dict[str, int]] = {}

    def record(self, session_key: str, usage: dict[str, int]) -> None:
        """The running totals of the session's current turn (replaces the previous turn's)."""
        self._last[session_key] = usage
        turn, counted = self._counted.get(session_key, (None, {}))
        if turn is not usage:
            counted = {}
        total = self._totals.setdefault((self._today(), session_key), dict.fromkeys(USAGE_KEYS, 0))
        for key in USAGE_KEYS:
            total[key] += usage.get(key, 0) - counted.get(key, 0)
        self._counted[session_key] = (usage, {key: usage.get(key, 0) for key in USAGE_KEYS})

    def last(self, session_key: str) -> dict[str, int]:
        return self._last.get(session_key, {})

    def forget(self, session_key: str) -> None:
        """The session started afresh (/new): its last turn belongs to the archived one."""
        self._last.pop(session_key, None)

    def totals(self) -> dict[tuple[date, str], dict[str, int]]:
        """Tokens per (day, session key) since the process started; a copy."""
        return {key: dict(counts) for key, counts in self._totals.items()}
