"""Retention: old downloads, archived transcripts and MEMORY.md versions are removed after
the configured number of days. An archived transcript whose archive has not landed is the
only copy of those messages, so it is never removed, whatever its age.

`sweep` goes by mtime over `media/`, `public/media/`, `public/*/media/`, `sessions/archive/`,
and `memory/.versions/`. The daemon runs it for each agent a minute after start and then daily
(daemon/gateway.py); `clawgate housekeeping [--dry-run]` runs it on demand."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from clawgate.agent.session import Archived, load_session, read_key
from clawgate.kernel.config import Config

log = logging.getLogger(__name__)

DAY = 86_400.0


@dataclass
class SweepReport:
    removed: dict[str, int] = field(default_factory=dict)  # category -> files
    freed: int = 0  # bytes
    kept_unarchived: int = 0  # old transcripts kept because their archive has not landed

    def summary(self) -> str:
        parts = [f"{count} {name}" for name, count in self.removed.items() if count]
        text = ", ".join(parts) if parts else "nothing"
        return f"removed {text} ({self.freed / 1e6:.1f} MB freed)"


def _old_files(folder: Path, cutoff: float) -> list[Path]:
    if not folder.exists():
        return []
    old = []
    for path in folder.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink() and path.stat().st_mtime < cutoff:
                old.append(path)
        except OSError:
            continue
    return old


def _archive_landed(path: Path) -> bool:
    session = load_session(path, read_key(path) or path.stem)
    return any(True for _ in session.records_of(Archived))


def sweep(config: Config, *, now: float | None = None, dry_run: bool = False) -> SweepReport:
    """Remove what retention allows; with `dry_run`, only count it."""
    now = time.time() if now is None else now
    rules = config.housekeeping
    workspace = config.workspace
    report = SweepReport()
    candidates: dict[str, list[Path]] = {
        "media files": [],
        "archived transcripts": [],
        "memory versions": [],
    }
    if rules.media_days:
        cutoff = now - rules.media_days * DAY
        # Non-owner chats keep their downloads in their own area, public/<chat>/media/.
        shared_media = sorted((workspace / "public").glob("*/media"))
        for folder in (workspace / "media", workspace / "public" / "media", *shared_media):
            candidates["media files"] += _old_files(folder, cutoff)
    if rules.archive_days:
        cutoff = now - rules.archive_days * DAY
        for path in _old_files(workspace / "sessions" / "archive", cutoff):
            if _archive_landed(path):
                candidates["archived transcripts"].append(path)
            else:
                report.kept_unarchived += 1
    if rules.versions_days:
        cutoff = now - rules.versions_days * DAY
        candidates["memory versions"] += _old_files(workspace / "memory" / ".versions", cutoff)
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
