"""Search across past conversations: the session transcripts themselves (sessions/*.jsonl
and sessions/archive/*.jsonl), not only what consolidation summarised from them.

The index is derived data, one SQLite database per workspace beside the memory index
(<data_dir>/index/sessions-<hash>.sqlite, 0600): deleting it loses nothing. It follows the
transcripts incrementally by byte offset: each file's indexed length is kept, and a refresh
reads only the bytes appended since, up to the last complete line (a line still being
written is read next time). A transcript moved to sessions/archive/ by /new keeps its inode,
so its rows are carried over to the new path without reading it again; a file that shrank
or was replaced is read again from its start.

Indexed: user and assistant messages with text (tool calls and results, records and the
header are not what anyone said). Each hit names the conversation (the session key from the
file's header), the time (the message's timestamp) and the speaker: "assistant", the
group member a group message is attributed to ("[Name] text"), else "user".

Who may search: the owner, every transcript (groups' included). Any other chat, nobody's:
`TranscriptIndex.search` answers nothing unless the viewer's trust is owner, so a group's
transcript is never searchable by one of its members, nor an `allowed` chat's by another.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clawgate.agent.memory.coverage import Cover, terms
from clawgate.agent.memory.gather import MAX_NEEDLES
from clawgate.agent.memory.index_db import best_matches, cjk_text
from clawgate.agent.memory.query import keyword_query
from clawgate.agent.memory.search import snippet
from clawgate.kernel.bus import Trust
from clawgate.kernel.storage import make_dirs

SCHEMA_VERSION = "1"
_GROUP_SPEAKER = re.compile(r"^\[([^\]\n]{1,64})\] ")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS files(
    path TEXT PRIMARY KEY, dev INTEGER, ino INTEGER, offset INTEGER, session TEXT);
CREATE TABLE IF NOT EXISTS messages(
    id INTEGER PRIMARY KEY, path TEXT, session TEXT, seq INTEGER, speaker TEXT, ts TEXT,
    text TEXT, cjk TEXT);
CREATE INDEX IF NOT EXISTS messages_path ON messages(path);
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(
    text, content='messages', content_rowid='id', tokenize='porter unicode61');
CREATE VIRTUAL TABLE IF NOT EXISTS messages_tri USING fts5(
    cjk, content='messages', content_rowid='id', tokenize='trigram');
"""


@dataclass(frozen=True)
class TranscriptHit:
    """One message that matched: which conversation, when, who said it."""

    session: str
    timestamp: str
    speaker: str
    seq: int
    path: str  # the transcript, workspace-relative
    score: float  # the share of the question it holds (by word), x 0.5..1 by its BM25
    snippet: str

    def as_json(self) -> dict[str, object]:
        return {
            "session": self.session,
            "timestamp": self.timestamp,
            "speaker": self.speaker,
            "seq": self.seq,
            "path": self.path,
            "score": round(self.score, 4),
            "snippet": self.snippet,
        }


@dataclass(frozen=True)
class TranscriptRefresh:
    files: int
    messages_added: int
    bytes_read: int


def db_path_for(workspace: Path, data_dir: Path) -> Path:
    key = hashlib.sha256(str(workspace.expanduser().resolve()).encode()).hexdigest()[:16]
    return data_dir.expanduser() / "index" / f"sessions-{key}.sqlite"


class TranscriptIndex:
    """The transcripts' search index; one connection, used only in its own thread."""

    def __init__(self, workspace: Path, db_path: Path) -> None:
        self.workspace = workspace
        self.db_path = db_path
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="transcripts")
        self._db: sqlite3.Connection | None = None
        self._lock = asyncio.Lock()

    @classmethod
    def for_workspace(cls, workspace: Path, data_dir: Path) -> TranscriptIndex:
        return cls(workspace, db_path_for(workspace, data_dir))

    async def close(self) -> None:
        def shut() -> None:
            if self._db is not None:
                self._db.close()
                self._db = None

        await self._run(shut)
        self._thread.shutdown(wait=True)

    async def _run(self, work: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._thread, work)

    async def refresh(self) -> TranscriptRefresh:
        """Read what was appended to each transcript since the last refresh."""
        async with self._lock:
            return await self._run(self._refresh)

    async def search(
        self, query: str, trust: Trust, limit: int = 6, *, refresh: bool = True
    ) -> list[TranscriptHit]:
        """The messages that best match `query`, for a viewer of `trust`: only the owner
        searches transcripts (see the module's docstring)."""
        if not trust.is_owner or not query.strip():
            return []
        if refresh:
            await self.refresh()
        return await self._run(lambda: self._search(query, limit))

    # In the index's thread -------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            make_dirs(self.db_path.parent)
            fresh = not self.db_path.exists()
            db = sqlite3.connect(self.db_path)
            if fresh:
                os.chmod(self.db_path, 0o600)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
            found = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if found is None:
                db.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
                db.commit()
            self._db = db
        return self._db

    def _transcripts(self) -> dict[str, os.stat_result]:
        found = {}
        sessions = self.workspace / "sessions"
        for folder in (sessions, sessions / "archive"):
            try:
                names = os.listdir(folder)
            except OSError:
                continue
            for name in names:
                if name.endswith(".jsonl"):
                    path = folder / name
                    try:
                        found[path.relative_to(self.workspace).as_posix()] = path.stat()
                    except OSError:
                        continue
        return found

    def _refresh(self) -> TranscriptRefresh:
        db = self._conn()
        disk = self._transcripts()
        known = {
            row[0]: (row[1], row[2], row[3], row[4])
            for row in db.execute("SELECT path, dev, ino, offset, session FROM files")
        }
        # A transcript /new moved to the archive: same file, new name; nothing is read again.
        # (A fresh transcript may already have taken the old name.)
        by_inode = {
            (v[0], v[1]): p
            for p, v in known.items()
            if p not in disk or (disk[p].st_dev, disk[p].st_ino) != (v[0], v[1])
        }
        for path, stat in disk.items():
            old = by_inode.get((stat.st_dev, stat.st_ino))
            if path not in known and old is not None:
                db.execute("UPDATE files SET path = ? WHERE path = ?", (path, old))
                db.execute("UPDATE messages SET path = ? WHERE path = ?", (path, old))
                known[path] = known.pop(old)
        for path in set(known) - set(disk):
            self._forget(db, path)
            del known[path]
        added = read = 0
        for path, stat in disk.items():
            dev, ino, offset, session = known.get(path, (None, None, 0, None))
            if (dev, ino) != (stat.st_dev, stat.st_ino) or stat.st_size < offset:
                if path in known:
                    self._forget(db, path)
                offset, session = 0, None
            if stat.st_size == offset:
                continue
            messages, consumed, session = _read_from(self.workspace / path, offset, session)
            read += consumed
            for seq, speaker, ts, text in messages:
                cur = db.execute(
                    "INSERT INTO messages(path, session, seq, speaker, ts, text, cjk) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (path, session, seq, speaker, ts, text, cjk_text(text)),
                )
                rowid = cur.lastrowid
                db.execute("INSERT INTO messages_fts(rowid, text) VALUES (?, ?)", (rowid, text))
                db.execute(
                    "INSERT INTO messages_tri(rowid, cjk) VALUES (?, ?)", (rowid, cjk_text(text))
                )
            added += len(messages)
            db.execute(
                "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?)",
                (path, stat.st_dev, stat.st_ino, offset + consumed, session),
            )
        db.commit()
        return TranscriptRefresh(len(disk), added, read)

    def _forget(self, db: sqlite3.Connection, path: str) -> None:
        rows = db.execute("SELECT id, text, cjk FROM messages WHERE path = ?", (path,)).fetchall()
        for rowid, text, cjk in rows:
            db.execute(
                "INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', ?, ?)",
                (rowid, text),
            )
            db.execute(
                "INSERT INTO messages_tri(messages_tri, rowid, cjk) VALUES ('delete', ?, ?)",
                (rowid, cjk),
            )
        db.execute("DELETE FROM messages WHERE path = ?", (path,))
        db.execute("DELETE FROM files WHERE path = ?", (path,))

    def _search(self, query: str, limit: int) -> list[TranscriptHit]:
        db = self._conn()
        plan = keyword_query(query)
        pool = limit * 4
        bm25: dict[int, float] = {}
        for table, match in (("messages_fts", plan.match), ("messages_tri", plan.trigram)):
            if not match:
                continue
            found = db.execute(best_matches(table), (match, pool)).fetchall()
            best = max((x for _, x in found), default=0.0) or 1.0
            for rowid, x in found:
                bm25[rowid] = max(bm25.get(rowid, 0.0), max(x, 0.0) / best)
        needles = list(dict.fromkeys([*plan.short_cjk, *plan.cjk_bigrams]))[:MAX_NEEDLES]
        if needles:
            where = " OR ".join("instr(cjk, ?) > 0" for _ in needles)
            found = db.execute(
                f"SELECT id, cjk FROM messages WHERE cjk != '' AND ({where}) "
                "ORDER BY id DESC LIMIT ?",
                (*needles, pool * 4),
            ).fetchall()
            for rowid, cjk in found:
                share = sum(1 for n in needles if n in cjk) / len(needles)
                bm25[rowid] = max(bm25.get(rowid, 0.0), 0.5 * share**0.5)
        if not bm25:
            return []
        marks = ",".join("?" * len(bm25))
        rows = db.execute(
            f"SELECT id, session, seq, speaker, ts, path, text FROM messages WHERE id IN ({marks})",
            list(bm25),
        ).fetchall()
        weights = Cover(dict.fromkeys(terms(query), 1.0))
        scored = []
        for rowid, session, seq, speaker, ts, path, text in rows:
            # How much of the question the message (and its speaker) holds, then BM25.
            cover = weights.weighted(f"{speaker} {text}") if weights.weights else 1.0
            value = cover * (0.5 + 0.5 * bm25[rowid])
            scored.append((value, rowid, ts, session, seq, speaker, path, text))
        # Newer messages (higher ids) first among equals.
        scored.sort(key=lambda item: (-item[0], -item[1]))
        return [
            TranscriptHit(
                session=session,
                timestamp=ts,
                speaker=speaker,
                seq=seq,
                path=path,
                score=value,
                snippet=snippet(text, plan.terms),
            )
            for value, _rowid, ts, session, seq, speaker, path, text in scored[:limit]
        ]


def _read_from(
    path: Path, offset: int, session: str | None
) -> tuple[list[tuple[int, str, str, str]], int, str | None]:
    """Messages in the complete lines after `offset`: (seq, speaker, timestamp, text), the
    bytes consumed, and the session key (from the header, else from the file name)."""
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            data = handle.read()
    except OSError:
        return [], 0, session
    end = data.rfind(b"\n")
    if end < 0:
        return [], 0, session
    messages = []
    for raw in data[: end + 1].splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(line, dict):
            continue
        if line.get("type") == "session" and isinstance(line.get("key"), str):
            session = line["key"]
            continue
        found = _message(line)
        if found is not None:
            messages.append(found)
    if session is None:
        session = _key_from_name(path.name)
    return messages, end + 1, session


def _message(line: dict[str, Any]) -> tuple[int, str, str, str] | None:
    role = line.get("role")
    if role not in ("user", "assistant") or line.get("tool_calls"):
        return None
    content = line.get("content")
    if isinstance(content, list):
        content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    if not isinstance(content, str) or not content.strip():
        return None
    speaker = str(role)
    if role == "user" and (named := _GROUP_SPEAKER.match(content)):
        speaker, content = named.group(1), content[named.end() :]
    seq = line.get("seq")
    return (seq if isinstance(seq, int) else 0, speaker, str(line.get("timestamp", "")), content)


def _key_from_name(name: str) -> str:
    """telegram_123.jsonl, archive/telegram_123.20261102T101500.jsonl -> telegram:123."""
    stem = name.split(".", 1)[0]
    channel, _, chat = stem.partition("_")
    return f"{channel}:{chat}" if chat else stem
