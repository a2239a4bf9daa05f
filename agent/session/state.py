"""`SessionState`: a session's settings, typed - the `state` records of its file folded.

On disk a `State` record (records.py) names only the fields that changed, in their JSON
form (trust as its string, chat facts as an object); a `Consolidation` record moves
`last_consolidated` too. Reading folds them, in file order, into one frozen `SessionState`:
the latest value of each field ever set. A value the file holds that is no longer
understood (a trust this version does not know, facts of an older shape) reads as not
recorded: readers then decide as for a chat that never recorded it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from clawgate.agent.session.records import State
from clawgate.kernel.bus import ChatFacts, Trust


class SessionState(BaseModel):
    model_config = ConfigDict(frozen=True)

    # The trust of the latest message (consolidation and archiving run without it).
    trust: Trust | None = None
    # The latest message's platform facts, so a replay or a scheduled run can ask the access
    # rules again instead of reusing `trust`.
    chat: ChatFacts | None = None
    model: str | None = None  # set by /model
    flushed_cycle: int | None = None  # compaction cycle whose memory flush already ran
    last_consolidated: int = 0  # seq up to which messages are covered by memory (0 = none)

    @field_validator("trust", mode="before")
    @classmethod
    def _known_trust(cls, value: Any) -> Trust | None:
        try:
            return Trust(value) if value is not None else None
        except ValueError:
            return None

    @field_validator("chat", mode="before")
    @classmethod
    def _readable_facts(cls, value: Any) -> ChatFacts | None:
        return value if isinstance(value, ChatFacts) else ChatFacts.stored(value)

    def with_record(self, record: State) -> SessionState:
        """The state after `record`: only the fields it sets change."""
        changes = record.to_dict(exclude={"type", "timestamp"})
        if not changes:
            return self
        return self.model_validate({**self.__dict__, **changes})

    def consolidated_to(self, seq: int) -> SessionState:
        """The state with messages up to `seq` covered by memory."""
        return self.model_copy(update={"last_consolidated": seq})
