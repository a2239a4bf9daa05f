"""At-most-once replies: what was answered, and what to do when a message comes back.

Channels may hand the same platform message over twice (a restart before the channel
acknowledged it, a webhook retried). Each user message is stored with its platform id, so a
second copy is recognised, and its turn is neither run nor answered twice. The words:

- handed out: this process put the reply on the outbound queue (`hand_out`). Kept in memory
  only, it covers the moment between that and the delivery record.
- delivered: a `Delivery` record with status "sent" names the reply's seq.
- answered: handed out or delivered. An answered reply is never sent again.
- stopped: a /stop ended the message's turn (a `Stopped` record names it); the "Stopped."
  notice was its answer, so it is answered too, and never run again.
- streamed: a channel began to show the reply while it was written (a `Streamed` record names
  the message, written before the first piece showed). That shown reply is its answer, even
  if the turn never finished: the channel finishes or marks it, and nothing answers again.
- unanswered: the last user message carries a platform id, no reply followed it and none
  began to show: the process died mid-turn. The gateway publishes it again at start
  (`unanswered`).

A slash command is recognised the same way: its `Command` record names its platform id, and
the ids of the commands a transcript ran are carried into the one /new starts after it, so a
command replayed after a crash is skipped however many /new ran since.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from clawgate.agent.session.messages import StoredMessage
from clawgate.agent.session.records import Stopped, Streamed
from clawgate.agent.session.transcript import Session


def hand_out(session: Session, seq: int) -> None:
    """The reply at `seq` is on the outbound queue: until its delivery record lands, this is
    what stops a re-delivered copy of the message from sending it a second time."""
    session.handed_out.add(seq)


def delivered(session: Session, seq: int) -> bool:
    return any(r.status == "sent" for r in session.deliveries_for(seq))


def answered(session: Session, seq: int) -> bool:
    return seq in session.handed_out or delivered(session, seq)


def reply_to(session: Session, user_seq: int) -> StoredMessage | None:
    """The final assistant reply that answered the user message at `user_seq`, if any."""
    for message in session.messages_after(user_seq):
        if message.role == "user":
            return None
        if message.role == "assistant" and not message.tool_calls:
            return message
    return None


def command_ran(session: Session, message_id: str) -> bool:
    """A slash command with this platform id already ran, here or in a transcript a later
    /new archived (a `Command` record named it)."""
    return message_id in session.command_ids


def stopped(session: Session, message_id: str) -> bool:
    """A /stop ended the turn of the message with this platform id."""
    return any(r.message_id == message_id for r in session.records_of(Stopped))


def streamed(session: Session, message_id: str) -> bool:
    """A reply to the message with this platform id began to show in its chat."""
    return any(r.message_id == message_id for r in session.records_of(Streamed))


class Replay(Enum):
    """What to do with a message whose platform id this session has already stored."""

    ANSWERED = "answered"  # its reply was handed out or delivered: send nothing
    # never answered, but later messages were (or /new came after): do not reopen it
    SUPERSEDED = "superseded"
    UNSENT = "unsent"  # replied, but the reply never left: send that reply
    UNFINISHED = "unfinished"  # the turn never finished: finish it, storing nothing twice


@dataclass(frozen=True)
class ReplayDecision:
    action: Replay
    reply: StoredMessage | None = None  # the stored reply, for UNSENT


def replay(session: Session, user_seq: int, message_id: str = "") -> ReplayDecision:
    """The decision for a re-delivered copy of the user message stored at `user_seq` (whose
    platform id is `message_id`)."""
    if user_seq < session.first_seq:
        # Stored in a transcript /new has archived since: that conversation is closed.
        return ReplayDecision(Replay.SUPERSEDED)
    reply = reply_to(session, user_seq)
    if reply is not None:
        if answered(session, reply.seq):
            return ReplayDecision(Replay.ANSWERED)
        return ReplayDecision(Replay.UNSENT, reply)
    if any(m.role == "user" for m in session.messages_after(user_seq)):
        return ReplayDecision(Replay.SUPERSEDED)
    if message_id and streamed(session, message_id):
        return ReplayDecision(Replay.ANSWERED)  # cut mid-stream: what showed is its reply
    return ReplayDecision(Replay.UNFINISHED)


def unanswered(session: Session) -> StoredMessage | None:
    """The last user message if it came with a platform id, no reply followed it and none
    began to show."""
    last_user = session.last_user_message()
    if last_user is None or not last_user.message_id:
        return None
    if reply_to(session, last_user.seq) is not None or stopped(session, last_user.message_id):
        return None
    if streamed(session, last_user.message_id):
        return None
    return last_user
