"""The memory index's SQLite database: where it lives, its tables, opening it, its rows.

    <data_dir>/index/memory-<hash of the workspace path>.sqlite

Tables: `meta` (schema version, write generation), `files` (what was indexed: size, mtime,
inode, content hash), `chunks` (path, line range, date, content hash, text, and the text's
CJK runs), two external-content FTS5 tables over them (`chunks_fts`: porter + unicode61
over the text; `chunks_tri`: trigram over the CJK runs), and `embeddings` (vector per
(content hash, model), a cache that survives re-chunking and model switches). Deleting the
file loses nothing: the next refresh rebuilds it.

One way in: a plain sqlite3 connection (`Database`), used only in its own worker thread,
one use at a time, for every read and write at any size. Not
aiosqlite, which DESIGN.md names: aiosqlite hops to its thread once per statement, while a
search makes several queries and, on a busy two-core machine, each hop costs more than the
query. `Database.run` hands a whole function over in one hop, so a search (its freshness
check, word counts, query embedding with a local model, and reads through `Reader`) costs
one hop; with aiosqlite the same search took five. `Database.read` runs a read on the
event loop instead when the last one took no longer than INLINE_SECONDS (a small index: the
hop to the thread and back costs more than the reads on a busy machine), and only while
the thread is idle with no transaction open: one user of the connection at a time either
way. A read that grows slower goes back to the thread, where it is measured again.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from clawgate.agent.memory.chunker import CHUNKER_VERSION
from clawgate.agent.memory.coverage import Lines
from clawgate.agent.memory.tokens import cjk_runs
from clawgate.kernel.storage import make_dirs

if TYPE_CHECKING:
    from clawgate.agent.memory.index import MemoryIndex

T = TypeVar("T")

SCHEMA_VERSION = "1"
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
# A read measured at no more than this runs on the event loop next time (no thread hop).
INLINE_SECONDS = 0.0005
# The words table's tokenizer; bm25.py cuts questions with the same one.
WORDS_TOKENIZER = "porter unicode61 remove_diacritics 2"

SCHEMA = f"""
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
    text, content='chunks', content_rowid='id', tokenize='{WORDS_TOKENIZER}');
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


class ChunkRow(NamedTuple):
    """One chunk as a search reads it (a tuple: a search builds dozens of them)."""

    id: int
    path: str
    start_line: int
    end_line: int
    date: str | None
    text: str
    # Its lines' terms, as the index keeps them (vocabulary.py); None: split the text.
    lines: Lines | None = None


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


async def open_db(db_path: Path, workspace: Path) -> Database:
    """Open (creating if needed) the database; one of another schema version is derived
    data from another release, so it is deleted and built again."""
    return Database(await asyncio.to_thread(_open, db_path, workspace))


def _open(db_path: Path, workspace: Path) -> sqlite3.Connection:
    private_dir(db_path.parent)
    db = _connect(db_path)
    try:
        version = None
        tables = db.execute("SELECT name FROM sqlite_master WHERE name = 'meta'").fetchall()
        if tables:
            found = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchall()
            version = found[0][0] if found else None
        if tables and version != SCHEMA_VERSION:
            db.close()
            delete_db_files(db_path)
            db = _connect(db_path)
        db.executescript(SCHEMA)
        db.execute(
            "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema', ?), "
            "('generation', '0'), ('workspace', ?)",
            (SCHEMA_VERSION, str(workspace)),
        )
        _forget_other_chunking(db)
    except BaseException:
        db.close()
        raise
    return db


def _forget_other_chunking(db: sqlite3.Connection) -> None:
    """Chunks cut by another version of the chunker are dropped, so the next refresh cuts
    every file again; their vectors stay cached by content hash, so nothing is embedded
    again but the chunks that did change."""
    db.execute("BEGIN IMMEDIATE")
    try:
        found = db.execute("SELECT value FROM meta WHERE key = 'chunker'").fetchall()
        if not found or found[0][0] != CHUNKER_VERSION:
            db.execute("DELETE FROM chunks")
            db.execute("DELETE FROM files")
            db.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('chunker', ?)", (CHUNKER_VERSION,)
            )
            # Another process holding the old chunks in memory reloads.
            db.execute(
                "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'"
            )
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


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


def _connect(db_path: Path) -> sqlite3.Connection:
    _private_files(db_path, create=True)
    # Used from the event loop's worker threads, one at a time (Database's lock).
    db = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    try:
        db.execute("PRAGMA busy_timeout = 10000")
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        _private_files(db_path, create=False)
    except BaseException:
        db.close()
        raise
    return db


class Database:
    """The index's one SQLite connection. Every use runs in the connection's own worker
    thread, never on the event loop: one thread, so one statement or one piece of work at a
    time has the connection, with no lock to take, and a hop skips the shared pool's
    bookkeeping (a search pays for one). `run` hands a whole function of several statements
    over in one hop: a search's reads cost one thread hop, not one per query."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="memory-index")
        # Jobs handed to the thread and jobs it finished: each counter has one writer (the
        # loop, the thread), so the thread is idle when they are equal, even after a caller
        # was cancelled while its job still ran.
        self._handed = 0
        self._finished = 0
        self._read_seconds: float | None = None  # the last read's, where it ran

    async def run(self, work: Callable[..., T], *args: Any) -> T:
        """`work(connection, *args)` in the connection's worker thread."""
        self._handed += 1
        return await asyncio.get_running_loop().run_in_executor(
            self._thread, self._job, partial(work, self._connection, *args)
        )

    def _job(self, work: Callable[[], T]) -> T:
        try:
            return work()
        finally:
            self._finished += 1

    async def read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work(connection)`, a read: on the loop when the last read took no longer than
        INLINE_SECONDS, nothing runs in the thread and no transaction is open (a write
        spans several hops); else in the thread. Its duration is noted either way."""

        def timed(connection: sqlite3.Connection) -> T:
            started = time.perf_counter()
            try:
                return work(connection)
            finally:
                self._read_seconds = time.perf_counter() - started

        seconds = self._read_seconds
        idle = self._handed == self._finished and not self._connection.in_transaction
        if seconds is not None and seconds <= INLINE_SECONDS and idle:
            return timed(self._connection)
        return await self.run(timed)

    async def fetch(self, sql: str, params: Iterable[object] = ()) -> list[Any]:
        return await self.run(rows, sql, params)

    async def execute(self, sql: str, params: Iterable[object] = ()) -> None:
        await self.run(_execute, sql, tuple(params))

    async def executemany(self, sql: str, params: Iterable[Sequence[object]]) -> None:
        await self.run(_executemany, sql, list(params))

    async def close(self) -> None:
        try:
            await self.run(_close)
        finally:
            self._thread.shutdown(wait=False)


def rows(db: sqlite3.Connection, sql: str, params: Iterable[object] = ()) -> list[Any]:
    """Every row of a query."""
    return db.execute(sql, tuple(params)).fetchall()


def _execute(db: sqlite3.Connection, sql: str, params: tuple[object, ...]) -> None:
    db.execute(sql, params)


def _executemany(db: sqlite3.Connection, sql: str, params: list[Sequence[object]]) -> None:
    db.executemany(sql, params)


def _close(db: sqlite3.Connection) -> None:
    db.close()


def read_generation(db: sqlite3.Connection) -> int:
    found = rows(db, "SELECT value FROM meta WHERE key = 'generation'")
    return int(found[0][0]) if found else 0


async def fetch(db: Database, sql: str, params: Iterable[object] = ()) -> list[Any]:
    """Every row of a query, in one hop to a worker thread."""
    return await db.fetch(sql, params)


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


def best_matches(table: str, where: str = "") -> str:
    """The statement for an FTS5 table's best `?` matches of `?`: (rowid, -bm25) best first,
    ties by rowid. Sorted by the bm25 column, not FTS5's `ORDER BY rank`: that sorts every
    match before the LIMIT applies, where SQLite's own sorter keeps only the best `?`; with a
    common word matching most of 10,000 chunks, 18 -> 10 ms, the same rows in the same order
    (FTS5 also orders ties by rowid)."""
    return (
        f"SELECT rowid, -bm25({table}) AS score FROM {table} WHERE {table} MATCH ?{where} "
        "ORDER BY score DESC, rowid LIMIT ?"
    )


class Reader:
    """The search's queries, on the connection of the thread `Database.run` hands them."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def fts(
        self, table: str, match: str, limit: int, days: tuple[str, str] | None = None
    ) -> list[tuple[int, float]]:
        """(chunk id, -bm25) best first; `match` must already be a safe FTS5 query. With
        `days` (first, last ISO dates) only chunks dated within them."""
        assert table in ("chunks_fts", "chunks_tri")
        where = ""
        params: tuple[str, ...] = ()
        if days is not None:
            where = " AND rowid IN (SELECT id FROM chunks WHERE date BETWEEN ? AND ?)"
            params = days
        found = rows(self._db, best_matches(table, where), (match, *params, limit))
        return [(int(r[0]), float(r[1])) for r in found]

    def chunk_count(self) -> int:
        return int(rows(self._db, "SELECT count(*) FROM chunks")[0][0])

    def doc_freqs(self, terms: list[str]) -> list[int]:
        """How many chunks contain each term, matched as an FTS5 phrase; in one query."""
        if not terms:
            return []
        counts = ", ".join(
            "(SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?)" for _ in terms
        )
        quoted = ['"' + t.replace('"', '""') + '"' for t in terms]
        return [int(n) for n in rows(self._db, f"SELECT {counts}", quoted)[0]]

    def dated_between(self, first: str, last: str) -> list[int]:
        """Ids of the chunks dated from `first` to `last` (ISO dates, both included)."""
        found = rows(self._db, "SELECT id FROM chunks WHERE date BETWEEN ? AND ?", (first, last))
        return [int(r[0]) for r in found]

    def like_cjk(self, needles: list[str], limit: int) -> list[tuple[int, str]]:
        """Chunks whose CJK text contains any needle (the 1-2 character fallback)."""
        if not needles:
            return []
        where = " OR ".join("instr(cjk, ?) > 0" for _ in needles)
        found = rows(
            self._db,
            f"SELECT id, cjk FROM chunks WHERE cjk != '' AND ({where}) LIMIT ?",
            (*needles, limit),
        )
        return [(int(r[0]), str(r[1])) for r in found]

    def texts(self) -> list[str]:
        """Every chunk's text (the search's word associations are built from them)."""
        return [str(r[0]) for r in rows(self._db, "SELECT text FROM chunks")]

    def chunks(self, ids: Iterable[int]) -> dict[int, ChunkRow]:
        ids = list(ids)
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        found = rows(
            self._db,
            f"SELECT id, path, start_line, end_line, date, text FROM chunks WHERE id IN ({marks})",
            ids,
        )
        return {r[0]: ChunkRow(*r) for r in found}


class WriteTxn:
    """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error), bumping meta.generation."""

    def __init__(self, index: MemoryIndex, db: Database) -> None:
        self._index = index
        self._db = db

    async def __aenter__(self) -> Database:
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
