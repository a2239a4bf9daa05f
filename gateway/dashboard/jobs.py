"""The jobs page: cron jobs with their schedule, next run, last run and error; add, enable,
disable, run now, delete (the add form kept as typed after an error, its target picked from
the known chats, the owner's by default); the heartbeat's state and settings.

Definitions are edited through the functions `clawgate cron` uses (`gateway/cron/store.py`:
a read-modify-write of jobs.json under its lock), then the running `CronScheduler` is told
to re-read the file, so the page shows the new schedule at once. "Run now" is the
scheduler's own manual run - the one `clawgate cron run` asks the gateway for: a real turn
whose reply goes to the job's target chat, with its result recorded in state.json.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from aiohttp import web
from yarl import URL

from clawgate.gateway.cron.heartbeat import heartbeat_tasks
from clawgate.gateway.cron.models import CronJob, JobState, StateFile
from clawgate.gateway.cron.scheduler import HEARTBEAT_JOB, CronScheduler
from clawgate.gateway.cron.store import CronStore, create_job, remove_job, set_enabled
from clawgate.gateway.cron.targets import default_target
from clawgate.gateway.dashboard import settings
from clawgate.gateway.dashboard.auth import CSRF_FIELD
from clawgate.gateway.dashboard.render import render, services
from clawgate.gateway.dashboard.services import DashboardServices
from clawgate.gateway.dashboard.session_names import Directory
from clawgate.kernel.config import Config, HeartbeatConfig
from clawgate.kernel.errors import ClawgateError, CronError

SCHEDULE_KINDS = ("at", "every", "cron")
# The reply shown after "run now" travels in the redirect's query string; the full text went
# to the target chat.
NOTICE_CHARS = 300


@dataclass(frozen=True)
class JobRow:
    job: CronJob
    state: JobState
    next_run: datetime | None
    timezone: str


@dataclass(frozen=True)
class HeartbeatView:
    enabled: bool
    deliver_to: str | None
    interval_minutes: int
    active_hours: str
    has_tasks: bool
    next_run: datetime | None
    last_at: datetime | None
    last_outcome: str | None


def _scheduler(request: web.Request) -> CronScheduler | None:
    return services(request).scheduler


def _store(request: web.Request) -> CronStore:
    scheduler = _scheduler(request)
    if scheduler is not None:
        return scheduler.store
    svc = services(request)
    return CronStore(svc.config.workspace / "cron", writer=svc.runtime.writer)


@dataclass(frozen=True)
class _Files:
    jobs: list[CronJob] | None  # None: jobs.json does not load (`problem` says why)
    problem: str
    state: StateFile | None
    heartbeat: str


def _read_files(store: CronStore, scheduler: CronScheduler | None, workspace: Path) -> _Files:
    """Blocking reads, for a thread: jobs.json, state.json (without a scheduler), HEARTBEAT.md."""
    try:
        jobs, problem = store.load().jobs, ""
    except ClawgateError as exc:
        jobs, problem = None, str(exc)
    state = store.load_state() if scheduler is None else None
    try:
        heartbeat = (workspace / "HEARTBEAT.md").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        heartbeat = ""
    return _Files(jobs, problem, state, heartbeat)


def _rows(files: _Files, scheduler: CronScheduler | None, default_tz: str) -> list[JobRow]:
    """The jobs as jobs.json has them (else the set the scheduler kept), with the run state
    the scheduler keeps. On the event loop: the scheduler's state is the loop's."""
    jobs = (
        files.jobs if files.jobs is not None else list(scheduler.jobs.values()) if scheduler else []
    )
    state = scheduler.state if scheduler is not None else files.state or StateFile()
    rows = []
    for job in jobs:
        run = state.jobs.get(job.id) or JobState()
        upcoming = scheduler.next_run(job.id) if scheduler is not None else run.next_run
        rows.append(JobRow(job, run, upcoming if job.enabled else None, job.timezone or default_tz))
    return rows


def _heartbeat(
    config: HeartbeatConfig, scheduler: CronScheduler | None, text: str
) -> HeartbeatView:
    last = scheduler.heartbeat.last if scheduler is not None else None
    return HeartbeatView(
        enabled=config.enabled,
        deliver_to=config.deliver_to,
        interval_minutes=config.interval_minutes,
        active_hours=config.active_hours,
        has_tasks=heartbeat_tasks(text) is not None,
        next_run=scheduler.next_run(HEARTBEAT_JOB) if scheduler is not None else None,
        last_at=last[0] if last else None,
        last_outcome=last[1] if last else None,
    )


async def jobs_page(request: web.Request) -> web.Response:
    return await _page(request, notice=request.query.get("notice", ""))


async def _page(
    request: web.Request,
    *,
    notice: str = "",
    error: str = "",
    form: dict[str, str] | None = None,
    status: int = 200,
) -> web.Response:
    """The page; `form`: the add-job form's values, kept after an error."""
    svc = services(request)
    scheduler = svc.scheduler
    files = await asyncio.to_thread(_read_files, _store(request), scheduler, svc.config.workspace)
    chats = await asyncio.to_thread(known_chats, svc)
    return render(
        request,
        "jobs.html",
        title="Jobs",
        status=status,
        jobs=_rows(files, scheduler, svc.config.agent.timezone),
        problem=files.problem,
        heartbeat=_heartbeat(svc.config.heartbeat, scheduler, files.heartbeat),
        scheduler_running=scheduler is not None,
        default_target=await asyncio.to_thread(_default_target, svc.config),
        default_tz=svc.config.agent.timezone,
        chats=chats,
        form=form or {},
        notice=notice,
        error=error or request.query.get("error", ""),
    )


def known_chats(svc: DashboardServices) -> list[tuple[str, str]]:
    """(session key, who it is with) of every chat a job can report to: the sessions of the
    chat channels, by name."""
    names = Directory.read(svc.config)
    found = []
    for key, _ in svc.sessions.list_keys():
        if key.partition(":")[0] not in ("cli", "web"):
            found.append((key, names.name(key, None)))
    return sorted(found, key=lambda chat: chat[1].lower())


def _default_target(config: Config) -> str:
    """The placeholder of the form's target: where a job without one goes, if anywhere."""
    try:
        return default_target(config)
    except CronError:
        return "CHANNEL:CHAT_ID (required: no single owner chat is known)"


def _done(message: str = "", *, error: str = "") -> web.HTTPSeeOther:
    query = {"error": error} if error else {"notice": message}
    return web.HTTPSeeOther(location=str(URL("/jobs").with_query(query)))


async def _reload(request: web.Request) -> None:
    """Have the running scheduler pick the change up now instead of on its next poll."""
    scheduler = _scheduler(request)
    if scheduler is not None:
        await scheduler.check_files()


async def add_job(request: web.Request) -> web.Response:
    svc = services(request)
    form = {k: str(v).strip() for k, v in (await request.post()).items() if k != CSRF_FIELD}
    kind = form.get("kind", "")
    value = form.get("schedule", "")

    async def refused(error: str) -> web.Response:
        # The form comes back with what was typed, to correct rather than retype.
        return await _page(request, error=error, form=form, status=400)

    if kind not in SCHEDULE_KINDS:
        return await refused(f"choose a schedule: {', '.join(SCHEDULE_KINDS)}")
    options: dict[str, Any] = {kind: value or None}
    if kind == "every":
        if not value.isdigit():
            return await refused("every takes a whole number of seconds")
        options["every"] = int(value)
    try:
        job = await asyncio.to_thread(
            create_job,
            _store(request),
            svc.config,
            name=form.get("name") or None,
            message=form.get("message", ""),
            tz=form.get("tz") or None,
            to=form.get("to") or None,
            **options,
        )
    except ClawgateError as exc:
        return await refused(str(exc))
    await _reload(request)
    raise _done(f"added {job.id} ({job.name})")


HEARTBEAT_FIELDS = tuple(f for f in settings.EDITABLE if f.section == "heartbeat")


async def set_heartbeat(request: web.Request) -> web.Response:
    """The heartbeat's settings, written as the settings page writes them (onboard's
    round-trip editor); applied when the gateway restarts."""
    svc = services(request)
    posted = await request.post()
    try:
        values = {
            f: settings.parse(f, None if posted.get(f.name) is None else str(posted.get(f.name)))
            for f in HEARTBEAT_FIELDS
        }
    except ValueError as exc:
        raise _done(error=str(exc)) from None
    changes = {f: v for f, v in values.items() if v != settings.current(svc.config, f)}
    if not changes:
        raise _done("the heartbeat settings are unchanged")
    try:
        await settings.write_changes(svc, changes)
    except ClawgateError as exc:
        raise _done(error=f"heartbeat not saved: {exc}") from None
    raise _done("heartbeat saved to the config file; it applies when the gateway restarts")


async def enable_job(request: web.Request) -> web.Response:
    return await _switch(request, True)


async def disable_job(request: web.Request) -> web.Response:
    return await _switch(request, False)


async def _switch(request: web.Request, enabled: bool) -> web.Response:
    job_id = request.match_info["job_id"]
    try:
        job = await asyncio.to_thread(set_enabled, _store(request), job_id, enabled)
    except ClawgateError as exc:
        raise _done(error=str(exc)) from None
    await _reload(request)
    raise _done(f"{job.id} ({job.name}) {'enabled' if enabled else 'disabled'}")


async def delete_job(request: web.Request) -> web.Response:
    job_id = request.match_info["job_id"]
    try:
        job = await asyncio.to_thread(remove_job, _store(request), job_id)
    except ClawgateError as exc:
        raise _done(error=str(exc)) from None
    await _reload(request)
    raise _done(f"removed {job.id} ({job.name})")


async def run_job(request: web.Request) -> web.Response:
    """Run a job once, now, in the running scheduler; the page waits for its result."""
    scheduler = _scheduler(request)
    job_id = request.match_info["job_id"]
    if scheduler is None:
        raise _done(error="the scheduler is not running in this gateway")
    if job_id not in scheduler.jobs:
        await scheduler.check_files()  # added a moment ago: not polled in yet
    result = await scheduler.run_job(job_id, manual=True)
    if not result.ok:
        raise _done(error=f"job {job_id} failed: {result.error}")
    reply = result.text if len(result.text) <= NOTICE_CHARS else result.text[:NOTICE_CHARS] + "…"
    raise _done(f"ran {job_id}: {reply}")


def routes(_services: object) -> list[web.RouteDef]:
    return [
        web.get("/jobs", jobs_page),
        web.post("/jobs/add", add_job),
        web.post("/jobs/heartbeat", set_heartbeat),
        web.post("/jobs/{job_id}/enable", enable_job),
        web.post("/jobs/{job_id}/disable", disable_job),
        web.post("/jobs/{job_id}/run", run_job),
        web.post("/jobs/{job_id}/delete", delete_job),
    ]
