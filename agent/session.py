"""JSONL sessions: one append-only file per session key, crash-safe at every byte.

File layout (`<workspace>/sessions/<name>.jsonl`):
  line 1   {"type": "session", "key": "telegram:123", "version": 1, "created_at": ..., "first_seq": 1}
  message  {"seq": 7, "role": "user", "content": "...", "timestamp": "...Z", ...}
  record   {"type": "state" | "compaction" | "delivery" | ..., ...}   (no "role")
"""

from __future__ import annotations

import asyncio
import bisect
import json
import logging
import re
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from clawgate.agent.text import without_surrogates
from clawgate.kernel.storage import DiskWriter

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
# message_id: the platform's id of a user message, so a re-delivered message is recognised.
MESSAGE_FIELDS = ("role", "content", "tool_calls", "tool_call_id", "name", "message_id")
_SAFE = re.compile(r"[A-Za-z0-9-]")


def session_filename(key: str) -> str:
    """Map a session key to a file stem: ':' -> '_', anything else unsafe -> %XX per UTF-8 byte.

    '_' itself is escaped, so the mapping is injective: no two keys share a file.
    """
    out: list[str] = []
    for char in key:
        if char == ":":
            out.append("_")
        elif _SAFE.fullmatch(char):
            out.append(char)
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8"))
    return "".join(out)


def _seq(message: dict[str, Any]) -> int:
    return int(message["seq"])


def utc_now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Session:
    """The in-memory view of one session file. Mutated only through SessionStore."""

    key: str
    path: Path
    messages: list[dict[str, Any]] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)
    next_seq: int = 1
    first_seq: int = 1  # seqs continue across /new: the first seq this transcript holds
    # The file ends without a newline (a torn write): the next append must start a new line.
    needs_newline: bool = False
    # How many turns / consolidations are using this object; pinned sessions are not evicted.
    pins: int = 0
    # Platform message id -> seq of the user message that carried it.
    message_ids: dict[str, int] = field(default_factory=dict)
    # Seqs of replies handed to the outbound queue by this process (not persisted).
    handed_out: set[int] = field(default_factory=set)

    @contextmanager
    def pinned(self) -> Iterator[None]:
        self.pins += 1
        try:
            yield
        finally:
            self.pins -= 1

    @property
    def last_consolidated(self) -> int:
        """Seq up to which messages are covered by memory (0 = none)."""
        return int(self.state.get("last_consolidated", 0))

    def unconsolidated(self) -> list[dict[str, Any]]:
        # Seqs only grow, so a bisect keeps this flat however long the session gets.
        start = bisect.bisect_right(self.messages, self.last_consolidated, key=_seq)
        return self.messages[start:]

    def reply_to(self, user_seq: int) -> dict[str, Any] | None:
        """The final assistant reply that answered the user message at `user_seq`, if any."""
        start = bisect.bisect_right(self.messages, user_seq, key=_seq)
        for message in self.messages[start:]:
            if message["role"] == "user":
                return None
            if message["role"] == "assistant" and not message.get("tool_calls"):
                return message
        return None

    def command_ids(self) -> set[str]:
        return {str(r.get("message_id")) for r in self.records_of("command")}

    def delivered(self, seq: int) -> bool:
        return any(
            r.get("seq") == seq and r.get("status") == "sent" for r in self.records_of("delivery")
        )

    def records_of(self, kind: str) -> Iterator[dict[str, Any]]:
        return (r for r in self.records if r.get("type") == kind)


class SessionStore:
    """Loads, caches (LRU) and appends to session files under `<workspace>/sessions/`."""

    def __init__(
        self, directory: Path, *, writer: DiskWriter | None = None, cache_size: int = 256
    ) -> None:
        self.directory = directory
        self.archive_dir = directory / "archive"
        self.writer = writer or DiskWriter()
        self._cache: OrderedDict[str, Session] = OrderedDict()
        self._cache_size = cache_size
        self._loading: dict[str, asyncio.Future[Session]] = {}

    def path_for(self, key: str) -> Path:
        return self.directory / f"{session_filename(key)}.jsonl"

    async def get(self, key: str) -> Session:
        """The session for `key`, loaded from disk on first use (or created empty)."""
        session = self._cache.get(key)
        if session is not None:
            self._cache.move_to_end(key)
            return session
        # Two callers missing the cache at once must share one load: two Session objects for
        # one file would hand out the same seq twice.
        loading = self._loading.get(key)
        if loading is None:
            loading = asyncio.ensure_future(
                asyncio.to_thread(load_session, self.path_for(key), key)
            )
            self._loading[key] = loading
            try:
                session = await asyncio.shield(loading)
            finally:
                self._loading.pop(key, None)
            self._cache[key] = session
            self._evict()
            return session
        return await asyncio.shield(loading)

    def _evict(self) -> None:
        # A session someone is working on (a turn, a consolidation) stays: a second object for
        # the same file would not see the first one's appends.
        for key in list(self._cache):
            if len(self._cache) <= self._cache_size:
                break
            if not self._cache[key].pins:
                del self._cache[key]

    def forget(self, key: str) -> None:
        self._cache.pop(key, None)

    def _ensure_header(self, session: Session) -> None:
        if session.path.exists():
            return
        self.writer.mkdir(self.directory)
        header = {
            "type": "session",
            "key": session.key,
            "version": FORMAT_VERSION,
            "created_at": utc_now_iso(),
            "first_seq": session.next_seq,
        }
        self.writer.append(session.path, json.dumps(header, ensure_ascii=False) + "\n")
        session.needs_newline = False

    def _write(self, session: Session, record: dict[str, Any]) -> None:
        self._ensure_header(session)
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:
            # A lone UTF-16 surrogate (e.g. "\ud800" from a platform's JSON) is no character and
            # cannot be UTF-8. It becomes U+FFFD in the record itself, so what is cached (and
            # later sent to the model, which would reject it too) matches what is on disk.
            record.update(without_surrogates(record))
            line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        if session.needs_newline:
            line = "\n" + line
        self.writer.append(session.path, line)
        session.needs_newline = False

    def append_message(self, session: Session, message: dict[str, Any]) -> dict[str, Any]:
        """Persist one message with the next seq and a timestamp; returns the stored dict.

        One write() per record, no fsync: call `sync` once per turn.
        """
        stored: dict[str, Any] = {"seq": session.next_seq}
        for name in MESSAGE_FIELDS:
            if message.get(name) is not None:
                stored[name] = message[name]
        stored.setdefault("content", "")
        stored["timestamp"] = message.get("timestamp") or utc_now_iso()
        self._write(session, stored)
        _index_message(session, stored)
        session.next_seq += 1
        return stored

    def append_record(self, session: Session, kind: str, **fields: Any) -> dict[str, Any]:
        """Persist a non-message record (`type` = kind). `state` records update session.state."""
        record = {"type": kind, **fields, "timestamp": utc_now_iso()}
        self._write(session, record)
        _apply_record(session, record)
        return record

    async def sync(self, session: Session) -> None:
        """Make this session's appends durable (once per turn)."""
        await asyncio.to_thread(self.writer.fsync, session.path)

    async def archive(self, session: Session) -> Path | None:
        """Move the transcript to sessions/archive/ and start the key afresh; returns the archive path.

        The new session continues the seq numbering, so seqs stay unique per key.
        """
        self.forget(session.key)
        if not session.path.exists():
            return None
        self.writer.mkdir(self.archive_dir)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        target = self.archive_dir / f"{session.path.stem}.{stamp}.jsonl"
        await asyncio.to_thread(self.writer.move, session.path, target)
        fresh = Session(
            key=session.key,
            path=session.path,
            next_seq=session.next_seq,
            first_seq=session.next_seq,
        )
        # The old object now stands for the archived transcript: a consolidation still running
        # on it appends its records there, never to the fresh file.
        session.path = target
        self._cache[session.key] = fresh
        return target

    def list_archived(self) -> list[Path]:
        return sorted(self.archive_dir.glob("*.jsonl")) if self.archive_dir.exists() else []

    def list_keys(self) -> list[tuple[str, Path]]:
        """(key, path) for every live session file, read from each file's header line."""
        found: list[tuple[str, Path]] = []
        if not self.directory.exists():
            return found
        for path in sorted(self.directory.glob("*.jsonl")):
            found.append((read_key(path) or path.stem, path))
        return found


def _index_message(session: Session, message: dict[str, Any]) -> None:
    session.messages.append(message)
    if message.get("message_id") and message.get("role") == "user":
        session.message_ids[str(message["message_id"])] = int(message["seq"])


def _apply_record(session: Session, record: dict[str, Any]) -> None:
    """Fold one record into the session; raises on a malformed field before changing it."""
    kind = record.get("type")
    if kind == "session":
        first_seq = int(record.get("first_seq", 1))
        session.first_seq = first_seq
        session.next_seq = max(session.next_seq, first_seq)
        return
    if kind == "state":
        if "last_consolidated" in record:
            int(record["last_consolidated"])
        session.state.update({k: v for k, v in record.items() if k not in ("type", "timestamp")})
        return
    # Fields that later code does arithmetic on must be numbers, or the record is not kept.
    numbers = {"consolidation": ("from_seq", "to_seq"), "compaction": ("up_to_seq",)}
    for name in numbers.get(str(kind), ()):
        record[name] = int(record[name])
    session.records.append(record)
    if kind == "consolidation":
        # The covered range and the advance are one record, so one write() makes both land.
        session.state["last_consolidated"] = max(session.last_consolidated, record["to_seq"])


def read_key(path: Path) -> str | None:
    try:
        with path.open("r", encoding="utf-8", errors="replace") as handle:
            first = json.loads(handle.readline())
    except (OSError, ValueError):
        return None
    return first.get("key") if isinstance(first, dict) else None


def load_session(path: Path, key: str) -> Session:
    """Read a session file. Torn or corrupt lines are skipped with a warning, never fatal."""
    session = Session(key=key, path=path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return session
    if raw and not raw.endswith(b"\n"):
        session.needs_newline = True
    max_seq = 0
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line.decode("utf-8"))
            if not isinstance(record, dict):
                raise ValueError("not an object")
        except (ValueError, UnicodeDecodeError):
            log.warning("%s:%d: skipped an unreadable line (torn write?)", path.name, number)
            continue
        if "role" in record and isinstance(record.get("seq"), int):
            _index_message(session, record)
            max_seq = max(max_seq, record["seq"])
        elif "type" in record:
            try:
                _apply_record(session, record)
            except (KeyError, TypeError, ValueError, OverflowError):
                log.warning("%s:%d: skipped a record with a malformed field", path.name, number)
        else:
            log.warning(
                "%s:%d: skipped a line that is neither message nor record", path.name, number
            )
    session.next_seq = max(session.next_seq, max_seq + 1)
    return session
