"""`Session`: the in-memory view of one session file, whose consolidated part may stay on disk.

A transcript of thousands of messages is mostly consolidated: memory covers it and no turn
sends it to the model. The store's reload (`load_session(..., live_only=True)`) therefore
parses only the live window - the messages after the last consolidation - plus every
record except delivery notes, and leaves the older messages and their delivery records on
disk (`ColdPart`). They are read, once, the first time something asks for them: the full
`messages`, `records` or `message_ids`, or a redelivered message id that may be one of
them. What a session answers is the same whichever way it was loaded.

Messages are held as the dicts their lines were validated into and handed out as
`StoredMessage`s (messages.py); settings are folded into a `SessionState` (state.py).
"""

from __future__ import annotations

import bisect
import json
import logging
import os
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from clawgate.agent.session.lines import parse_lines
from clawgate.agent.session.messages import StoredMessage
from clawgate.agent.session.records import (
    Command,
    Consolidation,
    Delivery,
    MessageLine,
    RecordKind,
    SessionHeader,
    State,
)
from clawgate.agent.session.state import SessionState

log = logging.getLogger(__name__)

R = TypeVar("R", bound=RecordKind)
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


def _seq(message: MessageLine) -> int:
    return message["seq"]


@dataclass
class ColdPart:
    """The part of a session file a live-window reload left unparsed: bytes [0, end)."""

    end: int
    # The file it was read from: a different file at the path (moved, replaced) is not read.
    device: int
    inode: int
    # Seq of the last message in the part; every later message is held in memory.
    last_seq: int
    # The platform ids the part may carry (a superset: any `"message_id":"..."` value), and
    # whether some value could not be read that way (an escape): then only a read decides.
    ids: frozenset[bytes]
    ids_uncertain: bool
    # How many of the session's records came from the part (loaded eagerly: all but deliveries).
    records: int


class Session:
    """The in-memory view of one session file. Changed only by SessionStore and the delivery
    rules (delivery.py), never by its users."""

    def __init__(
        self,
        key: str,
        path: Path,
        *,
        next_seq: int = 1,
        first_seq: int = 1,
        message_ids: dict[str, int] | None = None,
        command_ids: Iterable[str] = (),
    ) -> None:
        self.key = key
        self.path = path
        # Each message line as validated (read through `StoredMessage`). Without the cold
        # part's messages until it is read (see `messages`).
        self._messages: list[MessageLine] = []
        # The `State` records folded (see `state`), and the furthest consolidation apart: a
        # long transcript holds hundreds, and a new state per one would slow its reload.
        self._state = SessionState()
        self._consolidated = 0
        self._records: list[RecordKind] = []
        # The same records by type, and the deliveries by reply seq: what a turn asks of
        # them (the latest compaction, how many, a reply's deliveries) stays O(1) however
        # many replies a session has delivered since the start.
        self._by_kind: dict[type, list[RecordKind]] = {}
        self._deliveries: dict[int, list[Delivery]] = {}
        self.next_seq = next_seq
        self.first_seq = first_seq  # seqs continue across /new: the first seq this file holds
        # The file ended mid-line when it was loaded (a torn write, or another writer's junk
        # the DiskWriter has not seen): the next line must start afresh.
        self.needs_newline = False
        # How many turns / consolidations are using this object; pinned sessions stay cached.
        self.pins = 0
        # Platform message id -> seq of the user message that carried it (cold part aside).
        self._message_ids: dict[str, int] = dict(message_ids or {})
        # Platform ids of the slash commands that ran, oldest first (kept across /new too).
        self._command_ids: dict[str, None] = dict.fromkeys(command_ids)
        # Seqs of replies handed to the outbound queue by this process (see delivery.py).
        self.handed_out: set[int] = set()
        # (first seq it covers, trust) for each recorded trust, in file order: a `State` trust
        # line is written before the message it applies to (see `trusts_between`).
        self.trust_marks: list[tuple[int, str]] = []
        self.cold: ColdPart | None = None

    @contextmanager
    def pinned(self) -> Iterator[None]:
        self.pins += 1
        try:
            yield
        finally:
            self.pins -= 1

    # -- the whole transcript (reads the cold part once) ---------------------------------------

    @property
    def messages(self) -> list[StoredMessage]:
        self.load_cold()
        return [StoredMessage(line) for line in self._messages]

    @property
    def records(self) -> list[RecordKind]:
        self.load_cold()
        return self._records

    @property
    def message_ids(self) -> dict[str, int]:
        self.load_cold()
        return self._message_ids

    def load_cold(self) -> None:
        """Read the part a live-window reload skipped, if any (once; on the loop's thread, as
        every change to a session is)."""
        cold, self.cold = self.cold, None
        if cold is None:
            return
        try:
            with self.path.open("rb") as handle:
                if not same_file(cold, os.fstat(handle.fileno())):
                    raise FileNotFoundError("the file was replaced since it was loaded")
                raw = handle.read(cold.end)
        except OSError as exc:
            log.warning("%s: cannot read its consolidated messages: %s", self.key, exc)
            return
        part = Session(key=self.key, path=self.path)
        part.parse(raw)
        self._messages[:0] = part._messages
        self._records[: cold.records] = part._records
        self._reindex()
        part._message_ids.update(self._message_ids)
        self._message_ids = part._message_ids

    # -- what a reader adds (the store and the loader) -----------------------------------------

    def parse(self, raw: bytes, start: int = 0) -> int:
        """Fold the lines of raw[start:] in; returns the highest message seq (0 = none)."""
        max_seq = parse_lines(
            raw,
            start,
            file_name=self.path.name,
            messages=self._messages,
            message_ids=self._message_ids,
            records=self._records,
            fold=self.fold,
        )
        self._reindex()  # delivery lines went straight onto the list
        return max_seq

    def _reindex(self) -> None:
        self._by_kind = {}
        self._deliveries = {}
        for record in self._records:
            self._index(record)

    def _index(self, record: RecordKind) -> None:
        self._by_kind.setdefault(type(record), []).append(record)
        if type(record) is Delivery:
            self._deliveries.setdefault(record.seq, []).append(record)

    def add_message(self, message: MessageLine) -> None:
        self._messages.append(message)
        if message.get("message_id") and message["role"] == "user":
            self._message_ids[message["message_id"]] = message["seq"]

    def fold(self, record: SessionHeader | RecordKind, last_seq: int | None = None) -> None:
        """Fold one record into the session; `last_seq`: the seq of the message before it,
        when the session does not hold that message (a cold part being scanned)."""
        if isinstance(record, SessionHeader):
            self.first_seq = record.first_seq
            self.next_seq = max(self.next_seq, record.first_seq)
            self._message_ids.update(record.earlier_message_ids or {})
            self._command_ids.update(dict.fromkeys(record.earlier_command_ids or ()))
        elif isinstance(record, State):
            self._state = self.state.with_record(record)
            self._consolidated = self._state.last_consolidated
            if record.trust is not None:
                last = self.last_seq if last_seq is None else last_seq
                self.trust_marks.append((last + 1 if last else 0, record.trust))
        else:
            self._records.append(record)
            self._index(record)
            if isinstance(record, Command):
                self._command_ids[record.message_id] = None
            if isinstance(record, Consolidation):
                # The covered range and the advance are one line: one write() lands both.
                self._consolidated = max(self._consolidated, record.to_seq)

    # -- what a turn asks (never reads the cold part) ------------------------------------------

    @property
    def state(self) -> SessionState:
        """The session's settings: the `State` records folded, each field's latest value."""
        if self._state.last_consolidated != self._consolidated:
            self._state = self._state.consolidated_to(self._consolidated)
        return self._state

    @property
    def last_consolidated(self) -> int:
        """Seq up to which messages are covered by memory (0 = none)."""
        return self._consolidated

    @property
    def last_seq(self) -> int:
        """Seq of the newest message (0 = none)."""
        if self._messages:
            return _seq(self._messages[-1])
        return self.cold.last_seq if self.cold is not None else 0

    def unconsolidated(self) -> list[StoredMessage]:
        return self.messages_after(self.last_consolidated)

    def unconsolidated_count(self) -> int:
        """len(unconsolidated()), without making the messages (asked after every turn)."""
        return len(self._messages) - self._index_after(self.last_consolidated)

    def messages_after(self, seq: int) -> list[StoredMessage]:
        return [StoredMessage(line) for line in self._messages[self._index_after(seq) :]]

    def _index_after(self, seq: int) -> int:
        if self.cold is not None and seq < self.cold.last_seq:
            self.load_cold()
        # Seqs only grow, so a bisect keeps this flat however long the session gets.
        return bisect.bisect_right(self._messages, seq, key=_seq)

    def last_user_message(self) -> StoredMessage | None:
        found = next((m for m in reversed(self._messages) if m["role"] == "user"), None)
        if found is None and self.cold is not None:
            self.load_cold()
            return self.last_user_message()
        return StoredMessage(found) if found is not None else None

    def seq_of(self, message_id: str) -> int | None:
        """Seq of the user message that carried this platform id, if this session stored one."""
        seq = self._message_ids.get(message_id)
        if seq is not None or self.cold is None:
            return seq
        cold = self.cold
        if cold.ids_uncertain or message_id.encode("utf-8", "surrogatepass") in cold.ids:
            self.load_cold()
            return self._message_ids.get(message_id)
        return None

    @property
    def command_ids(self) -> list[str]:
        """Platform ids of the slash commands that ran here or in the transcripts /new
        archived before it (the last few), oldest first."""
        return list(self._command_ids)

    def records_of(self, kind: type[R]) -> Iterator[R]:
        """The records of this type (or its subtypes), in file order."""
        if issubclass(Delivery, kind):
            self.load_cold()  # only delivery records are left in the cold part
        kinds = [t for t in self._by_kind if issubclass(t, kind)]
        if len(kinds) <= 1:
            return iter(self._of(kinds[0]) if kinds else ())
        return (r for r in self._records if isinstance(r, kind))

    def latest(self, kind: type[R]) -> R | None:
        """The newest record of exactly this type (not kept in a cold part: not a delivery)."""
        found = self._of(kind)
        return found[-1] if found else None

    def count(self, kind: type[RecordKind]) -> int:
        """How many records of exactly this type (not kept in a cold part: not a delivery)."""
        return len(self._by_kind.get(kind, ()))

    def _of(self, kind: type[R]) -> list[R]:
        return self._by_kind.get(kind, [])  # type: ignore[return-value]

    def deliveries_for(self, seq: int) -> Iterator[Delivery]:
        """The delivery records of the reply at `seq`, reading the cold part only if it may
        hold some (a delivery record is written after its reply)."""
        if self.cold is not None and seq <= self.cold.last_seq:
            self.load_cold()
        return iter(self._deliveries.get(seq, ()))

    def trusts_between(self, first: int, last: int) -> set[str]:
        """The trusts the messages first..last were handled at; "" for any not known."""
        marks = self.trust_marks
        before = bisect.bisect_right(marks, first, key=lambda mark: mark[0]) - 1
        found = {marks[before][1]} if before >= 0 else {""}
        found.update(trust for since, trust in marks[before + 1 :] if since <= last)
        return found


def same_file(cold: ColdPart, stat: os.stat_result) -> bool:
    return (stat.st_dev, stat.st_ino) == (cold.device, cold.inode) and stat.st_size >= cold.end


def read_key(path: Path) -> str | None:
    try:
        with path.open("r", encoding="utf-8", errors="replace") as handle:
            first = json.loads(handle.readline())
    except (OSError, ValueError):
        return None
    return first.get("key") if isinstance(first, dict) else None
