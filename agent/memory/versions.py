"""A Markdown file replaced whole, its previous versions kept: MEMORY.md, and the owner's
files the dashboard edits (SOUL.md, USER.md, ..., a skill's SKILL.md).

Each replace keeps the bytes it replaces as `<versions dir>/<STEM>.<counter>.md` (a counter,
never the clock, which can go back), the newest MAX_VERSIONS of them. Callers hold the lock
that guards the file (the workspace's memory lock) across their read-modify-write.
"""

from __future__ import annotations

import glob
import re
from pathlib import Path

from clawgate.agent.text import without_surrogates
from clawgate.kernel.storage import DiskWriter

MAX_VERSIONS = 20


class KeptFile:
    def __init__(self, path: Path, versions_dir: Path, writer: DiskWriter) -> None:
        self.path = path
        self.versions_dir = versions_dir
        self.writer = writer
        self._name = re.compile(rf"^{re.escape(path.stem)}\.(\d+)\.md$")

    def read(self) -> str:
        """The text; "" when absent; bytes that are not UTF-8 read as replacement characters."""
        try:
            return self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def replace(self, text: str) -> None:
        """Replace the file atomically (ending in a newline), keeping the previous bytes as a
        version; text equal to the file's writes nothing."""
        text = without_surrogates(text)
        final = text if text.endswith("\n") else text + "\n"
        try:
            # The backup keeps the previous bytes as they were, valid UTF-8 or not.
            previous = self.path.read_bytes()
        except FileNotFoundError:
            previous = b""
        if previous in (text.encode("utf-8"), final.encode("utf-8")):
            return
        if previous:
            self.writer.mkdir(self.versions_dir)
            versions = self.versions()
            number = self._number(versions[-1]) + 1 if versions else 1
            name = f"{self.path.stem}.{number:06d}.md"
            self.writer.replace(self.versions_dir / name, previous)
            for old in self.versions()[:-MAX_VERSIONS]:
                old.unlink(missing_ok=True)
        self.writer.replace(self.path, final)

    def versions(self) -> list[Path]:
        """Backups, oldest first: by their counter, after any named by the old clock stamps
        (which all predate the counter)."""
        found = self.versions_dir.glob(f"{glob.escape(self.path.stem)}.*.md")
        return sorted(found, key=lambda path: (self._number(path), path.name))

    def _number(self, path: Path) -> int:
        """A backup's counter; 0 for one named by a clock stamp (written before the counter)."""
        match = self._name.match(path.name)
        return int(match.group(1)) if match else 0
