"""A conversation from another assistant as a clawgate transcript: the header (marked
`imported_from`), the user and assistant messages in order with their own timestamps and no
platform ids, one "trimmed" consolidation record over all of them and an `archived` record.
It goes to `sessions/archive/`, so no channel routes to it, nothing answers or delivers it
again, no consolidation summarises it a second time, and `memory audit` counts every message
as covered. The same conversation always gives the same bytes: a second import finds it
already there."""

from __future__ import annotations

import json
from dataclasses import dataclass

from clawgate.agent.session import Archived, Consolidation, Message, session_filename
from clawgate.agent.session.records import SessionHeader


@dataclass(frozen=True)
class Turn:
    role: str  # "user" or "assistant"
    content: str
    timestamp: str | None


def transcript_name(source: str, their_key: str) -> tuple[str, str]:
    """(the clawgate session key, the archive file's path in the workspace)."""
    key = f"imported:{source}:{their_key}"
    return key, f"sessions/archive/{session_filename(key)}.jsonl"


def transcript_bytes(source: str, key: str, turns: list[Turn]) -> bytes:
    stamps = [t.timestamp for t in turns if t.timestamp]
    first, last = (stamps[0], stamps[-1]) if stamps else (None, None)
    lines = [SessionHeader(key=key, created_at=first, imported_from=source).to_dict()]
    for seq, turn in enumerate(turns, 1):
        message = Message(seq=seq, role=turn.role, content=turn.content, timestamp=turn.timestamp)
        lines.append(message.to_dict())
    if turns:
        lines.append(
            Consolidation(from_seq=1, to_seq=len(turns), mode="trimmed", timestamp=last).to_dict()
        )
    lines.append(Archived(timestamp=last).to_dict())
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode()
