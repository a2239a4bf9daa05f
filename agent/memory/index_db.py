"""The memory index's SQLite database: where it lives, its tables, opening it, its rows.

    <data_dir>/index/memory-<hash of the workspace path>.sqlite

Tables: `meta` (schema version, write generation), `files` (what was indexed: size, mtime,
inode, content hash), `chunks` (path, line range, date, content hash, text, and the text's
CJK runs), two external-content FTS5 tables over them (`chunks_fts`: porter + unicode61
over the text; `chunks_tri`: trigram over the CJK runs), and `embeddings` (vector per
(content hash, model), a cache that survives re-chunking and model switches). Deleting the
file loses nothing: the next refresh rebuilds it.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiosqlite

from clawgate.agent.memory.chunker import CHUNKER_VERSION
from clawgate.agent.memory.tokens import cjk_runs
from clawgate.kernel.storage import make_dirs

if TYPE_CHECKING:
    from clawgate.agent.memory.index import MemoryIndex

SCHEMA_VERSION = "1"
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files(
    path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    ino INTEGER NOT NULL, hash TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chunks(
    id INTEGER PRIMARY KEY, path TEXT NOT NULL, start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL, date TEXT, hash TEXT NOT NULL, text TEXT NOT NULL,
    cjk TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS chunks_path ON chunks(path);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    text, content='chunks', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_tri USING fts5(
    cjk, content='chunks', content_rowid='id', tokenize='trigram');
CREATE TRIGGER IF NOT EXISTS chunks_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text);
    INSERT INTO chunks_tri(rowid, cjk) SELECT new.id, new.cjk WHERE new.cjk != '';
END;
CREATE TRIGGER IF NOT EXISTS chunks_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
    INSERT INTO chunks_tri(chunks_tri, rowid, cjk)
        SELECT 'delete', old.id, old.cjk WHERE old.cjk != '';
END;
CREATE TABLE IF NOT EXISTS embeddings(
    hash TEXT NOT NULL, model TEXT NOT NULL, vector BLOB NOT NULL,
    PRIMARY KEY(hash, model)) WITHOUT ROWID;
"""


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


def db_path_for(workspace: Path, data_dir: Path) -> Path:
    """One database per workspace, named by a hash of its resolved path."""
    key = hashlib.sha256(str(workspace.expanduser().resolve()).encode()).hexdigest()[:16]
    return data_dir.expanduser() / "index" / f"memory-{key}.sqlite"


def cjk_text(text: str) -> str:
    """The CJK runs of a chunk, one per line: what the trigram table and LIKE fallback see."""
    return "\n".join(cjk_runs(text))


async def open_db(db_path: Path, workspace: Path) -> aiosqlite.Connection:
    """Open (creating if needed) the database; one of another schema version is derived
    data from another release, so it is deleted and built again."""
    await asyncio.to_thread(private_dir, db_path.parent)
    db = await _connect(db_path)
    try:
        rows = await fetch(db, "SELECT name FROM sqlite_master WHERE name = 'meta'")
        version = None
        if rows:
            found = await fetch(db, "SELECT value FROM meta WHERE key = 'schema'")
            version = found[0][0] if found else None
        if rows and version != SCHEMA_VERSION:
            await db.close()
            await asyncio.to_thread(delete_db_files, db_path)
            db = await _connect(db_path)
        await db.executescript(SCHEMA)
        await db.execute(
            "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema', ?), "
            "('generation', '0'), ('workspace', ?)",
            (SCHEMA_VERSION, str(workspace)),
        )
        await _forget_other_chunking(db)
    except BaseException:
        await db.close()
        raise
    return db


async def _forget_other_chunking(db: aiosqlite.Connection) -> None:
    """Chunks cut by another version of the chunker are dropped, so the next refresh cuts
    every file again; their vectors stay cached by content hash, so nothing is embedded
    again but the chunks that did change."""
    await db.execute("BEGIN IMMEDIATE")
    try:
        found = await fetch(db, "SELECT value FROM meta WHERE key = 'chunker'")
        if not found or found[0][0] != CHUNKER_VERSION:
            await db.execute("DELETE FROM chunks")
            await db.execute("DELETE FROM files")
            await db.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('chunker', ?)", (CHUNKER_VERSION,)
            )
            # Another process holding the old chunks in memory reloads.
            await db.execute(
                "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'"
            )
    except BaseException:
        await db.execute("ROLLBACK")
        raise
    await db.execute("COMMIT")


def private_dir(folder: Path) -> None:
    """Create `folder` and its missing parents 0700, whatever the umask: the index holds
    MEMORY.md's text. An existing index folder is narrowed too (it is ours alone)."""
    make_dirs(folder, mode=PRIVATE_DIR)
    os.chmod(folder, PRIVATE_DIR)


def _private_files(db_path: Path, *, create: bool) -> None:
    """Pre-create the database 0600 (SQLite would honour the umask) and narrow the -wal and
    -shm files, which SQLite gives the database's mode at best."""
    if create:
        os.close(os.open(db_path, os.O_CREAT | os.O_WRONLY, PRIVATE_FILE))
    for suffix in ("", "-wal", "-shm"):
        path = Path(f"{db_path}{suffix}")
        if path.exists():
            os.chmod(path, PRIVATE_FILE)


async def _connect(db_path: Path) -> aiosqlite.Connection:
    await asyncio.to_thread(_private_files, db_path, create=True)
    db = aiosqlite.connect(db_path, isolation_level=None)
    # aiosqlite's worker thread is not a daemon: an index its owner never closed would keep
    # the interpreter from exiting. The data is derived and SQLite (WAL) survives a kill.
    thread = getattr(db, "_thread", None)
    if thread is not None and not thread.is_alive():
        thread.daemon = True
    await db
    try:
        await db.execute("PRAGMA busy_timeout = 10000")
        await db.execute("PRAGMA journal_mode = WAL")
        await db.execute("PRAGMA synchronous = NORMAL")
        await asyncio.to_thread(_private_files, db_path, create=False)
    except BaseException:
        await db.close()
        raise
    return db


async def fetch(
    db: aiosqlite.Connection, sql: str, params: Iterable[object] = ()
) -> list[sqlite3.Row]:
    """Every row of a query, as a list (aiosqlite's own result type is not indexable)."""
    return list(await db.execute_fetchall(sql, params))


def delete_db_files(db_path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)


def read_file(path: Path) -> tuple[str, tuple[int, int, int]]:
    """A memory file's text and (size, mtime_ns, inode), from one open."""
    with path.open("rb") as handle:
        info = os.fstat(handle.fileno())
        data = handle.read()
    return data.decode("utf-8", errors="replace"), (info.st_size, info.st_mtime_ns, info.st_ino)


def scan_memory(folder: Path, prefix: str) -> dict[str, tuple[int, int, int]]:
    """(size, mtime_ns, inode) of each Markdown file in `folder`, by `prefix/name`."""
    found: dict[str, tuple[int, int, int]] = {}
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return found
    for entry in entries:
        if not entry.name.endswith(".md") or entry.name.startswith("."):
            continue
        try:
            if not entry.is_file():
                continue
            info = entry.stat()
        except OSError:
            continue
        found[f"{prefix}/{entry.name}"] = (info.st_size, info.st_mtime_ns, info.st_ino)
    return found


class WriteTxn:
    """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error), bumping meta.generation."""

    def __init__(self, index: MemoryIndex, db: aiosqlite.Connection) -> None:
        self._index = index
        self._db = db

    async def __aenter__(self) -> aiosqlite.Connection:
        await self._db.execute("BEGIN IMMEDIATE")
        try:
            current = await self._index._read_generation(self._db)
        except BaseException:
            await self._db.execute("ROLLBACK")
            raise
        self._stale = current != self._index._generation
        self._next = current + 1
        return self._db

    async def __aexit__(self, exc_type: Any, _exc: Any, _tb: Any) -> None:
        if exc_type is not None:
            await self._db.execute("ROLLBACK")
            # Memory state (vectors, file table) may be ahead of the database: reload.
            self._index._generation = -1
            return
        await self._db.execute(
            "UPDATE meta SET value = ? WHERE key = 'generation'", (str(self._next),)
        )
        await self._db.execute("COMMIT")
        # Another process wrote in between: reload at the next refresh.
        self._index._generation = -1 if self._stale else self._next
