"""Time windows: `heartbeat.active_hours` and the windows that gate HEARTBEAT.md items.

An item of HEARTBEAT.md is due only inside its window when it starts with one in square
brackets (after the list marker and any `[ ]` checkbox):

    - [09:00-10:00] look at the calendar          every day, 09:00 to 10:00
    - [Mon-Fri 08:00-08:30] the train times        weekdays, 08:00 to 08:30
    - [Sun] plan the week                          all Sunday
    - [Mon,Wed,Fri 18:00-19:00] the gym            those days, 18:00 to 19:00

Days are three-letter English names (any case), single or as ranges, joined by commas;
hours are HH:MM-HH:MM in the agent's time zone, the end exclusive, `24:00` allowed, a start
after the end wrapping past midnight (the day named is the one the moment falls on). A
bracket that is not such a window is ordinary text, so the item is always due.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_HOURS = r"(?:[01]\d|2[0-3]):[0-5]\d-(?:[01]\d|2[0-4]):[0-5]\d"
_DAY_PART = r"(?:mon|tue|wed|thu|fri|sat|sun)(?:-(?:mon|tue|wed|thu|fri|sat|sun))?"
_WINDOW = re.compile(
    rf"\[\s*(?P<days>{_DAY_PART}(?:\s*,\s*{_DAY_PART})*)?\s*(?P<hours>{_HOURS})?\s*\]",
    re.IGNORECASE,
)


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


@dataclass(frozen=True)
class Window:
    days: frozenset[int] | None  # weekday numbers (Monday 0); None: every day
    hours: str | None  # "HH:MM-HH:MM"; None: the whole day

    def open_at(self, moment: datetime) -> bool:
        if self.days is not None and moment.weekday() not in self.days:
            return False
        return self.hours is None or within_hours(self.hours, moment)


def _days(text: str) -> frozenset[int]:
    found: set[int] = set()
    for part in text.lower().replace(" ", "").split(","):
        first, _, last = part.partition("-")
        start, end = DAYS.index(first), DAYS.index(last or first)
        span = range(start, end + 1) if start <= end else [*range(start, 7), *range(end + 1)]
        found.update(span)
    return frozenset(found)


def leading_window(item: str) -> tuple[Window | None, str]:
    """The window an item starts with, if any, and the item's text after it."""
    match = _WINDOW.match(item)
    if match is None or not (match.group("days") or match.group("hours")):
        return None, item
    days = _days(match.group("days")) if match.group("days") else None
    return Window(days, match.group("hours")), item[match.end() :].strip()
