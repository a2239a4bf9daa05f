"""The memory search index: one SQLite database per workspace (index_db.py), derived from
the Markdown files under memory/, plus the vectors of its chunks in memory (vectors.py).

Vectors for the configured model are held in memory as one numpy matrix (exact cosine
k-NN), kept in step with the `chunks` table. Every access to SQLite, read or write, goes
through index_db.Database in a worker thread, whatever the index's size; `read` runs a
caller's several queries in one hop, and `read_fresh` puts a search's freshness check (the
generation read and a stat of each memory file) in the same hop, when nothing changed; a
refresh runs in the shared refresh task, so a cancelled caller never cancels it. A small
index's reads run on the loop instead (`Database.read`): for them the hop costs more.
A second process (e.g. `clawgate memory index` while the gateway runs) may write too: each
write bumps `meta.generation`, and a process that sees another's generation reloads.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from clawgate.agent.memory.bm25 import Bm25Memory
from clawgate.agent.memory.chunker import Chunk, chunk_file, content_hash
from clawgate.agent.memory.embeddings import Embedder
from clawgate.agent.memory.index_db import (
    ChunkRow,
    Database,
    FileState,
    IndexStatus,
    Reader,
    RefreshReport,
    WriteTxn,
    cjk_text,
    db_path_for,
    fetch,
    open_db,
    read_file,
    read_generation,
    scan_memory,
)
from clawgate.agent.memory.vectors import VectorMatrix
from clawgate.agent.memory.vocabulary import Vocabulary

log = logging.getLogger(__name__)

T = TypeVar("T")

EMBED_BATCH = 256
EMBED_RETRY_SECONDS = 60.0
MEMORY_DIR = "memory"
MAX_CACHED_FREQS = 50_000

# phase ("files" or "embeddings"), done, total
Progress = Callable[[str, int, int], None]


class MemoryIndex:
    """The derived index of one workspace's memory files. `refresh()` before reading."""

    def __init__(self, workspace: Path, db_path: Path, embedder: Embedder | None) -> None:
        self.workspace = workspace
        self.memory_dir = workspace / MEMORY_DIR
        self.db_path = db_path
        self.embedder = embedder
        self.vectors = VectorMatrix()
        self.vocabulary = Vocabulary()  # the chunks' content words, in step with them
        self._db: Database | None = None
        self._files: dict[str, FileState] = {}
        self._missing: dict[int, str] = {}  # chunk id -> hash, chunks with no vector yet
        self._generation = -1
        self._lock: asyncio.Lock | None = None
        self._open_lock: asyncio.Lock | None = None
        self._refreshing: asyncio.Task[RefreshReport] | None = None
        self._embed_failed_at: float | None = None
        self._closed = False
        # Document frequencies of query words, valid for one generation of the index.
        self._freqs: dict[str, int] = {}
        self._total: int | None = None
        self._freqs_generation = -1
        # How many times the state was read from the database (part of `state`).
        self._loads = 0
        # The words table's BM25 in memory; numpy only with an embedder (bm25.py).
        self.bm25 = Bm25Memory(db_path, enabled=embedder is not None)

    @classmethod
    def for_workspace(
        cls, workspace: Path, data_dir: Path, embedder: Embedder | None
    ) -> MemoryIndex:
        return cls(workspace, db_path_for(workspace, data_dir), embedder)

    def state(self) -> tuple[int, int] | None:
        """Names what a search reads now: the same pair means the same chunks and vectors
        (every write bumps the generation, a reload counts). None while some chunk still
        waits for its vector or the state is unknown: a search then is not repeatable."""
        if self._generation < 0 or self._missing:
            return None
        return self._loads, self._generation

    @property
    def model_id(self) -> str:
        return self.embedder.model_id if self.embedder else "none"

    # Lifecycle -------------------------------------------------------------------

    async def _conn(self) -> Database:
        if self._closed:
            raise RuntimeError("the memory index is closed")
        if self._db is None:
            # Two first searches at once (two chats' turns after a start) must not both
            # open it: a second connection setting WAL mode on a new file meets "database
            # is locked".
            if self._open_lock is None:
                self._open_lock = asyncio.Lock()
            async with self._open_lock:
                if self._db is None:
                    self._db = await open_db(self.db_path, self.workspace)
        return self._db

    async def close(self) -> None:
        self._closed = True
        task, self._refreshing = self._refreshing, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await self.bm25.close()
        if self._db is not None:
            db, self._db = self._db, None
            await db.close()

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
        self.vocabulary.reset(())
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
            generation, disk = await db.run(self._generation_and_scan)
            if generation != self._generation:
                await self._load_state(db)
            changed = [
                path
                for path, stat in sorted(disk.items())
                if path not in self._files or not self._files[path].same_stat(stat)
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

    def _generation_and_scan(
        self, connection: sqlite3.Connection
    ) -> tuple[int, dict[str, tuple[int, int, int]]]:
        # One hop for both: the freshness check runs before every search.
        return read_generation(connection), self._scan()

    def _scan(self) -> dict[str, tuple[int, int, int]]:
        return scan_memory(self.memory_dir, MEMORY_DIR)

    async def _read_generation(self, db: Database) -> int:
        return await db.run(read_generation)

    async def _load_state(self, db: Database) -> None:
        """Read files and vectors from the database (at start, or after another writer)."""
        self._loads += 1
        self._generation = await self._read_generation(db)
        rows = await fetch(db, "SELECT path, size, mtime_ns, ino, hash FROM files")
        self._files = {r[0]: FileState(r[1], r[2], r[3], r[4]) for r in rows}
        await db.run(lambda c: self.vocabulary.reset(c.execute("SELECT id, text FROM chunks")))
        self.vectors.clear()
        self._missing.clear()
        if self.embedder is None:
            return
        rows = await fetch(
            db,
            "SELECT c.id, c.hash, e.vector FROM chunks c LEFT JOIN embeddings e "
            "ON e.hash = c.hash AND e.model = ?",
            (self.embedder.model_id,),
        )
        ids = [r[0] for r in rows if r[2] is not None]
        self._missing = {r[0]: r[1] for r in rows if r[2] is None}
        if ids:
            import numpy as np  # only once there are vectors (an embedder is configured)

            blob = b"".join(r[2] for r in rows if r[2] is not None)
            matrix = np.frombuffer(blob, dtype=np.float32).reshape(len(ids), -1)
            self.vectors.add(ids, matrix)

    def _write(self, db: Database) -> WriteTxn:
        return WriteTxn(self, db)

    async def _index_file(self, db: Database, path: str) -> tuple[int, int]:
        """Re-chunk one file; chunks whose place and text are unchanged keep their ids."""
        file = self.workspace / path
        try:
            read = await asyncio.to_thread(read_file, file)
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
                existing = await fetch(
                    db,
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

    async def _delete_chunks(self, db: Database, path: str, keep: Iterable[int]) -> int:
        keep = set(keep)
        rows = await fetch(db, "SELECT id, text FROM chunks WHERE path = ?", (path,))
        gone = [r[0] for r in rows if r[0] not in keep]
        if gone:
            dropped = [(r[0], r[1]) for r in rows if r[0] not in keep]
            await db.executemany("DELETE FROM chunks WHERE id = ?", [(i,) for i in gone])
            await db.run(lambda _c: self.vocabulary.remove(dropped))
            self.vectors.remove(gone)
            for chunk_id in gone:
                self._missing.pop(chunk_id, None)
        return len(gone)

    async def _insert_chunks(self, db: Database, chunks: list[Chunk]) -> int:
        if not chunks:
            return 0
        rows = await fetch(db, "SELECT coalesce(max(id), 0) FROM chunks")
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
        await db.run(lambda _c: self.vocabulary.add((p[0], p[6]) for p in params))
        if self.embedder is not None:
            for n, chunk in enumerate(chunks):
                self._missing[first + n] = chunk.hash
        return len(chunks)

    async def _embed_missing(self, db: Database, progress: Progress | None) -> int:
        """Give every chunk a vector: from the cache, else from the embedder (in batches)."""
        if self.embedder is None or not self._missing:
            return 0
        if self._embed_failed_at is not None:
            if time.monotonic() - self._embed_failed_at < EMBED_RETRY_SECONDS:
                return 0
            self._embed_failed_at = None
        import numpy as np  # only with an embedder: keyword-only search never loads it

        model = self.embedder.model_id
        wanted = dict(self._missing)
        hashes = sorted(set(wanted.values()))
        cached: dict[str, bytes] = {}
        for start in range(0, len(hashes), 500):
            part = hashes[start : start + 500]
            marks = ",".join("?" * len(part))
            rows = await fetch(
                db,
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

    async def _texts_for(self, db: Database, hashes: list[str]) -> dict[str, str]:
        texts: dict[str, str] = {}
        for start in range(0, len(hashes), 500):
            part = hashes[start : start + 500]
            marks = ",".join("?" * len(part))
            rows = await fetch(db, f"SELECT hash, text FROM chunks WHERE hash IN ({marks})", part)
            texts.update({r[0]: r[1] for r in rows})
        return texts

    # Reads -----------------------------------------------------------------------

    async def read(self, work: Callable[[Reader], T]) -> T:
        """`work` over a Reader of this index, in one hop to a worker thread: a caller
        with several queries to make pays for one hop, not one per query."""
        db = await self._conn()
        return await db.read(lambda connection: work(Reader(connection)))

    async def fts(
        self, table: str, match: str, limit: int, days: tuple[str, str] | None = None
    ) -> list[tuple[int, float]]:
        """Reader.fts, on its own."""
        return await self.read(lambda r: r.fts(table, match, limit, days))

    async def doc_freqs(self, terms: list[str]) -> tuple[int, dict[str, int]]:
        """(number of chunks, chunks containing each term); terms are matched as FTS5 phrases,
        stemmed by the table's tokenizer. Counts are kept until the index changes, and the
        ones not known yet are counted in one hop."""
        if self._freqs_generation != self._generation or self._generation < 0:
            self._freqs.clear()
            self._total = None
            self._freqs_generation = self._generation
        unknown = [t for t in dict.fromkeys(terms) if t not in self._freqs]
        if self._total is None or unknown:
            known = self._total

            def count(r: Reader) -> tuple[int, list[int]]:
                counts = self.bm25.doc_freqs(self.words_state(), r, unknown)
                return (r.chunk_count() if known is None else known), counts

            total, found = await self.read(count)
            self._total = total
            self._freqs.update(zip(unknown, found, strict=True))
            if len(self._freqs) > MAX_CACHED_FREQS:
                self._freqs.clear()
        else:
            total = self._total
        return total, {t: self._freqs[t] for t in terms if t in self._freqs}

    async def read_fresh(
        self, terms: list[str], work: Callable[[Reader, int, dict[str, int]], T]
    ) -> T:
        """`refresh()`, `doc_freqs(terms)`, then `work(reader, total, freqs)`: in one hop
        when nothing changed. A search needs the index fresh and its words counted before
        it can weigh and embed its query, and then reads its candidates; all of it shares
        one visit of the worker thread, and the stat comparison that proves the visit read
        a fresh index runs back on the loop. Any change (a file, the generation, chunks
        still waiting for a vector, a refresh running) throws the visit's result away and
        takes the full way: refresh, count, then `work` in a hop of its own."""
        if self._refreshing is None or self._refreshing.done():
            if self._freqs_generation != self._generation or self._generation < 0:
                self._freqs.clear()
                self._total = None
                self._freqs_generation = self._generation
            wanted = list(dict.fromkeys(terms))
            known = {t: self._freqs[t] for t in wanted if t in self._freqs}
            unknown = [t for t in wanted if t not in known]
            cached_total = self._total
            expected = self._generation

            def visit(
                connection: sqlite3.Connection,
            ) -> tuple[int, dict[str, tuple[int, int, int]], tuple[int, list[int], T] | None]:
                generation, disk = self._generation_and_scan(connection)
                if generation != expected:
                    return generation, disk, None
                reader = Reader(connection)
                total = reader.chunk_count() if cached_total is None else cached_total
                counted = self.bm25.doc_freqs(self.words_state(), reader, unknown)
                freqs = known | dict(zip(unknown, counted, strict=True))
                return generation, disk, (total, counted, work(reader, total, freqs))

            db = await self._conn()
            generation, disk, done = await db.read(visit)
            if (
                done is not None
                and generation == self._generation >= 0
                and self._freqs_generation == generation
                and not self._missing
                and (self._refreshing is None or self._refreshing.done())
                and disk.keys() == self._files.keys()
                and all(self._files[path].same_stat(stat) for path, stat in disk.items())
            ):
                total, counted, result = done
                self._total = total
                self._freqs.update(zip(unknown, counted, strict=True))
                if len(self._freqs) > MAX_CACHED_FREQS:
                    self._freqs.clear()
                return result
        await self.refresh()
        total, freqs = await self.doc_freqs(terms)
        return await self.read(lambda reader: work(reader, total, freqs))

    def words_state(self) -> tuple[int, int]:
        return self._loads, self._generation  # the same pair, the same words table

    async def dated_between(self, first: str, last: str) -> list[int]:
        """Reader.dated_between, on its own."""
        return await self.read(lambda r: r.dated_between(first, last))

    async def chunks(self, ids: Iterable[int]) -> dict[int, ChunkRow]:
        """Reader.chunks, on its own, with their kept lines (Vocabulary.with_lines)."""
        ids = list(ids)
        return await self.read(lambda r: self.vocabulary.with_lines(r.chunks(ids)))

    async def status(self) -> IndexStatus:
        db = await self._conn()
        files = await fetch(db, "SELECT path, size, mtime_ns, ino FROM files")
        indexed = {r[0]: (r[1], r[2], r[3]) for r in files}
        chunk_count = (await fetch(db, "SELECT count(*) FROM chunks"))[0][0]
        vectors = 0
        if self.embedder is not None:
            vectors = (
                await fetch(
                    db,
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
