"""Retention: old downloads, archived transcripts and MEMORY.md versions are removed after
the configured number of days. An archived transcript whose archive has not landed is the
only copy of those messages, so it is never removed, whatever its age.

`sweep` goes by mtime over `media/`, `public/media/`, `public/*/media/`, `sessions/archive/`,
and `memory/.versions/`. The daemon runs it for each agent a minute after start and then daily
(daemon/gateway.py); `clawgate housekeeping [--dry-run]` runs it on demand.

Ages are read off the wall clock, which can jump (a wrong date at boot, a hypervisor, a
person), so two rules keep a jump from emptying the folders:
- the newest `housekeeping.keep_newest` files of each kind (downloads, archived transcripts,
  MEMORY.md versions) stay whatever their age;
- every sweep records its wall time and the elapsed clock (kernel/clock.py) in
  `<data_dir>/housekeeping.json`; a sweep whose wall clock advanced more than a day beyond
  the time that really passed since the last one (measured across processes of one boot;
  after a reboot, at least the time since the boot) deletes nothing, says why, and records
  the clock as it now is: the next sweep goes by it. A real gap, such as a gateway down for
  a week with the machine off, costs at most that one day of retention."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel

from clawgate.agent.session import Archived, load_session, read_key
from clawgate.kernel.clock import SYSTEM_CLOCK, Clock
from clawgate.kernel.config import Config
from clawgate.kernel.errors import DocumentDamaged
from clawgate.kernel.json_document import JsonDocument

log = logging.getLogger(__name__)

DAY = 86_400.0
STATE_FILE = "housekeeping.json"


class LastSweep(BaseModel):
    """`<data_dir>/housekeeping.json`: when the last sweep ran, by both clocks."""

    wall: float
    elapsed: float
    boot: str | None = None


@dataclass
class SweepReport:
    removed: dict[str, int] = field(default_factory=dict)  # category -> files
    freed: int = 0  # bytes
    kept_unarchived: int = 0  # old transcripts kept because their archive has not landed
    skipped: str | None = None  # why nothing was deleted (the clock jumped)

    def summary(self) -> str:
        if self.skipped is not None:
            return f"deleted nothing: {self.skipped}"
        parts = [f"{count} {name}" for name, count in self.removed.items() if count]
        text = ", ".join(parts) if parts else "nothing"
        return f"removed {text} ({self.freed / 1e6:.1f} MB freed)"


def _files(folder: Path) -> list[tuple[float, Path]]:
    """(mtime, path) of each regular file under `folder`."""
    if not folder.exists():
        return []
    found = []
    for path in folder.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink():
                found.append((path.stat().st_mtime, path))
        except OSError:
            continue
    return found


def _expired(files: list[tuple[float, Path]], cutoff: float, keep: int) -> list[Path]:
    """Files older than `cutoff`, except the `keep` newest of them all."""
    newest_first = sorted(files, key=lambda entry: entry[0], reverse=True)
    return [path for mtime, path in newest_first[keep:] if mtime < cutoff]


def _archive_landed(path: Path) -> bool:
    session = load_session(path, read_key(path) or path.stem)
    return any(True for _ in session.records_of(Archived))


def _last_sweep(document: JsonDocument[LastSweep | None]) -> LastSweep | None:
    try:
        return document.load()
    except (DocumentDamaged, OSError) as exc:
        log.warning("housekeeping: %s unreadable (%s); sweeping by age", document.path, exc)
        return None


def _clock_jump(last: LastSweep | None, clock: Clock) -> str | None:
    """Why this sweep must not trust the wall clock, or None."""
    if last is None:
        return None
    now, boot = clock.wall(), clock.boot()
    same_boot = boot is not None and boot == last.boot
    passed = clock.elapsed() - last.elapsed if same_boot else clock.elapsed()
    advanced = now - last.wall
    if advanced <= passed + DAY:
        return None
    then = datetime.fromtimestamp(last.wall, UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"the clock moved {advanced / DAY:.1f} days since the last sweep ({then}) but only "
        f"{max(passed, 0) / 3600:.1f} h really passed; the next sweep goes by the clock as it "
        "is now"
    )


def _document(config: Config) -> JsonDocument[LastSweep | None]:
    return JsonDocument(
        config.data_dir / STATE_FILE,
        default=lambda: None,
        parse=LastSweep.model_validate,
        dump=lambda value: value.model_dump(mode="json") if value is not None else None,
    )


def sweep(config: Config, *, clock: Clock = SYSTEM_CLOCK, dry_run: bool = False) -> SweepReport:
    """Remove what retention allows; with `dry_run`, only count it (and record nothing)."""
    rules = config.housekeeping
    workspace = config.workspace
    report = SweepReport()
    document = _document(config)
    report.skipped = _clock_jump(_last_sweep(document), clock)
    if not dry_run:
        document.replace(LastSweep(wall=clock.wall(), elapsed=clock.elapsed(), boot=clock.boot()))
    if report.skipped is not None:
        return report
    now, keep = clock.wall(), rules.keep_newest
    candidates: dict[str, list[Path]] = {
        "media files": [],
        "archived transcripts": [],
        "memory versions": [],
    }
    if rules.media_days:
        # Non-owner chats keep their downloads in their own area, public/<chat>/media/.
        shared_media = sorted((workspace / "public").glob("*/media"))
        folders = (workspace / "media", workspace / "public" / "media", *shared_media)
        media = [entry for folder in folders for entry in _files(folder)]
        candidates["media files"] = _expired(media, now - rules.media_days * DAY, keep)
    if rules.archive_days:
        archives = _files(workspace / "sessions" / "archive")
        for path in _expired(archives, now - rules.archive_days * DAY, keep):
            if _archive_landed(path):
                candidates["archived transcripts"].append(path)
            else:
                report.kept_unarchived += 1
    if rules.versions_days:
        versions = _files(workspace / "memory" / ".versions")
        cutoff = now - rules.versions_days * DAY
        candidates["memory versions"] = _expired(versions, cutoff, keep)
    for name, paths in candidates.items():
        report.removed[name] = 0
        for path in paths:
            try:
                size = path.stat().st_size
                if not dry_run:
                    path.unlink()
            except OSError as exc:
                log.warning("housekeeping: could not remove %s: %s", path, exc)
                continue
            report.removed[name] += 1
            report.freed += size
    return report
