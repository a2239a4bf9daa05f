"""The heartbeat: every interval inside the active hours, if HEARTBEAT.md lists anything to
act on, one turn in `heartbeat:main`; anything but HEARTBEAT_OK goes to the owner's chat."""

from __future__ import annotations

import asyncio
import logging
import re
from datetime import datetime
from pathlib import Path

from clawgate.agent.scheduled import is_empty_reply
from clawgate.gateway.cron.models import Clock, utc_now, zone
from clawgate.gateway.cron.turns import ScheduledTurns
from clawgate.gateway.cron.windows import leading_window, within_hours
from clawgate.kernel.config import HeartbeatConfig

log = logging.getLogger(__name__)

HEARTBEAT_OK = "HEARTBEAT_OK"
HEARTBEAT_KEEP_RUNS = 2
MAX_HEARTBEAT_CHARS = 8_000
HEARTBEAT_PROMPT = (
    "[heartbeat] This is your periodic check, not a message from the owner. The tasks in "
    "HEARTBEAT.md are:\n\n{tasks}\n\nDo what is due now. If nothing needs the owner's "
    "attention, reply with exactly HEARTBEAT_OK. Otherwise reply with the message for the "
    "owner; it is sent to their chat."
)

_COMMENT = re.compile(r"<!--.*?(-->|\Z)", re.S)
_LIST_MARKER = re.compile(r"^(?:[-*+]|\d+[.)])\s*(?:\[[ xX]?\]\s*)?")


def heartbeat_tasks(text: str, moment: datetime | None = None) -> str | None:
    """HEARTBEAT.md without comments if it holds anything to act on, else None (only
    headings, comments, blank lines or empty list items). With `moment`, an item gated by a
    time window (gateway/cron/windows.py) that is not open then is left out, and counts as
    nothing to act on: a deterministic check, so a quiet hour makes no model call."""
    kept: list[str] = []
    due = False
    for line in _COMMENT.sub("", text).splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            kept.append(line)
            continue
        item = _LIST_MARKER.sub("", stripped).strip()
        window, rest = leading_window(item)
        if window is not None and moment is not None and not window.open_at(moment):
            continue
        due = due or bool(rest)
        kept.append(line)
    return "\n".join(kept).strip()[:MAX_HEARTBEAT_CHARS] if due else None


def is_heartbeat_ok(text: str) -> bool:
    rest = text.replace(HEARTBEAT_OK, "")
    return not re.sub(r"[\s*_.,!`'\"()\[\]-]", "", rest)


class Heartbeat:
    """Every interval inside the active hours: if HEARTBEAT.md has tasks, one turn in
    `heartbeat:main`; anything but HEARTBEAT_OK goes to `deliver_to`."""

    def __init__(
        self,
        config: HeartbeatConfig,
        *,
        timezone: str,
        workspace: Path,
        turns: ScheduledTurns,
        clock: Clock = utc_now,
    ) -> None:
        self.config = config
        self.timezone = zone(timezone)
        self.path = workspace / "HEARTBEAT.md"
        self.turns = turns
        self.clock = clock
        self._lock = asyncio.Lock()
        # (when, outcome) of the latest tick, for the dashboard; None before the first.
        self.last: tuple[datetime, str] | None = None

    async def tick(self) -> str:
        """One heartbeat; returns what happened (for logs and tests)."""
        if self._lock.locked():
            return "running"
        async with self._lock:
            outcome = await self._tick()
        self.last = (self.clock(), outcome)
        log.debug("heartbeat: %s", outcome)
        return outcome

    async def _tick(self) -> str:
        target = self.config.deliver_to
        if not target:
            return "no-target"
        now = self.clock().astimezone(self.timezone)
        if not within_hours(self.config.active_hours, now):
            return "outside-hours"
        if self.turns.dispatcher.busy(target):
            return "busy"
        try:
            text = await asyncio.to_thread(self.path.read_text, encoding="utf-8")
        except FileNotFoundError:
            return "no-tasks"
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("heartbeat: cannot read %s: %s", self.path, exc)
            return "no-tasks"
        tasks = heartbeat_tasks(text, now)
        if tasks is None:
            return "no-tasks"
        prompt = HEARTBEAT_PROMPT.format(tasks=tasks)
        try:
            trust = await self.turns.target_trust(target)
            reply = await self.turns.turn(
                "heartbeat", "main", prompt, trust, keep_runs=HEARTBEAT_KEEP_RUNS
            )
        except Exception:
            log.exception("heartbeat: the turn failed")
            return "error"
        if reply is None or is_empty_reply(reply):
            return "ok"
        if reply.is_error:
            log.warning("heartbeat: %s", reply.text)
            return "error"
        if is_heartbeat_ok(reply.text):
            return "ok"
        await self.turns.deliver(target, reply.text, label="[heartbeat] ")
        return "delivered"
