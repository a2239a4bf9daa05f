"""The `cron` tool: the model schedules, lists and switches jobs in `<workspace>/cron/jobs.json`.

The gateway that runs the scheduler hands it to the agent at construction (`cron_tools`);
the running gateway picks changes up within seconds (see scheduler.py). Only owner
sessions get the tool unless `cron.allow_from_groups` is set, and then a shared chat sees
and changes only the jobs that report to itself, and its jobs repeat at most every
`cron.shared_min_interval_minutes` (their runs also spend the chat's rate limit, see
scheduler.py). A scheduled run (`cron:*`,
`heartbeat:*`) may list jobs but never create or change one: no self-scheduling loops.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import ClassVar

from pydantic import Field

from clawgate.agent.tools.base import Tool, ToolContext, ToolParams
from clawgate.gateway.cron.models import CronJob, JobsFile, new_job, utc_now
from clawgate.gateway.cron.store import CronStore, add_job, remove_job, set_enabled
from clawgate.gateway.cron.triggers import fire_times, next_fire_time
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import Config, ToolsConfig
from clawgate.kernel.errors import CronError, ToolError

ACTIONS = ("add", "list", "remove", "enable", "disable")
SCHEDULED_PREFIXES = ("cron:", "heartbeat:")


class CronTool(Tool["CronTool.Params"]):
    name: ClassVar[str] = "cron"
    description: ClassVar[str] = (
        "Schedule a task for later or on repeat; when it is due you get `message` as an "
        "instruction and your reply is sent to the chat. action=add needs message and exactly "
        "one of: at (ISO date-time, e.g. 2026-05-04T09:00; without an offset it is in "
        "`timezone`), every (seconds), cron (5 fields, e.g. '0 8 * * 1-5' = weekdays 08:00). "
        "action=list shows the jobs; remove/enable/disable take id."
    )

    class Params(ToolParams):
        # `action: str` rather than a Literal: the tool's own "unknown action" line names the
        # choices, which helps a model more than pydantic's enum error.
        action: str = Field(description="One of: " + ", ".join(ACTIONS))
        id: str | None = Field(None, description="The job id (remove, enable, disable)")
        name: str | None = Field(None, description="A short name for the job")
        message: str | None = Field(
            None, description="What to do when it runs, written as an instruction to yourself"
        )
        at: str | None = Field(None, description="One shot: ISO 8601 date-time")
        every: int | None = Field(None, description="Repeat every N seconds (>= 1)")
        cron: str | None = Field(None, description="Five-field cron expression")
        timezone: str | None = Field(
            None, description="IANA zone for at/cron; default the assistant's time zone"
        )
        deliver_to: str | None = Field(
            None, description="Session key of the chat that gets the result; default this chat"
        )
        condition: str | None = Field(
            None,
            description="Shell command run before each run (exec rules); the job runs only "
            "if it exits 0. Makes 'tell me if X changed' jobs free when nothing changed",
        )

    def __init__(
        self,
        *,
        timezone: str,
        allow_from_groups: bool,
        shared_min_interval: timedelta = timedelta(minutes=10),
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.timezone = timezone
        self.allow_from_groups = allow_from_groups
        self.shared_min_interval = shared_min_interval
        self.clock = clock

    def available(self, ctx_trust: Trust, config: ToolsConfig) -> bool:
        return ctx_trust.is_owner or self.allow_from_groups

    async def run(self, params: Params, ctx: ToolContext) -> str:
        action = params.action
        if action not in ACTIONS:
            raise ToolError(f"unknown action {action!r}; use one of {', '.join(ACTIONS)}")
        if not self.available(ctx.trust, ctx.config):
            raise ToolError("jobs can only be scheduled from the owner's private chat")
        if action != "list" and ctx.session_key.startswith(SCHEDULED_PREFIXES):
            raise ToolError(
                "a scheduled run cannot create or change jobs (no self-scheduling); "
                "mention it in your reply and let the owner decide"
            )
        store = CronStore(ctx.workspace / "cron", writer=ctx.writer)

        def mine(job: CronJob) -> bool:
            return ctx.trust.is_owner or job.deliver_to == ctx.session_key

        try:
            if action == "list":
                return await asyncio.to_thread(self._list, store, mine)
            if action == "add":
                return await self._add(store, params, ctx)
            job_id = params.id
            if not job_id:
                raise ToolError(f"action {action} needs the job's id (see action=list)")
            if action == "remove":
                job = await asyncio.to_thread(remove_job, store, job_id, allowed=mine)
                return f"Removed job {job.id} ({job.name})."
            job = await asyncio.to_thread(
                set_enabled, store, job_id, action == "enable", allowed=mine
            )
            return f"Job {job.id} ({job.name}) is now {'enabled' if job.enabled else 'disabled'}."
        except CronError as exc:
            raise ToolError(str(exc)) from None

    async def _add(self, store: CronStore, params: Params, ctx: ToolContext) -> str:
        deliver_to = params.deliver_to or ctx.session_key
        if not ctx.trust.is_owner and deliver_to != ctx.session_key:
            raise ToolError("from this chat, jobs can only report back to this chat")
        message = params.message
        if message is None:
            raise ToolError("action add needs message: what to do when the job runs")
        timezone = params.timezone or self.timezone
        now = self.clock()

        def build(jobs: JobsFile) -> CronJob:
            job = new_job(
                jobs,
                name=params.name,
                message=message,
                deliver_to=deliver_to,
                timezone=timezone,
                at=params.at,
                every=params.every,
                cron=params.cron,
                condition=params.condition,
                now=now,
            )
            if not ctx.trust.is_owner:
                self._check_interval(job, now)
            return job

        job = await asyncio.to_thread(add_job, store, build)
        when = next_fire_time(job, self.timezone, now)
        shown = _local(when, job, self.timezone) if when else "not scheduled"
        return (
            f"Scheduled job {job.id} ({job.name}): {job.schedule.describe()} "
            f"[{job.timezone}], next run {shown}; the result goes to {job.deliver_to}."
        )

    def _check_interval(self, job: CronJob, now: datetime) -> None:
        """Refuse a job from a shared chat that would repeat more often than allowed."""
        if job.is_one_shot or not self.shared_min_interval:
            return
        first, second, *_ = [*fire_times(job, self.timezone, now, 2), None, None]
        if first is None or second is None or second - first >= self.shared_min_interval:
            return
        minutes = self.shared_min_interval.total_seconds() / 60
        raise CronError(
            f"from this chat a job may repeat at most every {minutes:g} minutes "
            f"(every >= {int(self.shared_min_interval.total_seconds())} seconds); "
            "ask the owner for anything more frequent"
        )

    def _list(self, store: CronStore, mine: Callable[[CronJob], bool]) -> str:
        jobs = [job for job in store.load().jobs if mine(job)]
        if not jobs:
            return "No scheduled jobs."
        state = store.load_state()
        lines = []
        for job in jobs:
            run = state.jobs.get(job.id)
            last = f", last run {run.last_status}" if run and run.last_status else ""
            when = run.next_run if run and run.next_run else None
            nxt = f", next {_local(when, job, self.timezone)}" if when and job.enabled else ""
            status = "enabled" if job.enabled else "disabled"
            lines.append(
                f"{job.id} {job.name!r}: {job.schedule.describe()} [{job.timezone or self.timezone}] "
                f"-> {job.deliver_to}, {status}{nxt}{last}; message: {job.message}"
            )
        return "\n".join(lines)


def _local(moment: datetime, job: CronJob, default_tz: str) -> str:
    return moment.astimezone(job.tz(default_tz)).strftime("%Y-%m-%d %H:%M %Z")


def cron_tools(config: Config) -> list[Tool]:
    """The tools a gateway that runs the scheduler gives the agent: none if cron is off."""
    if not config.cron.enabled:
        return []
    return [
        CronTool(
            timezone=config.agent.timezone,
            allow_from_groups=config.cron.allow_from_groups,
            shared_min_interval=timedelta(minutes=config.cron.shared_min_interval_minutes),
        )
    ]
