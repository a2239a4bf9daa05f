"""Loading a session file: whole (the CLI, an archive) or its live window only (the store).

A transcript of thousands of messages is mostly consolidated. The live-window load finds
the last consolidation record, leaves the messages it covers and their delivery records on
disk as the session's cold part (transcript.py), and parses only the header, the other
records and the messages after it. Torn, corrupt or unknown lines are skipped with a
warning (lines.py), never a reason to refuse the file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from clawgate.agent.session.lines import is_record_line, skipped
from clawgate.agent.session.records import MESSAGE_LINE, RECORD_LINE, Consolidation, State
from clawgate.agent.session.transcript import ColdPart, Session


def load_session(path: Path, key: str, *, live_only: bool = False) -> Session:
    """Read a session file. Torn, corrupt or unknown lines are skipped with a warning.

    `live_only` (the store's reload): leave the messages up to the last consolidation and
    their delivery records on disk until something asks for them.
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
    max_seq = session.parse(raw, start)
    session.next_seq = max(session.next_seq, max_seq + 1, session.last_seq + 1)
    return session


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
        if not is_record_line(data):
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
            skipped(session.path.name, exc, raw.count(b"\n", 0, offset) + 1)
            continue
        last = 0
        if isinstance(record, State) and record.trust is not None:
            before = _message_before(raw, offset - 1, as_message, lambda _seq: True)
            last = before[0] if before else 0
        session.fold(record, last)
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
