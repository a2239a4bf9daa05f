"""`<workspace>/cron/jobs.json` and `cron/state.json` on disk, each a kernel JsonDocument:
replaced atomically, every change a read-modify-write under a file lock, so the CLI, the
tool and the gateway never lose each other's changes. A damaged jobs.json is refused with a
CronError naming the problem; a damaged state.json reads as empty run state."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from clawgate.gateway.cron.models import CronJob, JobsFile, StateFile, new_job
from clawgate.gateway.cron.targets import default_target
from clawgate.kernel.errors import CronError, DocumentDamaged
from clawgate.kernel.json_document import Fingerprint, JsonDocument
from clawgate.kernel.storage import DiskWriter

if TYPE_CHECKING:
    from clawgate.kernel.config import Config

log = logging.getLogger(__name__)

T = TypeVar("T")


class CronStore:
    """jobs.json and state.json in one folder (normally `<workspace>/cron/`)."""

    def __init__(self, directory: Path, *, writer: DiskWriter | None = None) -> None:
        self.directory = directory
        self.jobs_path = directory / "jobs.json"
        self.state_path = directory / "state.json"
        self.requests_dir = directory / "requests"
        self.writer = writer or DiskWriter()
        self._jobs = JsonDocument.of_model(
            self.jobs_path, JobsFile, writer=self.writer, lock_path=directory / ".jobs.lock"
        )
        self._state = JsonDocument.of_model(self.state_path, StateFile, writer=self.writer)

    def fingerprint(self) -> Fingerprint:
        """(inode, mtime_ns, size) of jobs.json, None if absent: a cheap change check."""
        return self._jobs.fingerprint()

    def load(self) -> JobsFile:
        """The jobs; an absent file is an empty set. Raises CronError naming the problem."""
        try:
            return self._jobs.load()
        except DocumentDamaged as exc:
            raise CronError(str(exc)) from None
        except OSError as exc:
            raise CronError(f"{self.jobs_path}: cannot read: {exc}") from None

    def save(self, jobs: JobsFile) -> None:
        self._jobs.replace(jobs)

    def update(self, change: Callable[[JobsFile], T]) -> T:
        """Read the current file under the lock, apply `change`, write it back atomically.
        If `change` raises, nothing is written. Blocking: call it from a thread in async code."""
        try:
            return self._jobs.update(change)
        except DocumentDamaged as exc:
            raise CronError(str(exc)) from None

    def load_state(self) -> StateFile:
        try:
            return self._state.load()
        except (DocumentDamaged, OSError) as exc:
            log.warning("%s unreadable (%s); starting with empty run state", self.state_path, exc)
            return StateFile()

    def save_state(self, state: StateFile) -> None:
        self._state.replace(state)


def add_job(store: CronStore, build: Callable[[JobsFile], CronJob]) -> CronJob:
    def change(jobs: JobsFile) -> CronJob:
        job = build(jobs)
        jobs.jobs.append(job)
        return job

    return store.update(change)


def create_job(
    store: CronStore,
    config: Config,
    *,
    name: str | None,
    message: str,
    at: str | None = None,
    every: int | None = None,
    cron: str | None = None,
    tz: str | None = None,
    to: str | None = None,
    condition: str | None = None,
) -> CronJob:
    """A new job as a person asks for it (`clawgate cron add`, the dashboard): delivered to
    `to`, else the default of targets.py (heartbeat.deliver_to, else the owner's one private
    chat; CronError listing the known chats otherwise); in `tz`, else the agent's time zone."""

    def build(jobs: JobsFile) -> CronJob:
        job = new_job(
            jobs,
            name=name,
            message=message,
            deliver_to=to or "cli:default",  # a stand-in: the schedule's errors come first
            timezone=tz or config.agent.timezone,
            at=at,
            every=every,
            cron=cron,
            condition=condition,
        )
        return job if to else job.model_copy(update={"deliver_to": default_target(config)})

    return add_job(store, build)


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
