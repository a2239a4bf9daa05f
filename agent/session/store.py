"""JSONL sessions: one append-only file per session key, crash-safe at every byte.

`<workspace>/sessions/<name>.jsonl` holds a header, then messages and records in the order
they happened (the line types are in records.py). `SessionStore.append` is the only writer:
one write() per line through the kernel's DiskWriter (complete or raise, and a line after a
torn one starts afresh), one fsync per turn (`sync`). A line that may wait for its fsync (the
note that a reply went out) is made durable by the session's next `sync`, or within
SYNC_LATER_SECONDS by one batched fsync (`sync_later`), so a turn costs one fsync, not two.
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
from typing import Any, TypeVar, overload

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError, to_json

from clawgate.agent.session.records import (
    MESSAGE_LINE,
    RECORD_LINE,
    Consolidation,
    Delivery,
    Message,
    RecordKind,
    SessionHeader,
    State,
    utc_now_iso,
)
from clawgate.agent.text import without_surrogates
from clawgate.kernel.secrets import Redactor
from clawgate.kernel.storage import DiskWriter

log = logging.getLogger(__name__)

_SAFE = re.compile(r"[A-Za-z0-9-]")
R = TypeVar("R", bound=RecordKind)
# Set by the store, not by whoever appends a message.
_STAMPS = {"seq", "timestamp"}
# How many platform message ids of an archived transcript the next one remembers: far more
# than a channel re-delivers after a restart.
CARRIED_MESSAGE_IDS = 200
# Longest a `sync_later` line waits for its fsync when no turn of its session comes first.
SYNC_LATER_SECONDS = 1.0


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


@dataclass
class Session:
    """The in-memory view of one session file. Changed only by SessionStore and the delivery
    rules (delivery.py), never by its users."""

    key: str
    path: Path
    # Each a `Message` as stored, as a dict: the form the model is sent (see agent/history.py).
    messages: list[dict[str, Any]] = field(default_factory=list)
    # The `State` records folded: the latest value of each field that was ever set.
    state: dict[str, Any] = field(default_factory=dict)
    records: list[RecordKind] = field(default_factory=list)
    next_seq: int = 1
    first_seq: int = 1  # seqs continue across /new: the first seq this transcript holds
    # The file ended mid-line when it was loaded (a torn write, or another writer's junk the
    # DiskWriter has not seen): the next line must start afresh.
    needs_newline: bool = False
    # How many turns / consolidations are using this object; pinned sessions are not evicted.
    pins: int = 0
    # Platform message id -> seq of the user message that carried it.
    message_ids: dict[str, int] = field(default_factory=dict)
    # Seqs of replies handed to the outbound queue by this process (see delivery.py).
    handed_out: set[int] = field(default_factory=set)
    # (first seq it covers, trust) for each recorded trust, in file order: a `State` trust
    # line is written before the message it applies to (see `trusts_between`).
    trust_marks: list[tuple[int, str]] = field(default_factory=list)

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
        return self.messages_after(self.last_consolidated)

    def messages_after(self, seq: int) -> list[dict[str, Any]]:
        # Seqs only grow, so a bisect keeps this flat however long the session gets.
        return self.messages[bisect.bisect_right(self.messages, seq, key=_seq) :]

    def records_of(self, kind: type[R]) -> Iterator[R]:
        return (r for r in self.records if isinstance(r, kind))

    def trusts_between(self, first: int, last: int) -> set[str]:
        """The trusts the messages first..last were handled at; "" for any not known."""
        marks = self.trust_marks
        before = bisect.bisect_right(marks, first, key=lambda mark: mark[0]) - 1
        found = {marks[before][1]} if before >= 0 else {""}
        found.update(trust for since, trust in marks[before + 1 :] if since <= last)
        return found


class SessionStore:
    """Loads, caches (LRU) and appends to session files under `<workspace>/sessions/`."""

    def __init__(
        self,
        directory: Path,
        *,
        writer: DiskWriter | None = None,
        cache_size: int = 256,
        redact: Redactor | None = None,
    ) -> None:
        """`redact`: the gateway's one redactor (its configured secrets); by default only
        token-shaped values are caught. Every line passes it before it is written."""
        self.directory = directory
        self.redact = redact or Redactor()
        self.archive_dir = directory / "archive"
        self.writer = writer or DiskWriter()
        self._cache: OrderedDict[str, Session] = OrderedDict()
        self._cache_size = cache_size
        self._loading: dict[str, asyncio.Future[Session]] = {}
        # Files with appends that `sync_later` promised to fsync, and who will do it.
        self._unsynced: set[Path] = set()
        self._sync_timer: asyncio.TimerHandle | None = None
        self._sync_task: asyncio.Task[None] | None = None

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

    @overload
    def append(self, session: Session, item: Message) -> dict[str, Any]: ...

    @overload
    def append(self, session: Session, item: R) -> R: ...

    def append(self, session: Session, item: Message | RecordKind) -> dict[str, Any] | RecordKind:
        """Persist one message (with the next seq) or record, stamped with the time.

        Returns a message as the session now holds it (a dict), a record as written. One
        write() per line, no fsync: call `sync` once per turn.
        """
        if isinstance(item, Message):
            stored = {
                "seq": session.next_seq,
                **item.to_dict(exclude=_STAMPS),
                "timestamp": item.timestamp or utc_now_iso(),
            }
            stored = self._write(session, stored)
            _index_message(session, stored)
            session.next_seq += 1
            return stored
        record = item.model_copy(update={"timestamp": item.timestamp or utc_now_iso()})
        fields = record.to_dict()
        written = self._write(session, fields)
        if written is not fields:  # lone surrogates were replaced
            record = record.model_validate(written)
        _apply_record(session, record)
        return record

    def _write(self, session: Session, fields: dict[str, Any]) -> dict[str, Any]:
        """Write one line; returns its fields as written (which the session must hold)."""
        self._ensure_header(session)
        # A provider error, a tool result or a pasted token must not be kept verbatim.
        fields = self.redact.data(fields)
        try:
            data = to_json(fields)
        except PydanticSerializationError:
            # A lone UTF-16 surrogate (e.g. "\ud800" from a platform's JSON) is no character and
            # cannot be UTF-8. It becomes U+FFFD in the line itself, so what is cached (and
            # later sent to the model, which would reject it too) matches what is on disk.
            fields = without_surrogates(fields)
            data = to_json(fields)
        if session.needs_newline:
            data = b"\n" + data
        self.writer.append(session.path, data + b"\n")
        session.needs_newline = False
        return fields

    def _ensure_header(self, session: Session) -> None:
        # An empty file is one whose header append failed and was taken back: write it again.
        try:
            if session.path.stat().st_size:
                return
        except FileNotFoundError:
            pass
        self.writer.mkdir(self.directory)
        earlier = {i: s for i, s in session.message_ids.items() if s < session.first_seq}
        header = SessionHeader(
            key=session.key,
            created_at=utc_now_iso(),
            first_seq=session.next_seq,
            earlier_message_ids=earlier or None,
        )
        # The header has always been written with json's default separators; it stays so.
        line = json.dumps(header.model_dump(exclude_none=True), ensure_ascii=False)
        self.writer.append(session.path, line + "\n")
        session.needs_newline = False

    async def sync(self, session: Session) -> None:
        """Make this session's appends durable (once per turn)."""
        self._unsynced.discard(session.path)
        await asyncio.to_thread(self.writer.fsync, session.path)

    def sync_later(self, session: Session) -> None:
        """Make this session's appends durable soon: at its next `sync`, or within
        SYNC_LATER_SECONDS in one fsync batch with every other waiting session.

        For lines written after the turn's fsync that can wait: once written they survive a
        killed process; only a power cut inside the window can lose them.
        """
        self._unsynced.add(session.path)
        if self._sync_timer is None and self._sync_task is None:
            self._sync_timer = asyncio.get_running_loop().call_later(
                SYNC_LATER_SECONDS, self._start_batch
            )

    def _start_batch(self) -> None:
        self._sync_timer = None
        self._sync_task = asyncio.ensure_future(self._sync_batch())

    async def _sync_batch(self) -> None:
        try:
            while self._unsynced:
                paths, self._unsynced = self._unsynced, set()
                await asyncio.to_thread(self._fsync_all, paths)
        finally:
            self._sync_task = None

    def _fsync_all(self, paths: set[Path]) -> None:
        for path in paths:
            try:
                self.writer.fsync(path)
            except OSError as exc:
                # The lines are written; a disk refusing fsync fails the next turn's sync too.
                log.warning("cannot fsync %s: %s", path, exc)

    async def flush(self) -> None:
        """Fsync now whatever `sync_later` left waiting (on shutdown)."""
        if self._sync_timer is not None:
            self._sync_timer.cancel()
            self._sync_timer = None
        if self._sync_task is not None:
            await self._sync_task
        if self._unsynced:
            self._start_batch()
            assert self._sync_task is not None
            await self._sync_task

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
        # A message of the old transcript re-delivered after /new (a restart before the
        # platform saw it acknowledged) must not start a turn in the new one.
        carried = list(session.message_ids.items())[-CARRIED_MESSAGE_IDS:]
        fresh = Session(
            key=session.key,
            path=session.path,
            next_seq=session.next_seq,
            first_seq=session.next_seq,
            message_ids=dict(carried),
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
    if message.get("message_id") and message["role"] == "user":
        session.message_ids[message["message_id"]] = message["seq"]


def _apply_record(session: Session, record: SessionHeader | RecordKind) -> None:
    if isinstance(record, SessionHeader):
        session.first_seq = record.first_seq
        session.next_seq = max(session.next_seq, record.first_seq)
        session.message_ids.update(record.earlier_message_ids or {})
    elif isinstance(record, State):
        session.state.update(record.to_dict(exclude={"type", "timestamp"}))
        if record.trust is not None:
            since = _seq(session.messages[-1]) + 1 if session.messages else 0
            session.trust_marks.append((since, record.trust))
    else:
        session.records.append(record)
        if isinstance(record, Consolidation):
            # The covered range and the advance are one line, so one write() makes both land.
            session.state["last_consolidated"] = max(session.last_consolidated, record.to_seq)


def read_key(path: Path) -> str | None:
    try:
        with path.open("r", encoding="utf-8", errors="replace") as handle:
            first = json.loads(handle.readline())
    except (OSError, ValueError):
        return None
    return first.get("key") if isinstance(first, dict) else None


# What a record's validation error says about the line, for the warning.
_WHY = {
    "json_invalid": "an unreadable line (torn write?)",
    "dict_type": "a line that is no JSON object",
    "union_tag_not_found": "a line that is neither message nor record",
    "union_tag_invalid": "a record of an unknown type",
}


def load_session(path: Path, key: str) -> Session:
    """Read a session file. Torn, corrupt or unknown lines are skipped with a warning."""
    session = Session(key=key, path=path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return session
    if raw and not raw.endswith(b"\n"):
        session.needs_newline = True
    # The validators themselves: TypeAdapter's wrapper costs a third of a line's parse.
    as_message = MESSAGE_LINE.validator.validate_json
    as_record = RECORD_LINE.validator.validate_json
    # `_index_message` and `_apply_record` inlined for the two commonest lines: a call per
    # line is a tenth of the load.
    messages, message_ids, records = session.messages, session.message_ids, session.records
    max_seq = 0
    for number, data in enumerate(raw.split(b"\n"), start=1):
        if not data or data.isspace():
            continue
        # A line as the store writes a record, which no message validation could accept (a
        # message needs a "role" key, spelled plainly or with an escape), goes straight to
        # the record types: failing as a message first would cost more than the parse.
        if not (data.startswith(b'{"type":') and b'"role"' not in data and b"\\u" not in data):
            try:
                message = as_message(data)
            except ValidationError:
                pass
            else:
                messages.append(message)
                seq = message["seq"]
                if message.get("message_id") and message["role"] == "user":
                    message_ids[message["message_id"]] = seq
                if seq > max_seq:
                    max_seq = seq
                continue
        try:
            record = as_record(data)
        except ValidationError as exc:
            why = _WHY.get(exc.errors()[0]["type"], "a line with a malformed field")
            log.warning("%s:%d: skipped %s", path.name, number, why)
            continue
        if type(record) is Delivery:
            records.append(record)
        else:
            _apply_record(session, record)
    session.next_seq = max(session.next_seq, max_seq + 1)
    return session
