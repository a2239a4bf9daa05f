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


def heartbeat_tasks(text: str) -> str | None:
    """HEARTBEAT.md without comments if it holds anything to act on, else None (only
    headings, comments, blank lines or empty list items)."""
    cleaned = _COMMENT.sub("", text)
    for line in cleaned.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if _LIST_MARKER.sub("", stripped).strip():
            return cleaned.strip()[:MAX_HEARTBEAT_CHARS]
    return None


def within_hours(active_hours: str, moment: datetime) -> bool:
    """`"08:00-22:00"` (end exclusive; `24:00` allowed); a start after the end wraps past
    midnight; equal ends mean all day."""
    start_text, end_text = active_hours.split("-")
    start_h, start_m = map(int, start_text.split(":"))
    end_h, end_m = map(int, end_text.split(":"))
    start, end = start_h * 60 + start_m, end_h * 60 + end_m
    now = moment.hour * 60 + moment.minute
    if start == end:
        return True
    if start < end:
        return start <= now < end
    return now >= start or now < end


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
        if not within_hours(self.config.active_hours, self.clock().astimezone(self.timezone)):
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
        tasks = heartbeat_tasks(text)
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
