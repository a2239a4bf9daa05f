"""Sessions: one JSONL transcript per conversation (see store.py), its line types
(records.py) and the at-most-once reply rules (delivery.py).

Inside, imports run one way: records <- messages, state <- lines <- transcript (`Session`,
which reads its own cold part) <- load <- store <- delivery."""

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
    Record,
    SessionHeader,
    State,
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
    "Record",
    "Session",
    "SessionHeader",
    "SessionState",
    "SessionStore",
    "State",
    "StoredMessage",
    "ToolCall",
    "TurnError",
    "load_session",
    "read_key",
    "session_filename",
]
