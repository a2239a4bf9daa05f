"""The memory files: MEMORY.md (replaced whole), HISTORY.md and daily logs (append-only).

    memory/MEMORY.md        long-term facts, owner-only; previous versions in memory/.versions/
                            as MEMORY.<counter>.md (versions.py, the owner's files' too)
    memory/HISTORY.md       "[YYYY-MM-DD HH:MM] (session key) entry <!-- key #first-last -->",
                            blank line between entries (the range marker: entries.py)
    memory/YYYY-MM-DD.md    the day's log (dated in agent.timezone)

Every write holds the workspace's memory lock (lock.py) for its whole read-modify-write: the
daemon, the model's file tools and a CLI command may write at once. The methods here are
blocking and take the lock themselves; async code calls them through `store.lock.run(...)`. A model's rewrite of
MEMORY.md is merged with what the file became since the model saw it (merge.py), and the
lines it removes are recorded first (removed.py), so the owner can put them back.
Every write replaces lone UTF-16 surrogates (as session writes do), so no text a model or a
platform produced can make a memory write raise; a MEMORY.md that is not valid UTF-8 (an
editor's stray byte) is read with replacement characters instead of failing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from clawgate.agent.memory.entries import Span, write_entry
from clawgate.agent.memory.lock import MemoryLock
from clawgate.agent.memory.merge import MemoryRewrite, merge_lines
from clawgate.agent.memory.removed import (
    Journal,
    Removal,
    mark_restored,
    read_journal,
    record_removal,
    removed_lines,
    with_restored,
)
from clawgate.agent.memory.versions import KeptFile
from clawgate.agent.text import without_surrogates
from clawgate.kernel.storage import DiskWriter

log = logging.getLogger(__name__)


class MemoryStore:
    def __init__(
        self,
        workspace: Path,
        *,
        writer: DiskWriter | None = None,
        lock: MemoryLock | None = None,
        timezone: str = "UTC",
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        """`lock` is the workspace's memory lock, made here when not given; whoever else
        writes memory files in this process (tool contexts, the dashboard) is handed this
        store's `lock`."""
        self.dir = workspace / "memory"
        self.memory_path = self.dir / "MEMORY.md"
        self.history_path = self.dir / "HISTORY.md"
        self.versions_dir = self.dir / ".versions"
        self.writer = writer or DiskWriter()
        self._kept = KeptFile(self.memory_path, self.versions_dir, self.writer)
        self.lock = lock or MemoryLock(workspace, self.writer)
        self.zone = ZoneInfo(timezone)
        self._clock = clock or (lambda: datetime.now(UTC))
        # The undecodable MEMORY.md content last warned about, so each bad version logs once.
        self._warned_undecodable: int | None = None

    def now(self) -> datetime:
        """Local time in agent.timezone."""
        return self._clock().astimezone(self.zone)

    def daily_path(self, day: date) -> Path:
        return self.dir / f"{day.isoformat()}.md"

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self.lock.hold():
            yield

    # Reads -----------------------------------------------------------------

    def read_memory(self) -> str:
        try:
            raw = self.memory_path.read_bytes()
        except FileNotFoundError:
            return ""
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            if self._warned_undecodable != hash(raw):
                self._warned_undecodable = hash(raw)
                log.warning(
                    "%s is not valid UTF-8 (byte %d); read with replacement characters",
                    self.memory_path,
                    exc.start,
                )
            return raw.decode("utf-8", "replace")

    def read_daily(self, day: date) -> str:
        try:
            return self.daily_path(day).read_text(encoding="utf-8")
        except FileNotFoundError:
            return ""

    def recent_daily(self) -> list[tuple[date, str]]:
        """Today's and yesterday's logs, oldest first, skipping missing ones."""
        today = self.now().date()
        days = [today - timedelta(days=1), today]
        return [(day, text) for day in days if (text := self.read_daily(day))]

    # Writes ----------------------------------------------------------------

    def replace_memory(self, text: str) -> None:
        """Replace MEMORY.md atomically, keeping the previous version in memory/.versions/."""
        with self._locked():
            self._kept.replace(text)

    def rewrite_memory(self, rewrite: MemoryRewrite) -> str:
        """Apply a model's whole-file rewrite: as it is if MEMORY.md is still what the model
        saw, else merged with the lines added or removed since. The lines it takes out of
        the file are recorded before it is replaced. Returns what was written."""
        with self._locked():
            current = self.read_memory()
            text = without_surrogates(rewrite.text)
            if current != rewrite.base:
                text = merge_lines(rewrite.base, text, current)
                log.info("MEMORY.md changed during a consolidation; the rewrite was merged")
            gone = removed_lines(current, text)
            if gone:
                record_removal(self.writer, self.dir, rewrite.source, gone, self.now())
            self.replace_memory(text)
            return text

    def removals(self) -> Journal:
        """What consolidations removed from MEMORY.md, and which of it was restored."""
        return read_journal(self.dir)

    def restore_removal(self, removal: Removal) -> str:
        """Append a removal's lines that MEMORY.md no longer holds, then mark it restored.
        Returns MEMORY.md after."""
        with self._locked():
            self.replace_memory(with_restored(self.read_memory(), removal))
            mark_restored(self.writer, self.dir, removal, self.now())
            return self.read_memory()

    def versions(self) -> list[Path]:
        """The kept MEMORY.md versions, oldest first."""
        return self._kept.versions()

    def read_history(self) -> str:
        try:
            return self.history_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def append_history(
        self,
        entry: str,
        session_key: str,
        when: datetime | None = None,
        *,
        span: Span | None = None,
    ) -> bool:
        """One HISTORY.md entry and its copy in the day's log, under one lock, fsynced. With a
        `span` (entries.py), a copy whose range marker is already there is not written again.
        True if the HISTORY.md entry was written now."""
        when = (when or self.now()).astimezone(self.zone)
        with self._locked():
            return write_entry(
                self.writer,
                self.history_path,
                self.daily_path(when.date()),
                entry,
                session_key,
                when,
                span,
            )

    def append_daily(self, text: str, when: datetime | None = None) -> None:
        when = (when or self.now()).astimezone(self.zone)
        with self._locked():
            line = without_surrogates(text.rstrip("\n") + "\n")
            self.writer.append(self.daily_path(when.date()), line, mode=0o600)

    def write_note(self, name: str, text: str) -> Path:
        """A dated note file (e.g. the summary of an archived session); never overwrites."""
        name, text = without_surrogates(name), without_surrogates(text)
        with self._locked():
            path = self.dir / f"{name}.md"
            counter = 2
            while path.exists():
                path = self.dir / f"{name}-{counter}.md"
                counter += 1
            self.writer.replace(path, text)
            return path
