"""`<workspace>/cron/jobs.json` and `cron/state.json` on disk. Both are replaced atomically;
every change of jobs.json is a read-modify-write under a file lock, so the CLI, the tool
and the gateway never lose each other's changes."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from pydantic import ValidationError

from clawgate.gateway.cron.models import CronJob, JobsFile, StateFile, new_job
from clawgate.kernel.errors import CronError, describe_validation
from clawgate.kernel.storage import DiskWriter, locked

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

    def update(self, change: Callable[[JobsFile], T]) -> T:
        """Read the current file under the lock, apply `change`, write it back atomically.
        If `change` raises, nothing is written. Blocking: call it from a thread in async code."""
        self.writer.mkdir(self.directory)
        with locked(self._lock_path):
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
) -> CronJob:
    """A new job as a person asks for it (`clawgate cron add`, the dashboard): delivered to
    `to`, else heartbeat.deliver_to, else cli:default; in `tz`, else the agent's time zone."""
    deliver_to = to or config.heartbeat.deliver_to or "cli:default"
    return add_job(
        store,
        lambda jobs: new_job(
            jobs,
            name=name,
            message=message,
            deliver_to=deliver_to,
            timezone=tz or config.agent.timezone,
            at=at,
            every=every,
            cron=cron,
        ),
    )


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
