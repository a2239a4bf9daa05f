"""Sessions: one JSONL transcript per conversation (see store.py), its line types
(records.py) and the at-most-once reply rules (delivery.py).

Inside, imports run one way (an import-linter contract in pyproject.toml):
  records.py     every line type (what is written, and what a message line validates into)
  messages.py    `StoredMessage`, a message as read back; state.py `SessionState`, settings
  lines.py       parsing bytes of a session file into messages and records
  transcript.py  `Session`, the in-memory view, which reads its own skipped (cold) part
  load.py        `load_session`: the whole file, or its live window
  store.py       `SessionStore`: the one writer; delivery.py the at-most-once reply rules"""

from clawgate.agent.session.load import load_session
from clawgate.agent.session.messages import StoredMessage
from clawgate.agent.session.records import (
    Archived,
    Command,
    Compaction,
    Consolidation,
    Delivery,
    FunctionCall,
    Message,
    OverLimit,
    Record,
    SessionHeader,
    State,
    Stopped,
    Streamed,
    ToolCall,
    TurnError,
)
from clawgate.agent.session.state import SessionState
from clawgate.agent.session.store import SessionStore
from clawgate.agent.session.transcript import Session, read_key, session_filename

__all__ = [
    "Archived",
    "Command",
    "Compaction",
    "Consolidation",
    "Delivery",
    "FunctionCall",
    "Message",
    "OverLimit",
    "Record",
    "Session",
    "SessionHeader",
    "SessionState",
    "SessionStore",
    "State",
    "Stopped",
    "StoredMessage",
    "Streamed",
    "ToolCall",
    "TurnError",
    "load_session",
    "read_key",
    "session_filename",
]
