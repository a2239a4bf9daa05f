"""Sessions: one JSONL transcript per conversation (see store.py), its line types
(records.py) and the at-most-once reply rules (delivery.py)."""

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
from clawgate.agent.session.store import (
    Session,
    SessionStore,
    load_session,
    read_key,
    session_filename,
)

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
    "SessionStore",
    "State",
    "ToolCall",
    "TurnError",
    "load_session",
    "read_key",
    "session_filename",
]
