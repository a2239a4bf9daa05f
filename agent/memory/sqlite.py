"""The memory index's SQLite plumbing: schema, connection, small query helpers.

Every access goes through aiosqlite, whose connection runs in its own thread.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import aiosqlite

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


def connect(db_path: Path) -> aiosqlite.Connection:
    db = aiosqlite.connect(db_path, isolation_level=None)
    # aiosqlite's worker thread is not a daemon: an index its owner never closed would keep
    # the interpreter from exiting. The data is derived and SQLite (WAL) survives a kill.
    thread = getattr(db, "_thread", None)
    if thread is not None and not thread.is_alive():
        thread.daemon = True
    return db


async def scalar(db: aiosqlite.Connection, sql: str, params: Iterable[Any] = ()) -> Any:
    """The first column of the first row, or None when the query returns no row."""
    async with db.execute(sql, params) as cursor:
        row = await cursor.fetchone()
    return None if row is None else row[0]


def delete_db_files(db_path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
