"""When a job fires. Crontab expressions are croniter's; APScheduler gets a trigger per job
(imported only when one is built, so reading the job files stays light).

Crontab meaning, in the job's time zone: weekdays count from Sunday = 0 (7 is Sunday too);
when day of month and day of week are both restricted (neither starts with `*`), either one
matching fires; croniter's `implement_cron_bug` gives exactly that. Across DST changes a
job at a fixed hour behaves like cron: when the clocks go forward, a time inside the gap
runs once, shifted by the gap (02:30 becomes 03:30; croniter alone would clamp it to 03:00);
when they go back, the repeated hour runs once (croniter alone would run it twice). Jobs
whose hour field starts with `*` run through both passes of the repeated hour.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta, tzinfo
from typing import TYPE_CHECKING

from croniter import CroniterBadDateError, croniter

if TYPE_CHECKING:
    from apscheduler.triggers.base import BaseTrigger

    from clawgate.gateway.cron.models import CronJob

# Each field of a crontab expression and the values it takes.
FIELDS = (
    ("minute", "0-59"),
    ("hour", "0-23"),
    ("day of month", "1-31"),
    ("month", "1-12 or jan-dec"),
    ("day of week", "0-7 or sun-sat"),
)
_TICK = timedelta(microseconds=1)


def check_crontab(expr: str) -> None:
    """Raise ValueError (one line, naming the bad field) unless `expr` is a five-field
    crontab expression."""
    fields = expr.split()
    if len(fields) != 5:
        raise ValueError(
            f"cron expression {expr!r} has {len(fields)} fields; it needs 5: "
            "minute hour day-of-month month day-of-week"
        )
    if croniter.is_valid(expr):
        return
    for index, (field, (name, values)) in enumerate(zip(fields, FIELDS, strict=True)):
        alone = ["*"] * 5
        alone[index] = field
        if not croniter.is_valid(" ".join(alone)):
            raise ValueError(
                f"invalid cron expression {expr!r}: invalid {name} {field!r} (use {values})"
            )
    raise ValueError(f"invalid cron expression {expr!r}")


def _exists(wall: datetime, tz: tzinfo) -> bool:
    """False for a wall-clock time inside a DST gap."""
    aware = wall.replace(tzinfo=tz)
    return aware.astimezone(UTC).astimezone(tz).replace(tzinfo=None) == wall


def _second_occurrence(moment: datetime, tz: tzinfo) -> bool:
    """True for the repeat of a wall-clock time when the clocks go back (DST ends)."""
    local = moment.astimezone(tz)
    first = local.replace(tzinfo=None).replace(tzinfo=tz, fold=0)
    return first.utcoffset() != local.utcoffset()


class Crontab:
    """The fire times of a crontab expression in one time zone."""

    def __init__(self, expr: str, tz: tzinfo) -> None:
        check_crontab(expr)
        self.expr = expr
        self.tz = tz
        self.fixed_hour = not expr.split()[1].startswith("*")

    def first_from(self, start: datetime) -> datetime | None:
        """The first fire time at or after `start` (aware); None if there is none."""
        # Arithmetic in UTC: on a local time it would drop `fold` (the repeated hour's
        # second pass), and comparing two local times ignores it.
        base = (start.astimezone(UTC) - _TICK).astimezone(self.tz)
        times = croniter(self.expr, base, ret_type=datetime, implement_cron_bug=True)
        while True:
            try:
                found = self._out_of_gap(times.get_next())
            except CroniterBadDateError:
                return None  # e.g. "0 8 30 2 *": never
            if not (self.fixed_hour and _second_occurrence(found, self.tz)):
                return found

    def _out_of_gap(self, found: datetime) -> datetime:
        """croniter moves a time inside a DST gap to the gap's end; cron shifts it by the
        gap's length instead (02:30 -> 03:30), so each time in the gap keeps its place."""
        wall = found.replace(tzinfo=None)
        before = wall - timedelta(minutes=1)
        if _exists(before, self.tz):
            return found
        offset, earlier = found.utcoffset(), before.replace(tzinfo=self.tz, fold=0).utcoffset()
        assert offset is not None and earlier is not None
        gap_start = wall - (offset - earlier)
        intended = croniter(
            self.expr, gap_start - _TICK, ret_type=datetime, implement_cron_bug=True
        ).get_next()
        if intended >= wall:
            return found  # a regular match right after the gap
        # A wall time in the gap, read with the offset before the change (fold=0).
        return intended.replace(tzinfo=self.tz, fold=0).astimezone(UTC).astimezone(self.tz)

    def __str__(self) -> str:
        return f"cron[{self.expr}, {self.tz}]"


@functools.cache
def _trigger_class() -> type[BaseTrigger]:
    # Built on first use, so reading the job files never imports apscheduler.
    from apscheduler.triggers.base import BaseTrigger

    class CrontabTrigger(BaseTrigger):
        """APScheduler's view of a `Crontab`."""

        def __init__(self, crontab: Crontab) -> None:
            self.crontab = crontab
            self.jitter = None

        def get_next_fire_time(
            self, previous_fire_time: datetime | None, now: datetime
        ) -> datetime | None:
            # As APScheduler's CronTrigger: strictly after the previous fire time, else from now.
            if previous_fire_time is None:
                return self.crontab.first_from(now)
            previous = previous_fire_time.astimezone(UTC)
            start = min(now.astimezone(UTC), previous + _TICK)
            if start == previous:
                start += _TICK
            return self.crontab.first_from(start)

        def __str__(self) -> str:
            return str(self.crontab)

    return CrontabTrigger


def build_trigger(job: CronJob, default_tz: str) -> BaseTrigger:
    """The APScheduler trigger for a job's schedule, in the job's time zone."""
    from apscheduler.triggers.date import DateTrigger
    from apscheduler.triggers.interval import IntervalTrigger

    tz = job.tz(default_tz)
    schedule = job.schedule
    if schedule.at is not None:
        return DateTrigger(run_date=job.at_time(default_tz), timezone=tz)
    if schedule.every is not None:
        # Anchored at creation: the phase survives restarts and no backlog is replayed.
        start = job.created_at + timedelta(seconds=schedule.every)
        return IntervalTrigger(seconds=schedule.every, start_date=start, timezone=tz)
    assert schedule.cron is not None
    return _trigger_class()(Crontab(schedule.cron, tz))


def next_fire_time(job: CronJob, default_tz: str, now: datetime) -> datetime | None:
    """When the job fires next at or after `now` (None: never again). A one-shot in the
    past has no next fire time here; missed-run policy is the scheduler's."""
    if job.is_one_shot:
        at = job.at_time(default_tz)
        return at if at is not None and at >= now else None
    return build_trigger(job, default_tz).get_next_fire_time(None, now)


def fire_times(job: CronJob, default_tz: str, now: datetime, count: int) -> list[datetime]:
    """The next `count` fire times from `now`, for tests and `cron list`."""
    trigger = build_trigger(job, default_tz)
    found: list[datetime] = []
    previous: datetime | None = None
    while len(found) < count:
        nxt = trigger.get_next_fire_time(previous, previous or now)
        if nxt is None:
            break
        found.append(nxt)
        previous = nxt
    return found
