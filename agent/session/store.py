"""JSONL sessions: one append-only file per session key, crash-safe at every byte.

`<workspace>/sessions/<name>.jsonl` holds a header, then messages and records in the order
they happened (the line types are in records.py). `SessionStore.append` is the only writer:
one write() per line through the kernel's DiskWriter (complete or raise, and a line after a
torn one starts afresh), one fsync per turn (`sync`). A line that may wait for its fsync (the
note that a reply went out) is made durable by the session's next `sync`, or within
SYNC_LATER_SECONDS by one batched fsync (`sync_later`), so a turn costs one fsync, not two.
The store reloads a file's live window only: what the last consolidation covered stays on
disk until asked for (transcript.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from collections import OrderedDict
from collections.abc import Callable
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
from clawgate.agent.session.transcript import (
    ColdPart,
    Session,
    read_key,
    same_file,
    session_filename,
)
from clawgate.agent.text import without_surrogates
from clawgate.kernel.secrets import Redactor
from clawgate.kernel.storage import DiskWriter

log = logging.getLogger(__name__)

R = TypeVar("R", bound=RecordKind)
# Set by the store, not by whoever appends a message.
_STAMPS = {"seq", "timestamp"}
# How many platform message ids of an archived transcript the next one remembers: far more
# than a channel re-delivers after a restart.
CARRIED_MESSAGE_IDS = 200
# Longest a `sync_later` line waits for its fsync when no turn of its session comes first.
SYNC_LATER_SECONDS = 1.0


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
                asyncio.to_thread(load_session, self.path_for(key), key, live_only=True)
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
        # Only a fresh transcript gets a header, and it has no cold part.
        earlier = {i: s for i, s in session._message_ids.items() if s < session.first_seq}
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
        # A message of the old transcript re-delivered after /new (a restart before the
        # platform saw it acknowledged) must not start a turn in the new one. Read before the
        # move: the ids may be in the part of the file not loaded yet.
        carried = list(session.message_ids.items())[-CARRIED_MESSAGE_IDS:]
        await asyncio.to_thread(self.writer.move, session.path, target)
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
    session._messages.append(message)
    if message.get("message_id") and message["role"] == "user":
        session._message_ids[message["message_id"]] = message["seq"]


def _apply_record(
    session: Session, record: SessionHeader | RecordKind, last_seq: int | None = None
) -> None:
    """Fold one record into the session; `last_seq`: the seq of the message before it, when
    the session does not hold that message (a cold part being scanned)."""
    if isinstance(record, SessionHeader):
        session.first_seq = record.first_seq
        session.next_seq = max(session.next_seq, record.first_seq)
        session._message_ids.update(record.earlier_message_ids or {})
    elif isinstance(record, State):
        session.state.update(record.to_dict(exclude={"type", "timestamp"}))
        if record.trust is not None:
            last = session.last_seq if last_seq is None else last_seq
            session.trust_marks.append((last + 1 if last else 0, record.trust))
    else:
        session._records.append(record)
        if isinstance(record, Consolidation):
            # The covered range and the advance are one line, so one write() makes both land.
            session.state["last_consolidated"] = max(session.last_consolidated, record.to_seq)


# What a record's validation error says about the line, for the warning.
_WHY = {
    "json_invalid": "an unreadable line (torn write?)",
    "dict_type": "a line that is no JSON object",
    "union_tag_not_found": "a line that is neither message nor record",
    "union_tag_invalid": "a record of an unknown type",
}


def load_session(path: Path, key: str, *, live_only: bool = False) -> Session:
    """Read a session file. Torn, corrupt or unknown lines are skipped with a warning.

    `live_only` (the store's reload): leave the messages up to the last consolidation and
    their delivery records on disk until something asks for them (see transcript.py).
    """
    session = Session(key=key, path=path)
    try:
        with path.open("rb") as handle:
            stat = os.fstat(handle.fileno())
            raw = handle.read()
    except FileNotFoundError:
        return session
    if raw and not raw.endswith(b"\n"):
        session.needs_newline = True
    start = _scan_cold(session, raw, stat) if live_only else 0
    max_seq = _parse(session, raw, start)
    session.next_seq = max(session.next_seq, max_seq + 1, session.last_seq + 1)
    return session


def _parse(session: Session, raw: bytes, start: int = 0) -> int:
    """Fold the lines of raw[start:] into the session; returns the highest message seq."""
    # The validators themselves: TypeAdapter's wrapper costs a third of a line's parse.
    as_message = MESSAGE_LINE.validator.validate_json
    as_record = RECORD_LINE.validator.validate_json
    # `_index_message` and `_apply_record` inlined for the two commonest lines: a call per
    # line is a tenth of the load.
    messages, message_ids, records = session._messages, session._message_ids, session._records
    max_seq = 0
    for number, data in enumerate(raw[start:].split(b"\n"), start=1):
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
            _skipped(session, exc, raw.count(b"\n", 0, start) + number)
            continue
        if type(record) is Delivery:
            records.append(record)
        else:
            _apply_record(session, record)
    return max_seq


def _skipped(session: Session, exc: ValidationError, number: int) -> None:
    why = _WHY.get(exc.errors()[0]["type"], "a line with a malformed field")
    log.warning("%s:%d: skipped %s", session.path.name, number, why)


# The cold part of a file ends with the last message a consolidation covers; these find it
# and the lines in it that are read at once anyway (the header and every record but
# deliveries) without splitting it into lines.
_CONSOLIDATION = b'\n{"type":"consolidation",'
_MESSAGE_START = re.compile(rb'\{"seq":(\d+)[,}]')
_EAGER_LINE = re.compile(rb'\n(?!\{"seq":|\{"type":"delivery",)([^\n]*)')
_LAZY_LINE = re.compile(rb'\{"seq":|\{"type":"delivery",')
_ID_VALUE = re.compile(rb'"message_id"(?::"([^"\\]*)"|)')


def _scan_cold(session: Session, raw: bytes, stat: os.stat_result) -> int:
    """Set up the session's cold part; returns where the live part of `raw` starts."""
    as_message = MESSAGE_LINE.validator.validate_json
    at = raw.rfind(_CONSOLIDATION)
    if at < 0:
        return 0
    end = raw.find(b"\n", at + 1)
    try:
        covered = RECORD_LINE.validator.validate_json(raw[at + 1 : end if end >= 0 else None])
    except ValidationError:
        return 0
    if not isinstance(covered, Consolidation):
        return 0
    found = _message_before(raw, at, as_message, lambda seq: seq <= covered.to_seq)
    if found is None:
        return 0
    last_seq, cut = found
    ids = set(_ID_VALUE.findall(raw, 0, cut))
    # A value the pattern cannot read (escaped, or spaced as json.dumps writes it) comes back
    # empty and makes the set incomplete: then a lookup that misses reads the part.
    uncertain = b"" in ids
    first = raw.find(b"\n", 0, cut)
    lines = [(0, raw[:first])]
    lines += ((m.start(1), m.group(1)) for m in _EAGER_LINE.finditer(raw, first, cut))
    for offset, data in lines:
        if not data or data.isspace() or (offset == 0 and _LAZY_LINE.match(data)):
            continue
        if not (data.startswith(b'{"type":') and b'"role"' not in data and b"\\u" not in data):
            try:
                message = as_message(data)
            except ValidationError:
                pass
            else:  # a message in an unusual spelling: its id is known exactly
                if message.get("message_id") and message["role"] == "user":
                    ids.add(message["message_id"].encode("utf-8", "surrogatepass"))
                continue
        try:
            record = RECORD_LINE.validator.validate_json(data)
        except ValidationError as exc:
            _skipped(session, exc, raw.count(b"\n", 0, offset) + 1)
            continue
        last = 0
        if isinstance(record, State) and record.trust is not None:
            before = _message_before(raw, offset - 1, as_message, lambda _seq: True)
            last = before[0] if before else 0
        _apply_record(session, record, last)
    session.cold = ColdPart(
        end=cut,
        device=stat.st_dev,
        inode=stat.st_ino,
        last_seq=last_seq,
        ids=frozenset(ids),
        ids_uncertain=uncertain,
        records=len(session._records),
    )
    return cut


def _message_before(
    raw: bytes, newline: int, as_message: Callable[[bytes], Any], wanted: Callable[[int], bool]
) -> tuple[int, int] | None:
    """(seq, end of its line + 1) of the last valid message line ending at or before the
    newline at `newline` whose seq is `wanted`; None if there is none."""
    while newline > 0:
        begin = raw.rfind(b"\n", 0, newline) + 1
        line = raw[begin:newline]
        start = _MESSAGE_START.match(line)
        if start and wanted(int(start[1])):
            try:
                message = as_message(line)
            except ValidationError:
                pass
            else:
                if wanted(message["seq"]):
                    return message["seq"], newline + 1
        newline = begin - 1
    return None


def read_cold(session: Session) -> None:
    """Read the part `load_session(live_only=True)` skipped into the session (once; on the
    loop's thread, as every change to a session is)."""
    cold, session.cold = session.cold, None
    if cold is None:
        return
    try:
        with session.path.open("rb") as handle:
            if not same_file(cold, os.fstat(handle.fileno())):
                raise FileNotFoundError("the file was replaced since it was loaded")
            raw = handle.read(cold.end)
    except OSError as exc:
        log.warning("%s: cannot read its consolidated messages: %s", session.key, exc)
        return
    part = Session(key=session.key, path=session.path)
    _parse(part, raw)
    session._messages[:0] = part._messages
    session._records[: cold.records] = part._records
    part._message_ids.update(session._message_ids)
    session._message_ids = part._message_ids
