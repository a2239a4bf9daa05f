"""What consolidations removed from MEMORY.md, kept so the owner can see it and undo it.

The rewrite guard (answer.py) lets the model drop a line it lists in `removed`, up to a third
of MEMORY.md per consolidation. Every line a model's rewrite takes out of the file is
recorded here, one `Removal` per rewrite, in `memory/.removed.jsonl` (one JSON object a
line, append-only through the DiskWriter, fsynced; a torn last line is skipped on reading).
The record is appended before MEMORY.md is replaced, so a crash in between leaves a record of
lines still in the file, which a restore then skips; a removal never goes unrecorded.

A restore appends the removal's lines that MEMORY.md no longer holds (by fact: list
markers, spacing and case ignored) to the end of the file, then a `Restored` record, both
under the memory lock; a restore repeated after a crash in between adds nothing twice.
The dashboard's memory page lists the removals not restored yet (gateway/dashboard/memory.py).
"""

from __future__ import annotations

import logging
import secrets
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from clawgate.agent.memory.merge import fact_of
from clawgate.kernel.storage import DiskWriter

log = logging.getLogger(__name__)

JOURNAL_NAME = ".removed.jsonl"


class Removal(BaseModel, frozen=True):
    """The lines one MEMORY.md rewrite removed, as they were written."""

    type: Literal["removed"] = "removed"
    id: str
    at: datetime
    source: str  # the session key whose consolidation removed them
    lines: tuple[str, ...]


class Restored(BaseModel, frozen=True):
    """The owner put a removal's lines back."""

    type: Literal["restored"] = "restored"
    id: str
    at: datetime


JournalLine = Annotated[Removal | Restored, Field(discriminator="type")]
_LINE: TypeAdapter[Removal | Restored] = TypeAdapter(JournalLine)


def removed_lines(before: str, after: str) -> list[str]:
    """The lines of `before` whose facts `after` no longer holds, in their order (blank
    lines and re-bulleted or re-spaced lines are not removals)."""
    left = Counter(fact_of(line) for line in after.splitlines())
    gone = []
    for line in before.splitlines():
        fact = fact_of(line)
        if not fact:
            continue
        if left[fact] > 0:
            left[fact] -= 1
        else:
            gone.append(line)
    return gone


def record_removal(
    disk: DiskWriter, memory_dir: Path, source: str, lines: list[str], when: datetime
) -> Removal:
    """Append (and fsync) one Removal. Call it holding the memory lock."""
    removal = Removal(id=secrets.token_hex(6), at=when, source=source, lines=tuple(lines))
    _append(disk, memory_dir, removal)
    return removal


@dataclass(frozen=True)
class Journal:
    """The journal as read: every removal, oldest first, and the ids restored since."""

    removals: tuple[Removal, ...]
    restored: frozenset[str]

    def pending(self) -> list[Removal]:
        """The removals not restored yet, newest first."""
        return [r for r in reversed(self.removals) if r.id not in self.restored]

    def find(self, removal_id: str) -> Removal | None:
        return next((r for r in self.removals if r.id == removal_id), None)


def read_journal(memory_dir: Path) -> Journal:
    try:
        raw = (memory_dir / JOURNAL_NAME).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return Journal((), frozenset())
    removals, restored = [], set()
    # Split on newlines only: str.splitlines would also cut at U+2028 and friends.
    for number, line in enumerate(raw.split("\n"), 1):
        if not line.strip():
            continue
        try:
            record = _LINE.validate_json(line)
        except ValidationError:
            # A torn last line (a crash mid-append) or a line edited by hand: skipped.
            log.warning("%s line %d is not a record; skipped", JOURNAL_NAME, number)
            continue
        if isinstance(record, Removal):
            removals.append(record)
        else:
            restored.add(record.id)
    return Journal(tuple(removals), frozenset(restored))


def with_restored(current: str, removal: Removal) -> str:
    """`current` with the removal's lines it no longer holds appended at its end."""
    present = Counter(fact_of(line) for line in current.splitlines())
    missing = []
    for line in removal.lines:
        fact = fact_of(line)
        if present[fact] > 0:
            present[fact] -= 1
        else:
            missing.append(line)
    if not missing:
        return current
    body = current if not current or current.endswith("\n") else current + "\n"
    return body + "\n".join(missing) + "\n"


def mark_restored(disk: DiskWriter, memory_dir: Path, removal: Removal, when: datetime) -> None:
    """Append (and fsync) the Restored record. Call it holding the memory lock."""
    _append(disk, memory_dir, Restored(id=removal.id, at=when))


def _append(disk: DiskWriter, memory_dir: Path, record: Removal | Restored) -> None:
    path = memory_dir / JOURNAL_NAME
    disk.mkdir(memory_dir)
    disk.append(path, record.model_dump_json() + "\n", mode=0o600)
    disk.fsync(path)
