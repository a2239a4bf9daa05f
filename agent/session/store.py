"""JSONL sessions: one append-only file per session key, crash-safe at every byte.

`<workspace>/sessions/<name>.jsonl` holds a header, then messages and records in the order
they happened (the line types are in records.py). `SessionStore.append` is the only writer:
one write() per line through the kernel's DiskWriter (complete or raise, and a line after a
torn one starts afresh), one fsync per turn (`sync`). A line that may wait for its fsync (the
note that a reply went out) is made durable by the session's next `sync`, or within
SYNC_LATER_SECONDS by one batched fsync (`sync_later`), so a turn costs one fsync, not two.
The store reloads a file's live window only (load.py): what the last consolidation covered
stays on disk until asked for (transcript.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar, overload

from pydantic_core import PydanticSerializationError, to_json

from clawgate.agent.session.load import load_session
from clawgate.agent.session.messages import StoredMessage
from clawgate.agent.session.records import (
    MESSAGE_LINE,
    Message,
    RecordKind,
    SessionHeader,
    State,
    utc_now_iso,
)
from clawgate.agent.session.state import SessionState
from clawgate.agent.session.transcript import Session, read_key, session_filename
from clawgate.agent.text import without_surrogates
from clawgate.kernel.bus import ChatFacts, Trust
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
    def append(self, session: Session, item: Message) -> StoredMessage: ...

    @overload
    def append(self, session: Session, item: R) -> R: ...

    def append(self, session: Session, item: Message | RecordKind) -> StoredMessage | RecordKind:
        """Persist one message (with the next seq) or record, stamped with the time.

        Returns a message as the session now holds it, a record as written. One write() per
        line, no fsync: call `sync` once per turn.
        """
        if isinstance(item, Message):
            fields = {
                "seq": session.next_seq,
                **item.to_dict(exclude=_STAMPS),
                "timestamp": item.timestamp or utc_now_iso(),
            }
            # What the session holds is the line validated as a reload would read it.
            stored = MESSAGE_LINE.validator.validate_python(self._write(session, fields))
            session.add_message(stored)
            session.next_seq += 1
            return StoredMessage(stored)
        record = item.model_copy(update={"timestamp": item.timestamp or utc_now_iso()})
        fields = record.to_dict()
        written = self._write(session, fields)
        if written is not fields:  # lone surrogates were replaced
            record = record.model_validate(written)
        session.fold(record)
        return record

    def update_state(
        self,
        session: Session,
        *,
        trust: Trust | None = None,
        chat: ChatFacts | None = None,
        model: str | None = None,
        flushed_cycle: int | None = None,
    ) -> SessionState:
        """Change the session's settings: one `state` line naming the fields given (in the
        JSON form the file has always had); returns the state after it."""
        self.append(
            session,
            State(
                trust=trust.value if trust is not None else None,
                chat=chat.model_dump(mode="json") if chat is not None else None,
                model=model,
                flushed_cycle=flushed_cycle,
            ),
        )
        return session.state

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
            earlier_command_ids=session.command_ids or None,
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

        The new session continues the seq numbering, so seqs stay unique per key, and starts
        with the chat's recorded trust and platform facts (never its model or memory marks).
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
            # Likewise a replayed command (two /new after a crash must not archive twice).
            command_ids=session.command_ids[-CARRIED_MESSAGE_IDS:],
        )
        # The old object now stands for the archived transcript: a consolidation still running
        # on it appends its records there, never to the fresh file.
        session.path = target
        self._cache[session.key] = fresh
        # The chat is still the same chat: a reminder, heartbeat or replay before its next
        # message decides trust again from these facts (and the dashboard shows the trust).
        kept = session.state
        if kept.trust is not None or kept.chat is not None:
            self.update_state(fresh, trust=kept.trust, chat=kept.chat)
            await self.sync(fresh)
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
