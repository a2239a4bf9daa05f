"""What the memory index stores and reports: file state, chunk rows, refresh and status."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FileState:
    size: int
    mtime_ns: int
    ino: int
    hash: str

    def same_stat(self, other: tuple[int, int, int]) -> bool:
        return (self.size, self.mtime_ns, self.ino) == other


@dataclass(frozen=True)
class ChunkRow:
    id: int
    path: str
    start_line: int
    end_line: int
    date: str | None
    text: str


@dataclass(frozen=True)
class RefreshReport:
    files_changed: int = 0
    files_removed: int = 0
    chunks_added: int = 0
    chunks_removed: int = 0
    embedded: int = 0


@dataclass(frozen=True)
class IndexStatus:
    db_path: Path
    files: int
    chunks: int
    embedding_model: str
    vectors: int
    dirty_files: list[str]
    size_bytes: int
