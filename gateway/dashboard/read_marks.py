"""How far the owner has read each session in the dashboard: `<data_dir>/dashboard-read.json`,
the last message seq shown in a transcript, by session key. The sessions list marks a
session whose newest message is past its mark as unread. Blocking: call from a thread."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from clawgate.kernel.json_document import JsonDocument
from clawgate.kernel.storage import DiskWriter


class Marks(BaseModel):
    read: dict[str, int] = {}


class ReadMarks:
    def __init__(self, data_dir: Path, writer: DiskWriter | None = None) -> None:
        self._document = JsonDocument.of_model(
            data_dir / "dashboard-read.json", Marks, writer=writer
        )

    def read(self) -> dict[str, int]:
        return dict(self._document.load().read)

    def mark(self, key: str, seq: int) -> None:
        """The owner has seen `key` up to `seq` (a mark never moves back)."""

        def advance(marks: Marks) -> None:
            if marks.read.get(key, 0) < seq:
                marks.read[key] = seq

        self._document.update(advance)
