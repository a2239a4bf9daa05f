"""The job files as types: `cron/jobs.json` (definitions, editable by hand, by `clawgate cron`
and by the `cron` tool) and `cron/state.json` (run state, written only by the gateway).

    {"version": 1, "jobs": [{"id": "3f9a0c1e", "name": "bank", "schedule": {"at": "..."},
      "timezone": "Europe/Berlin", "message": "...", "deliver_to": "telegram:123",
      "enabled": true, "created_at": "..."}]}
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from clawgate.gateway.cron.triggers import check_crontab
from clawgate.kernel.errors import CronError, describe_validation

FORMAT_VERSION: Final = 1
JOB_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
# "telegram:123", "telegram:-100987:42" (a topic): the channel has no ':', the chat id may.
SESSION_KEY = re.compile(r"[A-Za-z0-9_-]+:\S+")

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CronError(
            f"unknown time zone {name!r} (use an IANA name like Europe/Berlin)"
        ) from None


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
            check_crontab(self.cron)  # raises a clear ValueError
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
    # A shell command run under the exec tool's rules before each run: the job's turn (and
    # its model call) happens only when it exits 0, e.g. "tell me if this page changed".
    condition: str | None = Field(None, min_length=1)

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
    last_status: Literal["ok", "error", "missed", "disabled", "skipped"] | None = None
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


@dataclass(frozen=True)
class RunResult:
    """The outcome of one run, as the scheduler records it and `clawgate cron run` shows it."""

    ok: bool
    text: str = ""
    error: str | None = None


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
    condition: str | None = None,
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
            check_crontab(cron)
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
            condition=(condition or "").strip() or None,
        )
    except ValidationError as exc:
        raise CronError(describe_validation(exc)) from None
