"""Runs scheduled jobs and the heartbeat inside the gateway, on APScheduler's AsyncIOScheduler.

The job definitions in `<workspace>/cron/jobs.json` are the persisted state; APScheduler
only holds in-memory triggers rebuilt from them at start and whenever the file changes
(checked every `poll_interval` seconds by (inode, mtime_ns, size)). Run state goes to
`cron/state.json`, which only this module writes.

A run is an ordinary agent turn in the session `cron:<job id>` (see turns.py); its reply
is appended to the target session and published on the bus like any other reply, in that
session's dispatcher queue (never inside one of its turns).

A one-shot found late (the daemon was down, the machine slept, the clock jumped) runs once:
within `cron.missed_grace_minutes` as if on time, within `cron.missed_limit_hours` with a
note saying how late, later than that not at all, and the target chat is told it was missed.
The note goes by the wall clock; "later than the limit" by the time that really passed
(kernel/clock.py): how late the job was when this process scheduled it, plus the elapsed
time since. So a reminder whose time passed while the gateway was down past the limit is
missed as before, but one the gateway was waiting for when the clock was set a day ahead
runs (late, with the note) instead of being disabled for good.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawgate.gateway.cron.heartbeat import Heartbeat
from clawgate.gateway.cron.models import Clock, CronJob, RunResult, StateFile, utc_now, zone
from clawgate.gateway.cron.requests import answer_request, take_requests
from clawgate.gateway.cron.store import CronStore, set_enabled
from clawgate.gateway.cron.triggers import build_trigger
from clawgate.gateway.cron.turns import ScheduledTurns, SessionQueues
from clawgate.kernel.bus import MessageBus
from clawgate.kernel.clock import since_boot
from clawgate.kernel.errors import CronError
from clawgate.kernel.retry import Backoff

if TYPE_CHECKING:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    from clawgate.agent.runtime import AgentRuntime

log = logging.getLogger(__name__)

# APScheduler's defaults (1 s grace) would skip a run that starts a second late on a busy
# machine. A recurring run up to 2 minutes late still happens; later than that it is
# skipped and the next regular time counts (no backlog). coalesce: several missed times
# run once. max_instances 1: a run still going when the next is due makes that one skip.
RECURRING_GRACE_SECONDS = 120
MAX_CONSECUTIVE_ERRORS = 5
# After error 1, 2, 3, 4; the 5th disables the job.
RETRY_BACKOFF = Backoff(schedule=(30.0, 120.0, 600.0, 1800.0))
CRON_KEEP_RUNS = 3
HEARTBEAT_JOB = "heartbeat"
SHUTDOWN_GRACE_SECONDS = 10.0


def job_prompt(job: CronJob, note: str = "") -> str:
    # The bracketed header also keeps a message such as "/new" from being taken as a command.
    late = f"; it runs late {note.strip()}" if note else ""
    return (
        f"[scheduled job {job.name!r} (id {job.id}); this is not a live message - your reply "
        f"is sent to {job.deliver_to}{late}] {job.message}"
    )


def how_long(delta: timedelta) -> str:
    """A rough duration for a person: "5 min", "3 h", "2 days"."""
    minutes = int(delta.total_seconds() // 60)
    if minutes < 120:
        return f"{minutes} min"
    if minutes < 48 * 60:
        return f"{minutes // 60} h"
    return f"{minutes // (24 * 60)} days"


class CronScheduler:
    """Owns the AsyncIOScheduler, the jobs.json watcher, run state and every run task."""

    def __init__(
        self,
        runtime: AgentRuntime,
        bus: MessageBus,
        dispatcher: SessionQueues,
        *,
        clock: Clock = utc_now,
        elapsed: Callable[[], float] = since_boot,
        poll_interval: float = 2.0,
        retry_backoff: Backoff = RETRY_BACKOFF,
    ) -> None:
        config = runtime.config
        self.runtime = runtime
        self.timezone = config.agent.timezone
        self.grace = timedelta(minutes=config.cron.missed_grace_minutes)
        self.missed_limit_hours = config.cron.missed_limit_hours
        self.missed_limit = timedelta(hours=self.missed_limit_hours)
        self.cron_enabled = config.cron.enabled
        self.store = CronStore(config.workspace / "cron", writer=runtime.writer)
        self.turns = ScheduledTurns(runtime, bus, dispatcher)
        self.heartbeat = Heartbeat(
            config.heartbeat,
            timezone=config.agent.timezone,
            workspace=config.workspace,
            turns=self.turns,
            clock=clock,
        )
        self.clock = clock
        self.elapsed = elapsed
        # One-shot id -> (wall time, elapsed clock) when this process scheduled it.
        self._scheduled: dict[str, tuple[datetime, float]] = {}
        self.poll_interval = poll_interval
        self.retry_backoff = retry_backoff
        self.jobs: dict[str, CronJob] = {}
        self.state = StateFile()
        self.reloads = 0  # successful reads of jobs.json, for tests and logs
        self._fingerprint: tuple[int, int, int] | None = None
        self._bad_fingerprint: tuple[int, int, int] | None = None
        self._aps: AsyncIOScheduler | None = None
        self._poller: asyncio.Task[None] | None = None
        self._runs: set[asyncio.Task[Any]] = set()
        self._locks: dict[str, asyncio.Lock] = {}
        self._state_lock = asyncio.Lock()
        self._loaded = False

    # -- lifecycle -------------------------------------------------------------------------

    async def load(self) -> None:
        """Read jobs and state without scheduling anything (for a one-off run)."""
        self.state = await asyncio.to_thread(self.store.load_state)
        self.jobs = {job.id: job for job in (await asyncio.to_thread(self.store.load)).jobs}
        self._loaded = True

    async def start(self, tasks: asyncio.TaskGroup | None = None) -> None:
        """Schedule jobs and the heartbeat; the jobs.json watcher runs in `tasks` (the
        gateway's TaskGroup) when given."""
        from apscheduler.schedulers.asyncio import AsyncIOScheduler
        from apscheduler.triggers.interval import IntervalTrigger

        self.state = await asyncio.to_thread(self.store.load_state)
        self._loaded = True
        self._aps = AsyncIOScheduler(
            timezone=zone(self.timezone),
            job_defaults={
                "coalesce": True,
                "max_instances": 1,
                "misfire_grace_time": RECURRING_GRACE_SECONDS,
            },
        )
        self._aps.start()
        if self.cron_enabled:
            await self.check_files(at_start=True)
            spawn = tasks.create_task if tasks is not None else asyncio.create_task
            self._poller = spawn(self._poll(), name="cron watcher")
        heartbeat = self.runtime.config.heartbeat
        if heartbeat.enabled and heartbeat.deliver_to:
            self._aps.add_job(
                self.heartbeat.tick,
                IntervalTrigger(minutes=heartbeat.interval_minutes),
                id=HEARTBEAT_JOB,
                name="heartbeat",
            )
        elif heartbeat.enabled:
            log.info("heartbeat off: set [heartbeat] deliver_to to the owner's chat")

    async def stop(self, grace: float = SHUTDOWN_GRACE_SECONDS) -> None:
        """No new runs; running ones get `grace` seconds, then are cancelled (a cancelled
        one-shot is not marked done, so it fires again at the next start)."""
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
            self._poller = None
        if self._aps is not None:
            self._aps.shutdown(wait=False)
            self._aps = None
        if self._runs:
            _, pending = await asyncio.wait(set(self._runs), timeout=grace)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        await self._save_state()

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.poll_interval)
            try:
                await self.check_files()
            except Exception:
                log.exception("cron: checking jobs.json failed")

    # -- jobs.json -------------------------------------------------------------------------

    async def check_files(self, *, at_start: bool = False) -> None:
        """Reload jobs.json if it changed; pick up `clawgate cron run` requests."""
        fingerprint = self.store.fingerprint()
        if at_start or fingerprint != self._fingerprint:
            await self._reload(fingerprint, at_start=at_start)
        await self._take_requests()

    async def _reload(self, fingerprint: tuple[int, int, int] | None, *, at_start: bool) -> None:
        try:
            loaded = await asyncio.to_thread(self.store.load)
        except CronError as exc:
            if fingerprint != self._bad_fingerprint:
                log.error("cron: %s; keeping the %d jobs loaded before", exc, len(self.jobs))
                self._bad_fingerprint = fingerprint
            self._fingerprint = fingerprint
            return
        self._fingerprint, self._bad_fingerprint = fingerprint, None
        fresh = {job.id: job for job in loaded.jobs}
        for job_id in set(self.jobs) - set(fresh):
            self._unschedule(job_id)
            self.state.jobs.pop(job_id, None)
        previous, self.jobs = self.jobs, fresh
        for job in fresh.values():
            before = previous.get(job.id)
            if before is not None and not before.enabled and job.enabled:
                # Re-enabled by a person: the old error streak no longer counts.
                self.state.of(job.id).consecutive_errors = 0
            if at_start or before != job:
                await self._schedule(job)
        self.reloads += 1
        if not at_start:
            log.info("cron: jobs.json reloaded (%d jobs)", len(fresh))
        await self._save_state()

    async def _schedule(self, job: CronJob) -> None:
        from apscheduler.triggers.date import DateTrigger

        assert self._aps is not None
        self._unschedule(job.id)
        state = self.state.of(job.id)
        if not job.enabled:
            state.next_run = state.retry_at = None
            return
        if not job.is_one_shot:
            self._aps.add_job(
                self._fire,
                build_trigger(job, self.timezone),
                args=[job.id],
                id=job.id,
                name=job.name,
            )
            if state.retry_at is not None:
                self._schedule_retry(job.id, max(state.retry_at, self.clock()))
            return
        at = job.at_time(self.timezone)
        assert at is not None
        if state.last_status == "ok" and state.last_run is not None and state.last_run >= at:
            return  # ran; the daemon stopped before it could disable the job
        self._scheduled[job.id] = (self.clock(), self.elapsed())
        due = state.retry_at or at
        if due > self.clock():
            trigger = DateTrigger(run_date=due)
        else:
            trigger = DateTrigger()  # missed while down: once, now (run_job weighs how late)
            log.info("cron: %s (%s) was due at %s; running it now", job.id, job.name, due)
        # No misfire limit: a one-shot found late after a sleep or a clock jump still reaches
        # run_job, which runs it with a note or reports it missed, and updates its state.
        self._aps.add_job(
            self._fire, trigger, args=[job.id], id=job.id, name=job.name,
            misfire_grace_time=None,
        )  # fmt: skip

    def _lateness(self, job: CronJob, now: datetime) -> timedelta | None:
        """How late a scheduled one-shot runs beyond its grace, or None if not late (with a
        zero grace, the milliseconds any run takes to start do not count)."""
        at = job.at_time(self.timezone)
        if at is None or now - at <= max(self.grace, timedelta(minutes=1)):
            return None
        return now - at

    def _really_late(self, job: CronJob, late: timedelta) -> timedelta:
        """How late a one-shot is by the time that really passed: no later than it was when
        scheduled plus the elapsed time since, however far the wall clock moved meanwhile.
        The smaller of that and `late` (the wall clock's view), so a clock set back is not
        taken for time that passed either."""
        scheduled = self._scheduled.get(job.id)
        at = job.at_time(self.timezone)
        if scheduled is None or at is None:
            return late
        wall, elapsed = scheduled
        return min(late, wall - at + timedelta(seconds=self.elapsed() - elapsed))

    async def _missed(self, job: CronJob, late: timedelta) -> RunResult:
        at = job.at_time(self.timezone)
        assert at is not None
        log.warning("cron: %s (%s) was due at %s, beyond the limit; not run", job.id, job.name, at)
        state = self.state.of(job.id)
        state.last_status, state.retry_at = "missed", None
        await self._disable(job)
        await self._notify(
            job, f"Missed: the scheduled job {job.name!r} was due at {self._shown(job, at)}, "
            f"{how_long(late)} ago - later than the {self.missed_limit_hours} h limit for late "
            "runs, so it did not run.",
        )  # fmt: skip
        await self._save_state()
        return RunResult(ok=False, error="missed")

    def _shown(self, job: CronJob, at: datetime) -> str:
        local = at.astimezone(job.tz(self.timezone))
        today = self.clock().astimezone(local.tzinfo).date() == local.date()
        return local.strftime("%H:%M" if today else "%Y-%m-%d %H:%M %Z")

    def _unschedule(self, job_id: str) -> None:
        self._scheduled.pop(job_id, None)
        if self._aps is None:
            return
        for aps_id in (job_id, f"retry:{job_id}"):
            with contextlib.suppress(Exception):  # JobLookupError: not scheduled
                self._aps.remove_job(aps_id)

    def _schedule_retry(self, job_id: str, when: datetime) -> None:
        from apscheduler.triggers.date import DateTrigger

        if self._aps is None:
            return
        job = self.jobs.get(job_id)
        # A one-shot's retry must not be skipped as misfired either: it is the only run left.
        one_shot = job is not None and job.is_one_shot
        grace = None if one_shot else max(int(self.grace.total_seconds()), 1)
        self._aps.add_job(
            self._fire, DateTrigger(run_date=when), args=[job_id], id=f"retry:{job_id}",
            replace_existing=True, misfire_grace_time=grace,
        )  # fmt: skip

    def next_run(self, job_id: str) -> datetime | None:
        if self._aps is None:
            return None
        times = [
            aps_job.next_run_time
            for aps_id in (job_id, f"retry:{job_id}")
            if (aps_job := self._aps.get_job(aps_id)) is not None and aps_job.next_run_time
        ]
        return min(times, default=None)

    async def _save_state(self) -> None:
        if not self._loaded:
            return  # never read: writing now would wipe the file
        async with self._state_lock:
            if self._aps is not None:
                for job_id in self.jobs:
                    self.state.of(job_id).next_run = self.next_run(job_id)
            snapshot = self.state.model_copy(deep=True)
            try:
                await asyncio.to_thread(self.store.save_state, snapshot)
            except OSError as exc:
                log.error("cron: could not write %s: %s", self.store.state_path, exc)

    # -- runs ------------------------------------------------------------------------------

    async def _fire(self, job_id: str) -> None:
        """What APScheduler calls. The run is our task: APScheduler's shutdown cancels its
        own futures, ours get the grace of `stop`."""
        run = self._spawn(self.run_job(job_id))
        try:
            await asyncio.shield(run)
        except asyncio.CancelledError:
            if not run.done():
                return  # APScheduler shutting down: `stop` finishes or cancels the run
            raise

    def _spawn(self, work: Any) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(work)
        self._runs.add(task)
        task.add_done_callback(self._runs.discard)
        return task

    async def run_job(self, job_id: str, *, manual: bool = False) -> RunResult:
        """Run a job once now. Scheduled runs count errors, retry with backoff, disable a
        one-shot after success; a manual run (`clawgate cron run`) only records its result."""
        job = self.jobs.get(job_id)
        if job is None:
            return RunResult(ok=False, error=f"no job with id {job_id!r}")
        lock = self._locks.setdefault(job_id, asyncio.Lock())
        async with lock:
            if not manual:
                self._unschedule_retry(job_id)
                job = self.jobs.get(job_id)
                if job is None or not job.enabled:
                    return RunResult(ok=False, error="job removed or disabled")
            started = self.clock()
            late = None if manual or not job.is_one_shot else self._lateness(job, started)
            note = ""
            if late is not None:
                if self._really_late(job, late) > self.missed_limit:
                    return await self._missed(job, late)
                at = job.at_time(self.timezone)
                assert at is not None
                note = f"(this reminder was due at {self._shown(job, at)}, {how_long(late)} ago) "
            if not manual and not await self._within_budget(job):
                return RunResult(ok=False, error="skipped: the chat's rate limit is spent")
            if job.condition and (unmet := await self.turns.unmet(job.condition, job.deliver_to)):
                log.info("cron: job %s skipped: %s", job.id, unmet)
                state = self.state.of(job.id)
                state.last_run, state.last_status, state.last_error = started, "skipped", unmet
                await self._save_state()
                return RunResult(ok=True, text=f"skipped: {unmet} (no model call)")
            result = await self._run_turn(job, note)
            state = self.state.of(job.id)
            state.last_run, state.runs = started, state.runs + 1
            state.last_status = "ok" if result.ok else "error"
            state.last_error = None if result.ok else result.error
            if not manual:
                await self._after_scheduled_run(job, result)
            await self._save_state()
        return result

    def _unschedule_retry(self, job_id: str) -> None:
        if self._aps is not None:
            with contextlib.suppress(Exception):
                self._aps.remove_job(f"retry:{job_id}")
        self.state.of(job_id).retry_at = None

    async def _within_budget(self, job: CronJob) -> bool:
        """A run reporting to a shared chat spends that chat's messages_per_minute: a job
        created from a group cannot call the model more often than the group may."""
        if (await self.turns.target_trust(job.deliver_to)).is_owner:
            return True
        if self.turns.dispatcher.rate_limiter.admit_scheduled(job.deliver_to):
            return True
        log.info("cron: job %s skipped: %s is over its rate limit", job.id, job.deliver_to)
        return False

    async def _run_turn(self, job: CronJob, note: str = "") -> RunResult:
        """`note` says how late the run is: the model reads it, the chat sees it first."""
        try:
            trust = await self.turns.target_trust(job.deliver_to)
            reply = await self.turns.turn(
                "cron", job.id, job_prompt(job, note), trust, keep_runs=CRON_KEEP_RUNS
            )
            if reply is None:
                return RunResult(ok=False, error="the turn produced no reply")
            if reply.is_error:
                return RunResult(ok=False, error=reply.text)
            await self.turns.deliver(
                job.deliver_to, note + reply.text, label=f"[scheduled: {job.name}] "
            )
            return RunResult(ok=True, text=reply.text)
        except Exception as exc:
            log.exception("cron: job %s failed", job.id)
            return RunResult(ok=False, error=f"{type(exc).__name__}: {exc}")

    async def _after_scheduled_run(self, job: CronJob, result: RunResult) -> None:
        state = self.state.of(job.id)
        if result.ok:
            state.consecutive_errors = 0
            if job.is_one_shot:
                await self._disable(job)
            return
        state.consecutive_errors += 1
        count = state.consecutive_errors
        log.warning("cron: job %s failed (%d in a row): %s", job.id, count, result.error)
        if count >= MAX_CONSECUTIVE_ERRORS:
            state.last_status = "disabled"
            await self._disable(job)
            await self._notify(
                job,
                f"The scheduled job {job.name!r} (id {job.id}) failed {count} times in a row "
                f"and is now disabled. Last error: {result.error} - re-enable it with "
                f"`clawgate cron enable {job.id}` once the cause is fixed.",
            )
            return
        delay = self.retry_backoff.delay(count)
        state.retry_at = self.clock() + timedelta(seconds=delay)
        self._schedule_retry(job.id, state.retry_at)

    async def _disable(self, job: CronJob) -> None:
        """Turn the job off in jobs.json (re-read under the lock: nothing else is touched)."""
        self._unschedule(job.id)
        self.jobs[job.id] = job.model_copy(update={"enabled": False})
        try:
            await asyncio.to_thread(set_enabled, self.store, job.id, False)
        except (CronError, OSError) as exc:
            log.error("cron: could not disable %s in jobs.json: %s", job.id, exc)

    async def _notify(self, job: CronJob, text: str) -> None:
        try:
            await self.turns.deliver(job.deliver_to, text, label="[scheduler] ")
        except Exception:
            log.exception("cron: could not notify %s", job.deliver_to)

    # -- `clawgate cron run` through the running gateway -----------------------------------

    async def _take_requests(self) -> None:
        for job_id, result_path in take_requests(self.store):
            self._spawn(self._answer_request(job_id, result_path))

    async def _answer_request(self, job_id: str, result_path: Path) -> None:
        log.info("cron: running %s on request", job_id)
        result = await self.run_job(job_id, manual=True)
        try:
            await asyncio.to_thread(answer_request, self.store, result_path, result)
        except OSError as exc:
            log.error("cron: could not answer run request for %s: %s", job_id, exc)
