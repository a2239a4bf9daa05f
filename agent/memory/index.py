"""The memory search index: one SQLite database per workspace, derived from the Markdown files.

    <data_dir>/index/<hash of the workspace path>.sqlite

Tables: `files` (what was indexed: size, mtime, inode, content hash), `chunks` (path, line
range, date, content hash, text, and the text's CJK runs), two external-content FTS5 tables
over them (`chunks_fts`: porter + unicode61 over the text; `chunks_tri`: trigram over the CJK
runs), and `embeddings` (vector per (content hash, model), a cache that survives re-chunking
and model switches). Deleting the file loses nothing: the next refresh rebuilds it.

Vectors for the configured model are also held in memory as one numpy matrix (exact cosine
k-NN), kept in step with the `chunks` table. Every access to SQLite goes through aiosqlite.
A second process (e.g. `clawgate memory index` while the gateway runs) may write too: each
write bumps `meta.generation`, and a process that sees another's generation reloads.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite
import numpy as np

from clawgate.agent.memory.chunker import Chunk, chunk_file, content_hash
from clawgate.agent.memory.embeddings import Embedder
from clawgate.agent.memory.tokens import cjk_runs

log = logging.getLogger(__name__)

SCHEMA_VERSION = "1"
EMBED_BATCH = 256
EMBED_RETRY_SECONDS = 60.0
MEMORY_DIR = "memory"

# phase ("files" or "embeddings"), done, total
Progress = Callable[[str, int, int], None]

_SCHEMA = """
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


class VectorMatrix:
    """Unit vectors by chunk id in one float32 matrix; freed rows are reused."""

    def __init__(self) -> None:
        self.dim = 0
        self._vectors = np.zeros((0, 0), dtype=np.float32)
        self._ids = np.zeros(0, dtype=np.int64)
        self._slot: dict[int, int] = {}
        self._free: list[int] = []
        self._used = 0

    def __len__(self) -> int:
        return len(self._slot)

    def __contains__(self, chunk_id: int) -> bool:
        return chunk_id in self._slot

    def clear(self) -> None:
        self.__init__()  # type: ignore[misc]

    def add(self, ids: list[int], vectors: np.ndarray) -> None:
        if not ids:
            return
        if self.dim == 0 or vectors.shape[1] != self.dim:
            if self._slot and vectors.shape[1] != self.dim:
                raise ValueError(f"vector size {vectors.shape[1]} != {self.dim}")
            self.dim = vectors.shape[1]
            self._vectors = np.zeros((0, self.dim), dtype=np.float32)
        for chunk_id, vector in zip(ids, vectors, strict=True):
            slot = self._slot.get(chunk_id)
            if slot is None:
                slot = self._free.pop() if self._free else self._grow()
                self._slot[chunk_id] = slot
                self._ids[slot] = chunk_id
            self._vectors[slot] = vector

    def _grow(self) -> int:
        if self._used == len(self._ids):
            capacity = max(1024, 2 * len(self._ids))
            vectors = np.zeros((capacity, self.dim), dtype=np.float32)
            vectors[: self._used] = self._vectors[: self._used]
            ids = np.full(capacity, -1, dtype=np.int64)
            ids[: self._used] = self._ids[: self._used]
            self._vectors, self._ids = vectors, ids
        self._used += 1
        return self._used - 1

    def remove(self, ids: Iterable[int]) -> None:
        for chunk_id in ids:
            slot = self._slot.pop(chunk_id, None)
            if slot is not None:
                self._ids[slot] = -1
                self._vectors[slot] = 0.0
                self._free.append(slot)

    def top(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The k chunks of highest cosine to a unit query vector, best first."""
        if not self._slot or k <= 0 or query.shape[0] != self.dim:
            return []
        scores = self._vectors[: self._used] @ query
        ids = self._ids[: self._used]
        scores = np.where(ids >= 0, scores, -np.inf)
        k = min(k, len(self._slot))
        best = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        best = best[np.argsort(-scores[best], kind="stable")]
        return [(int(ids[i]), float(scores[i])) for i in best if ids[i] >= 0]

    def mean(self, query: np.ndarray) -> float:
        """The mean cosine of a query over every chunk: the level an unrelated text reaches."""
        if not self._slot or query.shape[0] != self.dim:
            return 0.0
        live = self._ids[: self._used] >= 0
        return float((self._vectors[: self._used][live] @ query).mean())

    def scores_for(self, query: np.ndarray, chunk_ids: Iterable[int]) -> dict[int, float]:
        if query.shape[0] != self.dim:
            return {}
        found = [(c, self._slot[c]) for c in chunk_ids if c in self._slot]
        if not found:
            return {}
        rows = self._vectors[[slot for _, slot in found]] @ query
        return {c: float(s) for (c, _), s in zip(found, rows, strict=True)}


class MemoryIndex:
    """The derived index of one workspace's memory files. `refresh()` before reading."""

    def __init__(self, workspace: Path, db_path: Path, embedder: Embedder | None) -> None:
        self.workspace = workspace
        self.memory_dir = workspace / MEMORY_DIR
        self.db_path = db_path
        self.embedder = embedder
        self.vectors = VectorMatrix()
        self._db: aiosqlite.Connection | None = None
        self._files: dict[str, FileState] = {}
        self._missing: dict[int, str] = {}  # chunk id -> hash, chunks with no vector yet
        self._generation = -1
        self._dirty: set[str] = set()
        self._lock: asyncio.Lock | None = None
        self._refreshing: asyncio.Task[RefreshReport] | None = None
        self._embed_failed_at: float | None = None
        self._closed = False

    @classmethod
    def for_workspace(
        cls, workspace: Path, data_dir: Path, embedder: Embedder | None
    ) -> MemoryIndex:
        return cls(workspace, db_path_for(workspace, data_dir), embedder)

    @property
    def model_id(self) -> str:
        return self.embedder.model_id if self.embedder else "none"

    # Lifecycle -------------------------------------------------------------------

    async def _conn(self) -> aiosqlite.Connection:
        if self._closed:
            raise RuntimeError("the memory index is closed")
        if self._db is None:
            await asyncio.to_thread(self.db_path.parent.mkdir, parents=True, exist_ok=True)
            db = await _connect(self.db_path)
            try:
                await db.execute("PRAGMA busy_timeout = 10000")
                await db.execute("PRAGMA journal_mode = WAL")
                await db.execute("PRAGMA synchronous = NORMAL")
                rows = await db.execute_fetchall(
                    "SELECT name FROM sqlite_master WHERE name = 'meta'"
                )
                version = None
                if rows:
                    found = await db.execute_fetchall("SELECT value FROM meta WHERE key = 'schema'")
                    version = found[0][0] if found else None
                if rows and version != SCHEMA_VERSION:
                    # Derived data from another version: start again.
                    await db.close()
                    await asyncio.to_thread(_delete_db_files, self.db_path)
                    db = await _connect(self.db_path)
                    await db.execute("PRAGMA busy_timeout = 10000")
                    await db.execute("PRAGMA journal_mode = WAL")
                    await db.execute("PRAGMA synchronous = NORMAL")
                await db.executescript(_SCHEMA)
                await db.execute(
                    "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema', ?), "
                    "('generation', '0'), ('workspace', ?)",
                    (SCHEMA_VERSION, str(self.workspace)),
                )
            except BaseException:
                await db.close()
                raise
            self._db = db
        return self._db

    async def close(self) -> None:
        self._closed = True
        task, self._refreshing = self._refreshing, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self._db is not None:
            db, self._db = self._db, None
            await db.close()

    def mark_dirty(self, path: str | Path) -> None:
        """Reindex this file at the next refresh even if its size and mtime look unchanged."""
        path = Path(path)
        if path.is_absolute():
            try:
                path = path.relative_to(self.workspace)
            except ValueError:
                return
        self._dirty.add(path.as_posix())

    # Refresh ---------------------------------------------------------------------

    async def refresh(self, progress: Progress | None = None) -> RefreshReport:
        """Bring the index up to date with the files: a stat of each memory file when
        nothing changed. Concurrent callers share one run; a caller that is cancelled
        (e.g. a recall timeout) does not cancel it."""
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = asyncio.create_task(self._refresh(progress))
        return await asyncio.shield(self._refreshing)

    async def rebuild(self, progress: Progress | None = None) -> RefreshReport:
        """Forget every file and chunk and index again; cached embeddings are kept."""
        if self._refreshing is not None and not self._refreshing.done():
            await asyncio.shield(self._refreshing)
        db = await self._conn()
        async with self._write(db):
            await db.execute("DELETE FROM chunks")
            await db.execute("DELETE FROM files")
        self._files.clear()
        self._missing.clear()
        self.vectors.clear()
        report = await self.refresh(progress)
        await db.execute("DELETE FROM embeddings WHERE hash NOT IN (SELECT hash FROM chunks)")
        return report

    def _guard(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def _refresh(self, progress: Progress | None) -> RefreshReport:
        async with self._guard():
            db = await self._conn()
            if await self._read_generation(db) != self._generation:
                await self._load_state(db)
            disk = await asyncio.to_thread(self._scan)
            dirty, self._dirty = self._dirty, set()
            changed = [
                path
                for path, stat in sorted(disk.items())
                if path in dirty or path not in self._files or not self._files[path].same_stat(stat)
            ]
            removed = sorted(set(self._files) - set(disk))
            added = removed_chunks = 0
            for number, path in enumerate(changed, 1):
                plus, minus = await self._index_file(db, path)
                added += plus
                removed_chunks += minus
                if progress:
                    progress("files", number, len(changed))
            if removed:
                async with self._write(db):
                    for path in removed:
                        removed_chunks += await self._delete_chunks(db, path, keep=())
                        await db.execute("DELETE FROM files WHERE path = ?", (path,))
                        self._files.pop(path, None)
            embedded = await self._embed_missing(db, progress)
            return RefreshReport(len(changed), len(removed), added, removed_chunks, embedded)

    def _scan(self) -> dict[str, tuple[int, int, int]]:
        found: dict[str, tuple[int, int, int]] = {}
        try:
            entries = list(os.scandir(self.memory_dir))
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
            found[f"{MEMORY_DIR}/{entry.name}"] = (info.st_size, info.st_mtime_ns, info.st_ino)
        return found

    async def _read_generation(self, db: aiosqlite.Connection) -> int:
        rows = await db.execute_fetchall("SELECT value FROM meta WHERE key = 'generation'")
        return int(rows[0][0]) if rows else 0

    async def _load_state(self, db: aiosqlite.Connection) -> None:
        """Read files and vectors from the database (at start, or after another writer)."""
        self._generation = await self._read_generation(db)
        rows = await db.execute_fetchall("SELECT path, size, mtime_ns, ino, hash FROM files")
        self._files = {r[0]: FileState(r[1], r[2], r[3], r[4]) for r in rows}
        self.vectors.clear()
        self._missing.clear()
        if self.embedder is None:
            return
        rows = await db.execute_fetchall(
            "SELECT c.id, c.hash, e.vector FROM chunks c LEFT JOIN embeddings e "
            "ON e.hash = c.hash AND e.model = ?",
            (self.embedder.model_id,),
        )
        ids = [r[0] for r in rows if r[2] is not None]
        self._missing = {r[0]: r[1] for r in rows if r[2] is None}
        if ids:
            blob = b"".join(r[2] for r in rows if r[2] is not None)
            matrix = np.frombuffer(blob, dtype=np.float32).reshape(len(ids), -1)
            self.vectors.add(ids, matrix)

    def _write(self, db: aiosqlite.Connection) -> _WriteTxn:
        return _WriteTxn(self, db)

    async def _index_file(self, db: aiosqlite.Connection, path: str) -> tuple[int, int]:
        """Re-chunk one file; chunks whose place and text are unchanged keep their ids."""
        file = self.workspace / path
        try:
            read = await asyncio.to_thread(_read_file, file)
        except FileNotFoundError:
            return 0, 0
        text, stat = read
        digest = content_hash(text)
        state = FileState(stat[0], stat[1], stat[2], digest)
        old = self._files.get(path)
        added = removed = 0
        async with self._write(db):
            if old is None or old.hash != digest:
                chunks = await asyncio.to_thread(chunk_file, path, text)
                existing = await db.execute_fetchall(
                    "SELECT id, start_line, end_line, date, hash FROM chunks WHERE path = ?",
                    (path,),
                )
                by_key = {(r[1], r[2], r[3], r[4]): r[0] for r in existing}
                fresh = [
                    c for c in chunks if (c.start_line, c.end_line, c.date, c.hash) not in by_key
                ]
                keep = {
                    by_key[k]
                    for c in chunks
                    if (k := (c.start_line, c.end_line, c.date, c.hash)) in by_key
                }
                removed = await self._delete_chunks(db, path, keep=keep)
                added = await self._insert_chunks(db, fresh)
            await db.execute(
                "INSERT OR REPLACE INTO files(path, size, mtime_ns, ino, hash) VALUES (?,?,?,?,?)",
                (path, state.size, state.mtime_ns, state.ino, state.hash),
            )
        self._files[path] = state
        return added, removed

    async def _delete_chunks(self, db: aiosqlite.Connection, path: str, keep: Iterable[int]) -> int:
        keep = set(keep)
        rows = await db.execute_fetchall("SELECT id FROM chunks WHERE path = ?", (path,))
        gone = [r[0] for r in rows if r[0] not in keep]
        if gone:
            await db.executemany("DELETE FROM chunks WHERE id = ?", [(i,) for i in gone])
            self.vectors.remove(gone)
            for chunk_id in gone:
                self._missing.pop(chunk_id, None)
        return len(gone)

    async def _insert_chunks(self, db: aiosqlite.Connection, chunks: list[Chunk]) -> int:
        if not chunks:
            return 0
        rows = await db.execute_fetchall("SELECT coalesce(max(id), 0) FROM chunks")
        first = int(rows[0][0]) + 1
        params = [
            (first + n, c.path, c.start_line, c.end_line, c.date, c.hash, c.text, cjk_text(c.text))
            for n, c in enumerate(chunks)
        ]
        await db.executemany(
            "INSERT INTO chunks(id, path, start_line, end_line, date, hash, text, cjk) "
            "VALUES (?,?,?,?,?,?,?,?)",
            params,
        )
        if self.embedder is not None:
            for n, chunk in enumerate(chunks):
                self._missing[first + n] = chunk.hash
        return len(chunks)

    async def _embed_missing(self, db: aiosqlite.Connection, progress: Progress | None) -> int:
        """Give every chunk a vector: from the cache, else from the embedder (in batches)."""
        if self.embedder is None or not self._missing:
            return 0
        if self._embed_failed_at is not None:
            if time.monotonic() - self._embed_failed_at < EMBED_RETRY_SECONDS:
                return 0
            self._embed_failed_at = None
        model = self.embedder.model_id
        wanted = dict(self._missing)
        hashes = sorted(set(wanted.values()))
        cached: dict[str, bytes] = {}
        for start in range(0, len(hashes), 500):
            part = hashes[start : start + 500]
            marks = ",".join("?" * len(part))
            rows = await db.execute_fetchall(
                f"SELECT hash, vector FROM embeddings WHERE model = ? AND hash IN ({marks})",
                (model, *part),
            )
            cached.update({r[0]: r[1] for r in rows})
        to_embed = [h for h in hashes if h not in cached]
        texts = await self._texts_for(db, to_embed)
        done = 0
        try:
            for start in range(0, len(to_embed), EMBED_BATCH):
                batch = to_embed[start : start + EMBED_BATCH]
                vectors = await self.embedder.embed([texts[h] for h in batch])
                blobs = [np.ascontiguousarray(v, dtype=np.float32).tobytes() for v in vectors]
                async with self._write(db):
                    await db.executemany(
                        "INSERT OR REPLACE INTO embeddings(hash, model, vector) VALUES (?,?,?)",
                        [(h, model, b) for h, b in zip(batch, blobs, strict=True)],
                    )
                cached.update(zip(batch, blobs, strict=True))
                done += len(batch)
                if progress:
                    progress("embeddings", done, len(to_embed))
        except Exception as exc:
            # Keyword search goes on; vectors are tried again later.
            self._embed_failed_at = time.monotonic()
            log.warning("memory index: embedding with %s failed: %s", model, exc)
        ids = [i for i, h in wanted.items() if h in cached and i in self._missing]
        if ids:
            matrix = np.frombuffer(b"".join(cached[wanted[i]] for i in ids), dtype=np.float32)
            self.vectors.add(ids, matrix.reshape(len(ids), -1))
            for chunk_id in ids:
                self._missing.pop(chunk_id, None)
        return done

    async def _texts_for(self, db: aiosqlite.Connection, hashes: list[str]) -> dict[str, str]:
        texts: dict[str, str] = {}
        for start in range(0, len(hashes), 500):
            part = hashes[start : start + 500]
            marks = ",".join("?" * len(part))
            rows = await db.execute_fetchall(
                f"SELECT hash, text FROM chunks WHERE hash IN ({marks})", part
            )
            texts.update({r[0]: r[1] for r in rows})
        return texts

    # Reads -----------------------------------------------------------------------

    async def fts(
        self, table: str, match: str, limit: int, days: tuple[str, str] | None = None
    ) -> list[tuple[int, float]]:
        """(chunk id, -bm25) best first; `match` must already be a safe FTS5 query. With
        `days` (first, last ISO dates) only chunks dated within them."""
        assert table in ("chunks_fts", "chunks_tri")
        db = await self._conn()
        where = ""
        params: tuple[str, ...] = ()
        if days is not None:
            where = " AND rowid IN (SELECT id FROM chunks WHERE date BETWEEN ? AND ?)"
            params = days
        rows = await db.execute_fetchall(
            f"SELECT rowid, -bm25({table}) FROM {table} WHERE {table} MATCH ?{where} "
            "ORDER BY rank LIMIT ?",
            (match, *params, limit),
        )
        return [(int(r[0]), float(r[1])) for r in rows]

    async def doc_freqs(self, terms: list[str]) -> tuple[int, dict[str, int]]:
        """(number of chunks, chunks containing each term); terms are matched as FTS5 phrases,
        stemmed by the table's tokenizer."""
        db = await self._conn()
        total = (await db.execute_fetchall("SELECT count(*) FROM chunks"))[0][0]
        found = {}
        for term in terms:
            quoted = '"' + term.replace('"', '""') + '"'
            rows = await db.execute_fetchall(
                "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (quoted,)
            )
            found[term] = int(rows[0][0])
        return int(total), found

    async def dated_between(self, first: str, last: str) -> list[int]:
        """Ids of the chunks dated from `first` to `last` (ISO dates, both included)."""
        db = await self._conn()
        rows = await db.execute_fetchall(
            "SELECT id FROM chunks WHERE date BETWEEN ? AND ?", (first, last)
        )
        return [int(r[0]) for r in rows]

    async def like_cjk(self, needles: list[str], limit: int) -> list[tuple[int, str]]:
        """Chunks whose CJK text contains any needle (the 1-2 character fallback)."""
        if not needles:
            return []
        db = await self._conn()
        where = " OR ".join("instr(cjk, ?) > 0" for _ in needles)
        rows = await db.execute_fetchall(
            f"SELECT id, cjk FROM chunks WHERE cjk != '' AND ({where}) LIMIT ?",
            (*needles, limit),
        )
        return [(int(r[0]), str(r[1])) for r in rows]

    async def chunks(self, ids: Iterable[int]) -> dict[int, ChunkRow]:
        ids = list(ids)
        if not ids:
            return {}
        db = await self._conn()
        marks = ",".join("?" * len(ids))
        rows = await db.execute_fetchall(
            f"SELECT id, path, start_line, end_line, date, text FROM chunks WHERE id IN ({marks})",
            ids,
        )
        return {r[0]: ChunkRow(*r) for r in rows}

    async def status(self) -> IndexStatus:
        db = await self._conn()
        files = await db.execute_fetchall("SELECT path, size, mtime_ns, ino FROM files")
        indexed = {r[0]: (r[1], r[2], r[3]) for r in files}
        chunk_count = (await db.execute_fetchall("SELECT count(*) FROM chunks"))[0][0]
        vectors = 0
        if self.embedder is not None:
            vectors = (
                await db.execute_fetchall(
                    "SELECT count(*) FROM chunks c JOIN embeddings e "
                    "ON e.hash = c.hash AND e.model = ?",
                    (self.embedder.model_id,),
                )
            )[0][0]
        disk = await asyncio.to_thread(self._scan)
        dirty = sorted(
            {p for p, stat in disk.items() if indexed.get(p) != stat} | (set(indexed) - set(disk))
        )
        size = 0
        for suffix in ("", "-wal", "-shm"):
            try:
                size += os.stat(f"{self.db_path}{suffix}").st_size
            except OSError:
                pass
        return IndexStatus(
            self.db_path, len(indexed), chunk_count, self.model_id, vectors, dirty, size
        )


class _WriteTxn:
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

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
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


def _connect(db_path: Path) -> aiosqlite.Connection:
    db = aiosqlite.connect(db_path, isolation_level=None)
    # aiosqlite's worker thread is not a daemon: an index its owner never closed would keep
    # the interpreter from exiting. The data is derived and SQLite (WAL) survives a kill.
    thread = getattr(db, "_thread", None)
    if thread is not None and not thread.is_alive():
        thread.daemon = True
    return db


def _delete_db_files(db_path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)


def _read_file(path: Path) -> tuple[str, tuple[int, int, int]]:
    with path.open("rb") as handle:
        info = os.fstat(handle.fileno())
        data = handle.read()
    return data.decode("utf-8", errors="replace"), (info.st_size, info.st_mtime_ns, info.st_ino)
