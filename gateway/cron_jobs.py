"""Scheduled jobs on disk: `<workspace>/cron/jobs.json` (the definitions, editable by hand,
by `clawgate cron` and by the `cron` tool) and `cron/state.json` (run state, written only by
the gateway that runs them). Both are replaced atomically; edits of jobs.json take a file
lock so the CLI, the tool and the gateway never lose each other's changes.

    {"version": 1, "jobs": [{"id": "3f9a0c1e", "name": "bank", "schedule": {"at": "..."},
      "timezone": "Europe/Berlin", "message": "...", "deliver_to": "telegram:123",
      "enabled": true, "created_at": "..."}]}

APScheduler is imported only where a trigger is built, so reading the files stays light.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import logging
import os
import re
import secrets
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from clawgate.kernel.errors import CronError
from clawgate.kernel.storage import DiskWriter

if TYPE_CHECKING:
    from apscheduler.triggers.base import BaseTrigger

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
JOB_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
# "telegram:123", "telegram:-100987:42" (a topic): the channel has no ':', the chat id may.
SESSION_KEY = re.compile(r"[A-Za-z0-9_-]+:\S+")
T = TypeVar("T")


def utc_now() -> datetime:
    return datetime.now(UTC)


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CronError(
            f"unknown time zone {name!r} (use an IANA name like Europe/Berlin)"
        ) from None


# -- the model -------------------------------------------------------------------------------


class Schedule(BaseModel):
    """Exactly one of: `at` (one shot; naive = the job's time zone), `every` (seconds),
    `cron` (five fields: minute hour day-of-month month day-of-week, as in crontab)."""

    model_config = ConfigDict(extra="forbid")

    at: datetime | None = None
    every: int | None = Field(None, ge=1)
    cron: str | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Schedule:
        given = [name for name in ("at", "every", "cron") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of at, every, cron")
        if self.cron is not None:
            crontab_trigger(self.cron, UTC)  # raises a clear ValueError
        return self

    @property
    def kind(self) -> Literal["at", "every", "cron"]:
        return "at" if self.at is not None else "every" if self.every is not None else "cron"

    def describe(self) -> str:
        if self.at is not None:
            return f"at {self.at.isoformat(sep=' ')}"
        if self.every is not None:
            return f"every {self.every} s"
        return f"cron {self.cron!r}"


class CronJob(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    name: str = Field(min_length=1)
    schedule: Schedule
    timezone: str | None = None  # None: the agent's time zone
    message: str = Field(min_length=1)
    deliver_to: str
    enabled: bool = True
    created_at: datetime = Field(default_factory=utc_now)

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not JOB_ID.fullmatch(value):
            raise ValueError("use 1-64 letters, digits, '-' or '_'")
        return value

    @field_validator("deliver_to")
    @classmethod
    def _deliver_to(cls, value: str) -> str:
        if not SESSION_KEY.fullmatch(value):
            raise ValueError(f"{value!r} is not a session key like telegram:123")
        return value

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                zone(value)
            except CronError as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("created_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return value if value.tzinfo else value.replace(tzinfo=UTC)

    @property
    def session_key(self) -> str:
        return f"cron:{self.id}"

    @property
    def is_one_shot(self) -> bool:
        return self.schedule.at is not None

    def tz(self, default: str) -> ZoneInfo:
        return zone(self.timezone or default)

    def at_time(self, default_tz: str) -> datetime | None:
        """The one-shot's moment, aware (a naive `at` is in the job's time zone)."""
        at = self.schedule.at
        if at is None:
            return None
        return at if at.tzinfo else at.replace(tzinfo=self.tz(default_tz))

    def target(self) -> tuple[str, str]:
        """deliver_to as (channel, chat_id); only the first ':' separates them."""
        channel, chat_id = self.deliver_to.split(":", 1)
        return channel, chat_id


class JobsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = FORMAT_VERSION
    jobs: list[CronJob] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique(self) -> JobsFile:
        seen: set[str] = set()
        for job in self.jobs:
            if job.id in seen:
                raise ValueError(f"two jobs have the id {job.id!r}")
            seen.add(job.id)
        return self

    def get(self, job_id: str) -> CronJob:
        for job in self.jobs:
            if job.id == job_id:
                return job
        raise CronError(f"no job with id {job_id!r} (see `clawgate cron list`)")

    def new_id(self) -> str:
        taken = {job.id for job in self.jobs}
        while True:
            candidate = secrets.token_hex(4)
            if candidate not in taken:
                return candidate


class JobState(BaseModel):
    """What the gateway knows about a job's runs. Never written by the CLI or the tool."""

    last_run: datetime | None = None
    last_status: Literal["ok", "error", "missed", "disabled"] | None = None
    last_error: str | None = None
    consecutive_errors: int = 0
    runs: int = 0
    next_run: datetime | None = None
    retry_at: datetime | None = None


class StateFile(BaseModel):
    version: Literal[1] = FORMAT_VERSION
    jobs: dict[str, JobState] = Field(default_factory=dict)

    def of(self, job_id: str) -> JobState:
        return self.jobs.setdefault(job_id, JobState())


def describe_validation(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "file"
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message = "unknown key"
    more = f" ({len(error.errors()) - 1} more problems)" if len(error.errors()) > 1 else ""
    return f"{where}: {message}{more}"


# -- triggers and fire times -----------------------------------------------------------------

_WEEKDAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")  # crontab: 0 (and 7) = Sunday


def _weekday(token: str) -> int:
    lowered = token.lower()
    if lowered in _WEEKDAY_NAMES:
        return _WEEKDAY_NAMES.index(lowered)
    if token.isdigit() and 0 <= int(token) <= 7:
        return int(token) % 7
    raise ValueError(f"invalid day of week {token!r} (use 0-7 or sun-sat)")


def crontab_weekdays(field: str) -> set[int] | None:
    """The crontab day-of-week field as weekdays (0 = Sunday); None for '*'.

    APScheduler 3 numbers weekdays from Monday = 0, unlike crontab, so the field is never
    handed to it raw: `1-5` must mean Monday to Friday.
    """
    if field == "*":
        return None
    days: set[int] = set()
    for part in field.split(","):
        body, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) < 1:
                raise ValueError(f"invalid step {step_text!r} in day of week {field!r}")
            step = int(step_text)
        if body == "*":
            first, last = 0, 6
        elif "-" in body:
            low, high = body.split("-", 1)
            first, last = _weekday(low), _weekday(high)
            if high == "7":
                last = 7
            if last < first:
                raise ValueError(f"day-of-week range {body!r} runs backwards")
        else:
            first = last = _weekday(body)
            if step_text:
                last = 6
        days.update(day % 7 for day in range(first, last + 1, step))
    return days


def crontab_trigger(expr: str, tz: tzinfo) -> BaseTrigger:
    """A trigger with crontab's meaning: weekdays from Sunday = 0, and when both day of
    month and day of week are restricted, either one matching fires (as in cron)."""
    from apscheduler.triggers.cron import CronTrigger

    fields = expr.split()
    if len(fields) != 5:
        raise ValueError(
            f"cron expression {expr!r} has {len(fields)} fields; it needs 5: "
            "minute hour day-of-month month day-of-week"
        )
    minute, hour, day, month, dow = fields
    try:
        weekdays = crontab_weekdays(dow)
        names = None if weekdays is None else ",".join(_ap_weekday(d) for d in sorted(weekdays))
        common = {"minute": minute, "hour": hour, "month": month, "timezone": tz}
        if names is not None and not day.startswith("*") and not dow.startswith("*"):
            triggers = [
                CronTrigger(day=day, **common),
                CronTrigger(day_of_week=names, **common),
            ]
        else:
            triggers = [CronTrigger(day=day, day_of_week=names or "*", **common)]
    except ValueError as exc:
        raise ValueError(f"invalid cron expression {expr!r}: {exc}") from None
    return _crontab_class()(triggers, tz, skip_repeated_hour=not hour.startswith("*"))


def _ap_weekday(crontab_day: int) -> str:
    return _WEEKDAY_NAMES[crontab_day]


def _second_occurrence(moment: datetime, tz: tzinfo) -> bool:
    """True for the repeat of a wall-clock time when the clocks go back (DST ends)."""
    local = moment.astimezone(tz)
    first = local.replace(tzinfo=None).replace(tzinfo=tz, fold=0)
    return first.utcoffset() != local.utcoffset()


@functools.cache
def _crontab_class() -> type[BaseTrigger]:
    # Built on first use, so reading the job files never imports apscheduler.
    from apscheduler.triggers.base import BaseTrigger

    class Crontab(BaseTrigger):
        """The earliest of its CronTriggers; a job at a fixed hour runs once, not twice,
        on the night the clocks go back (crontab does the same)."""

        def __init__(self, triggers: list[Any], tz: tzinfo, *, skip_repeated_hour: bool) -> None:
            self.triggers = triggers
            self.tz = tz
            self.skip_repeated_hour = skip_repeated_hour
            self.jitter = None

        def get_next_fire_time(
            self, previous_fire_time: datetime | None, now: datetime
        ) -> datetime | None:
            while True:
                times = [t.get_next_fire_time(previous_fire_time, now) for t in self.triggers]
                found = min((t for t in times if t is not None), default=None)
                if found is None or not (
                    self.skip_repeated_hour and _second_occurrence(found, self.tz)
                ):
                    return found
                previous_fire_time, now = found, found

        def __str__(self) -> str:
            return " or ".join(str(t) for t in self.triggers)

    return Crontab


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
    return crontab_trigger(schedule.cron, tz)


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


# -- building and changing jobs ---------------------------------------------------------------


def parse_at(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise CronError(
            f"at {text!r} is not an ISO date-time (e.g. 2026-05-04T09:00 or 2026-05-04 09:00+02:00)"
        ) from None


def new_job(
    jobs: JobsFile,
    *,
    name: str | None,
    message: str,
    deliver_to: str,
    timezone: str,
    at: str | datetime | None = None,
    every: int | None = None,
    cron: str | None = None,
    now: datetime | None = None,
) -> CronJob:
    """A validated job with a fresh id: exactly one schedule, a future `at`, a cron
    expression that parses. Raises CronError with one line."""
    now = now or utc_now()
    given = [n for n, v in (("at", at), ("every", every), ("cron", cron)) if v not in (None, "")]
    if len(given) != 1:
        raise CronError("give exactly one schedule: at (ISO date-time), every (seconds) or cron")
    if not message.strip():
        raise CronError("the job needs a message: what the assistant should do when it runs")
    tz = zone(timezone)
    if isinstance(at, str):
        at = parse_at(at)
    if at is not None:
        moment = at if at.tzinfo else at.replace(tzinfo=tz)
        if moment <= now:
            shown = now.astimezone(tz).isoformat(sep=" ", timespec="minutes")
            raise CronError(
                f"at {moment.isoformat(sep=' ', timespec='minutes')} is in the past "
                f"(now it is {shown} in {timezone})"
            )
    if every is not None and (isinstance(every, bool) or every < 1):
        raise CronError("every must be a whole number of seconds, at least 1")
    if cron is not None:
        try:
            crontab_trigger(cron, tz)
        except ValueError as exc:
            raise CronError(str(exc)) from None
    try:
        return CronJob(
            id=jobs.new_id(),
            name=(name or message).strip()[:60] or "job",
            schedule=Schedule(at=at, every=every, cron=cron),
            timezone=timezone,
            message=message.strip(),
            deliver_to=deliver_to,
            created_at=now,
        )
    except ValidationError as exc:
        raise CronError(describe_validation(exc)) from None


# -- files -------------------------------------------------------------------------------------


class CronStore:
    """jobs.json and state.json in one folder (normally `<workspace>/cron/`)."""

    def __init__(self, directory: Path, *, writer: DiskWriter | None = None) -> None:
        self.directory = directory
        self.jobs_path = directory / "jobs.json"
        self.state_path = directory / "state.json"
        self.requests_dir = directory / "requests"
        self._lock_path = directory / ".jobs.lock"
        self.writer = writer or DiskWriter()

    def fingerprint(self) -> tuple[int, int, int] | None:
        """(inode, mtime_ns, size) of jobs.json, None if absent: a cheap change check. The
        inode catches two atomic replaces within one timestamp tick."""
        try:
            info = self.jobs_path.stat()
        except FileNotFoundError:
            return None
        return info.st_ino, info.st_mtime_ns, info.st_size

    def load(self) -> JobsFile:
        """The jobs; an absent file is an empty set. Raises CronError naming the problem."""
        try:
            raw = self.jobs_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return JobsFile()
        except (OSError, UnicodeDecodeError) as exc:
            raise CronError(f"{self.jobs_path}: cannot read: {exc}") from None
        if not raw.strip():
            # Most likely an editor caught mid-save; "no jobs" is {"version": 1, "jobs": []}.
            raise CronError(f"{self.jobs_path}: the file is empty")
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise CronError(f"{self.jobs_path}: not valid JSON: {exc}") from None
        try:
            return JobsFile.model_validate(data)
        except ValidationError as exc:
            raise CronError(f"{self.jobs_path}: {describe_validation(exc)}") from None

    def save(self, jobs: JobsFile) -> None:
        self.writer.mkdir(self.directory)
        text = json.dumps(jobs.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
        self.writer.replace(self.jobs_path, text, mode=0o600)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Exclusive between writers of jobs.json (CLI, tool, gateway). Blocking: call it
        from a thread in async code."""
        self.writer.mkdir(self.directory)
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def update(self, change: Callable[[JobsFile], T]) -> T:
        """Read the current file under the lock, apply `change`, write it back atomically.
        If `change` raises, nothing is written."""
        with self.locked():
            jobs = self.load()
            result = change(jobs)
            self.save(jobs)
            return result

    def load_state(self) -> StateFile:
        try:
            return StateFile.model_validate_json(self.state_path.read_bytes())
        except FileNotFoundError:
            return StateFile()
        except (OSError, ValueError) as exc:
            log.warning("%s unreadable (%s); starting with empty run state", self.state_path, exc)
            return StateFile()

    def save_state(self, state: StateFile) -> None:
        self.writer.mkdir(self.directory)
        text = json.dumps(state.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
        self.writer.replace(self.state_path, text, mode=0o600)


def add_job(store: CronStore, build: Callable[[JobsFile], CronJob]) -> CronJob:
    def change(jobs: JobsFile) -> CronJob:
        job = build(jobs)
        jobs.jobs.append(job)
        return job

    return store.update(change)


def remove_job(
    store: CronStore, job_id: str, *, allowed: Callable[[CronJob], bool] | None = None
) -> CronJob:
    def change(jobs: JobsFile) -> CronJob:
        job = jobs.get(job_id)
        if allowed is not None and not allowed(job):
            raise CronError(f"no job with id {job_id!r}")
        jobs.jobs.remove(job)
        return job

    return store.update(change)


def set_enabled(
    store: CronStore,
    job_id: str,
    enabled: bool,
    *,
    allowed: Callable[[CronJob], bool] | None = None,
) -> CronJob:
    def change(jobs: JobsFile) -> CronJob:
        job = jobs.get(job_id)
        if allowed is not None and not allowed(job):
            raise CronError(f"no job with id {job_id!r}")
        index = jobs.jobs.index(job)
        jobs.jobs[index] = job.model_copy(update={"enabled": enabled})
        return jobs.jobs[index]

    return store.update(change)
