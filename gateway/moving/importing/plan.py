"""What an import brings (a `Haul`), compared with the agent's workspace, reported, and with
`--apply` written.

Each file an importer maps is new (written), already there with the same bytes (skipped: a
second apply changes nothing), or a conflict: the agent has its own, different file (left as
it is, and reported with the path of theirs to merge by hand). A bootstrap file that is
still clawgate's unedited template is not the owner's: theirs replaces it. HISTORY.md is
appended to, entry by entry, skipping entries already in it. Cron jobs join jobs.json under
ids prefixed with the source; a job with no chat to deliver to is reported, not guessed. The
source is only ever read."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Literal

from clawgate.agent.memory.entries import split_entries
from clawgate.agent.memory.lock import MemoryLock
from clawgate.gateway.cron.models import CronJob, JobsFile
from clawgate.gateway.cron.store import CronStore
from clawgate.kernel.storage import DiskWriter, make_dirs, replace_file

TEMPLATE_PACKAGE = "clawgate.workspace"
HISTORY = "memory/HISTORY.md"

Status = Literal["new", "same", "conflict", "template"]


@dataclass(frozen=True)
class FileItem:
    target: str  # path in the workspace
    content: bytes
    source: Path
    what: str


@dataclass
class Haul:
    """Everything an importer found in the source."""

    source: str  # "openclaw" or "nanobot"
    files: list[FileItem] = field(default_factory=list)
    history: list[str] = field(default_factory=list)  # entries for HISTORY.md, oldest first
    jobs: list[CronJob] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # what could not be mapped, and why


@dataclass
class Plan:
    haul: Haul
    workspace: Path
    files: list[tuple[FileItem, Status]]
    history_new: list[str]
    jobs: list[tuple[CronJob, Status]]

    @property
    def conflicts(self) -> int:
        return sum(1 for _, s in self.files + self.jobs if s == "conflict")

    @property
    def to_write(self) -> int:
        writes = [s for _, s in self.files + self.jobs if s in ("new", "template")]
        return len(writes) + len(self.history_new)


def make_plan(haul: Haul, workspace: Path) -> Plan:
    files = [(item, _status(workspace, item)) for item in haul.files]
    history = workspace / HISTORY
    text = history.read_text(encoding="utf-8") if history.exists() else ""
    have = {entry.strip() for entry in split_entries(text)}
    history_new = [
        entry.strip() for entry in dict.fromkeys(haul.history) if entry.strip() not in have
    ]
    existing = {job.id: job for job in CronStore(workspace / "cron").load().jobs}
    jobs: list[tuple[CronJob, Status]] = []
    for job in haul.jobs:
        mine = existing.get(job.id)
        jobs.append((job, "new" if mine is None else "same" if mine == job else "conflict"))
    return Plan(haul, workspace, files, history_new, jobs)


def _status(workspace: Path, item: FileItem) -> Status:
    target = workspace / item.target
    if not target.exists():
        return "new"
    current = target.read_bytes()
    if current == item.content:
        return "same"
    return "template" if current == _template(item.target) else "conflict"


def _template(relative: str) -> bytes | None:
    try:
        return resources.files(TEMPLATE_PACKAGE).joinpath(relative).read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


def apply_plan(plan: Plan) -> None:
    """Write what the plan marks new (or over an unedited template); memory files under the
    memory lock, jobs under jobs.json's lock."""
    workspace = plan.workspace
    disk = DiskWriter()
    make_dirs(workspace)
    with MemoryLock(workspace, disk).hold():
        for item, status in plan.files:
            if status in ("new", "template"):
                target = workspace / item.target
                make_dirs(target.parent)
                mode = 0o700 if item.source.stat().st_mode & 0o100 else 0o600
                replace_file(target, item.content, mode=mode)
        if plan.history_new:
            history = workspace / HISTORY
            text = history.read_text(encoding="utf-8") if history.exists() else ""
            if text and not text.endswith("\n\n"):
                text = text.rstrip("\n") + "\n\n"
            replace_file(history, text + "".join(e.strip() + "\n\n" for e in plan.history_new))
    new_jobs = [job for job, status in plan.jobs if status == "new"]
    if new_jobs:

        def add(jobs: JobsFile) -> None:
            known = {job.id for job in jobs.jobs}
            jobs.jobs += [job for job in new_jobs if job.id not in known]

        CronStore(workspace / "cron").update(add)
