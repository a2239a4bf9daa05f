"""Reading session lines back: bytes of a session file into messages and records.

The one parser of the line types in records.py, shared by the whole-file load (load.py) and
a session reading the part of its file a live-window reload left on disk (transcript.py).
It knows nothing of `Session`: the caller hands it the lists to fill and the function that
folds a record in, so the dependency runs one way (records <- lines <- transcript <- load).
A line that validates as neither a message nor a record is skipped with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pydantic import ValidationError

from clawgate.agent.session.records import (
    MESSAGE_LINE,
    RECORD_LINE,
    Delivery,
    MessageLine,
    RecordKind,
    SessionHeader,
)

log = logging.getLogger(__name__)

Fold = Callable[[SessionHeader | RecordKind], None]

# What a record's validation error says about the line, for the warning.
_WHY = {
    "json_invalid": "an unreadable line (torn write?)",
    "dict_type": "a line that is no JSON object",
    "union_tag_not_found": "a line that is neither message nor record",
    "union_tag_invalid": "a record of an unknown type",
}


def parse_lines(
    raw: bytes,
    start: int,
    *,
    file_name: str,
    messages: list[MessageLine],
    message_ids: dict[str, int],
    records: list[RecordKind],
    fold: Fold,
) -> int:
    """Read the lines of raw[start:]: messages onto `messages` (their platform ids into
    `message_ids`), delivery records onto `records`, every other record through `fold`, in
    file order. Returns the highest message seq (0 = none)."""
    # The validators themselves: TypeAdapter's wrapper costs a third of a line's parse.
    as_message = MESSAGE_LINE.validator.validate_json
    as_record = RECORD_LINE.validator.validate_json
    # What a session does with a message, inlined for the two commonest lines: a call per
    # line is a tenth of the load.
    max_seq = 0
    for number, data in enumerate(raw[start:].split(b"\n"), start=1):
        if not data or data.isspace():
            continue
        # `is_record_line`, inlined: a line as the store writes a record goes straight to the
        # record types, since failing as a message first would cost more than the parse.
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
            skipped(file_name, exc, raw.count(b"\n", 0, start) + number)
            continue
        if type(record) is Delivery:
            records.append(record)
        else:
            fold(record)
    return max_seq


def is_record_line(data: bytes) -> bool:
    """A line as the store writes a record, which no message validation could accept (a
    message needs a "role" key, spelled plainly or with an escape)."""
    return data.startswith(b'{"type":') and b'"role"' not in data and b"\\u" not in data


def skipped(file_name: str, exc: ValidationError, number: int) -> None:
    why = _WHY.get(exc.errors()[0]["type"], "a line with a malformed field")
    log.warning("%s:%d: skipped %s", file_name, number, why)
