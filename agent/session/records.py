"""Every line a session file can hold, as a type.

A line is one of three things:
  the header   {"type": "session", "key": ..., "version": 1, "created_at": ..., "first_seq": 1}
  a message    {"seq": 7, "role": "user", "content": "...", "timestamp": "...Z", ...}
  a record     {"type": "state" | "delivery" | ..., ..., "timestamp": "...Z"}   (no "role")

Writers build a `Message` or one of the `Record` models; the store stamps seq and time and
writes the model. Loading validates each line back: a message into a `MessageLine` dict
(read through `StoredMessage`, messages.py), anything else into the record models. A
misspelled kind cannot be written, and a line of an unknown kind or with a wrong-typed field
(a tool call without its function, say) is skipped, never half-understood.

Field order is the order of the keys on disk: files written before these models existed
load unchanged, and new lines are byte for byte what the old writer produced.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal, NotRequired

from pydantic import BaseModel, ConfigDict, Field, StrictInt, TypeAdapter
from typing_extensions import TypedDict

FORMAT_VERSION = 1


def utc_now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Line(BaseModel):
    """One line of a session file; frozen, so what the session holds is what was written."""

    model_config = ConfigDict(frozen=True)

    def to_dict(self, *, exclude: set[str] | None = None) -> dict[str, Any]:
        """The fields in order, unset (None) ones left out: the line as written."""
        # The serializer itself: model_dump's keyword handling costs more than the dumping,
        # and every append pays it.
        fields: dict[str, Any] = self.__pydantic_serializer__.to_python(
            self, exclude_none=True, exclude=exclude
        )
        return fields


# -- messages ---------------------------------------------------------------------------------


class FunctionCall(Line):
    name: str
    arguments: str


class ToolCall(Line):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(Line):
    """A user, assistant or tool message. `seq` and `timestamp` are set by the store."""

    seq: StrictInt | None = None
    role: Literal["user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None  # the tool that produced a tool message
    # The platform's id of a user message, so a re-delivered message is recognised.
    message_id: str | None = None
    timestamp: str | None = None


class FunctionLine(TypedDict):
    name: str
    arguments: str


class ToolCallLine(TypedDict):
    id: str
    type: NotRequired[Literal["function"]]
    function: FunctionLine


class MessageLine(TypedDict):
    """A message line as it is validated on load: the dict a `StoredMessage` reads from.

    Lines are validated straight into dicts: building a model per line would more than
    double the load time of a long session. The keys are `Message`'s, with seq required
    (tests hold the two equal).
    """

    seq: StrictInt
    role: Literal["user", "assistant", "tool"]
    content: NotRequired[str]
    tool_calls: NotRequired[list[ToolCallLine]]
    tool_call_id: NotRequired[str]
    name: NotRequired[str]
    message_id: NotRequired[str]
    timestamp: NotRequired[str]


MESSAGE_LINE: TypeAdapter[MessageLine] = TypeAdapter(MessageLine)


# -- records ----------------------------------------------------------------------------------


class SessionHeader(Line):
    """Line 1 of every file; written by the store, never appended by callers."""

    type: Literal["session"] = "session"
    key: str | None = None
    version: int = FORMAT_VERSION
    created_at: str | None = None
    # Seqs continue across /new: the first seq this transcript holds.
    first_seq: int = 1
    # The last platform ids (-> seq) of the transcript /new archived, so a copy re-delivered
    # after /new is still recognised. Left out of the line when there are none.
    earlier_message_ids: dict[str, StrictInt] | None = None
    # The same for the slash commands that transcript ran (the /new that archived it among
    # them): a replayed command is skipped however many /new came after it.
    earlier_command_ids: list[str] | None = None
    # Set on a transcript `clawgate import` converted from another assistant ("openclaw",
    # "nanobot"): archived, consolidated as "trimmed", never answered or delivered again.
    imported_from: str | None = None


class State(Line):
    """A change to the session's settings; only the fields given change."""

    type: Literal["state"] = "state"
    trust: str | None = None  # the trust of the latest message (consolidation runs without it)
    # The latest message's platform facts (`ChatFacts`), so a replay or a scheduled run can
    # ask the access rules again instead of reusing `trust`.
    chat: dict[str, Any] | None = None
    model: str | None = None  # set by /model
    flushed_cycle: int | None = None  # compaction cycle whose memory flush already ran
    last_consolidated: int | None = None
    timestamp: str | None = None


class Delivery(Line):
    """A reply left (or finally failed to leave) through its channel."""

    type: Literal["delivery"] = "delivery"
    seq: int
    status: Literal["sent", "failed"]
    error: str | None = None
    timestamp: str | None = None


class TurnError(Line):
    """A turn ended without a stored reply (model unreachable, too long, empty reply, ...)."""

    type: Literal["error"] = "error"
    error: str
    timestamp: str | None = None


class Command(Line):
    """A slash command ran for this platform message: a re-delivered copy must not run it again."""

    type: Literal["command"] = "command"
    name: str
    message_id: str
    timestamp: str | None = None


class Stopped(Line):
    """A /stop ended the turn of this platform message: its turn is over, answered by the
    "Stopped." notice; a re-delivered copy must not run it again."""

    type: Literal["stopped"] = "stopped"
    message_id: str
    timestamp: str | None = None


class Streamed(Line):
    """A reply to this platform message began to show in its chat (a channel streams it)
    before the turn ended: whatever happens to the turn, that message has its one reply, and
    a restart never answers it again (the channel finishes or marks what it showed)."""

    type: Literal["streamed"] = "streamed"
    message_id: str
    timestamp: str | None = None


class Compaction(Line):
    """Messages up to `up_to_seq` are sent to the model as `summary` from now on."""

    type: Literal["compaction"] = "compaction"
    up_to_seq: int
    summary: str
    timestamp: str | None = None


class Consolidation(Line):
    """Messages `from_seq`..`to_seq` are in memory; one line moves `last_consolidated` too."""

    type: Literal["consolidation"] = "consolidation"
    from_seq: int
    to_seq: int
    mode: Literal["llm", "raw", "trimmed"]
    timestamp: str | None = None


class Archived(Line):
    """An archived transcript's consolidation has landed: nothing is left to resume."""

    type: Literal["archived"] = "archived"
    timestamp: str | None = None


class OverLimit(Line):
    """A message over its sender's rate limit, kept as it came: never sent to the model, never
    answered (gateway/daemon/ratelimit.py). Not a message line, so no turn sees it."""

    type: Literal["over_limit"] = "over_limit"
    message_id: str | None = None
    sender_id: str
    sender_name: str | None = None
    content: str
    media: list[str] | None = None
    sent_at: str
    timestamp: str | None = None


class ExecApproval(Line):
    """The owner's answer to an exec approval card (agent/tools/approval.py): `who` pressed
    (a platform id; "timeout" or "expired" when no one did), and what it allowed."""

    type: Literal["exec_approval"] = "exec_approval"
    command: str
    cwd: str
    decision: Literal["once", "session", "deny", "timeout", "expired", "allowed"]
    who: str
    timestamp: str | None = None


# What callers may append (the header is the store's to write).
RecordKind = (
    State
    | Delivery
    | TurnError
    | Command
    | Stopped
    | Streamed
    | Compaction
    | Consolidation
    | Archived
    | OverLimit
    | ExecApproval
)
Record = Annotated[RecordKind, Field(discriminator="type")]

# Every line that is not a message, as it is read back.
RECORD_LINE: TypeAdapter[SessionHeader | RecordKind] = TypeAdapter(
    Annotated[SessionHeader | RecordKind, Field(discriminator="type")]
)
