"""What a cron job and the heartbeat share: a turn in their own session with the trust the
access rules give the chat they report to now, then the reply appended to that chat's
session and sent there.

After each run the job's session is trimmed to its last few runs (a `consolidation` record
with mode "trimmed", see agent/scheduled.py), so it never replays a growing history.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from clawgate.agent.scheduled import condition_unmet, trim_history
from clawgate.agent.session import Message
from clawgate.channels.access import AccessPolicies
from clawgate.kernel.bus import InboundMessage, MessageBus, OutboundMessage, Trust
from clawgate.kernel.errors import CronError

if TYPE_CHECKING:
    from clawgate.agent.runtime import AgentRuntime

T = TypeVar("T")


class ScheduledBudget(Protocol):
    def admit_scheduled(self, session_key: str) -> bool: ...


class SessionQueues(Protocol):
    """What scheduled runs need of the daemon's dispatcher (gateway/daemon/dispatcher.py),
    which sits a floor above cron: a place in a session's turn order, whether a session is
    running a turn, and the chats' budget of scheduled runs."""

    @property
    def rate_limiter(self) -> ScheduledBudget: ...

    async def run_in_session(self, key: str, work: Callable[[], Awaitable[T]]) -> T: ...

    def busy(self, key: str) -> bool: ...


class ScheduledTurns:
    """Run a turn in a scheduled session; deliver its reply to a chat and append it there."""

    def __init__(self, runtime: AgentRuntime, bus: MessageBus, dispatcher: SessionQueues) -> None:
        self.runtime = runtime
        self.bus = bus
        self.dispatcher = dispatcher
        self.trusts = AccessPolicies.from_config(runtime.config)

    async def target_trust(self, key: str) -> Trust:
        """The trust the access rules give the target chat now, from the platform facts it
        last recorded (never the trust it last had). Terminal sessions are the owner's; a
        chat that never recorded its facts counts as `allowed`, never as owner. CronError
        when the rules no longer serve the chat."""
        channel = key.partition(":")[0]
        session = await self.runtime.sessions.get(key)
        # Not recorded, or a trust this version does not know (SessionState): `allowed`.
        recorded = session.state.trust or Trust.ALLOWED
        trust = self.trusts.for_chat(channel, session.state.chat, recorded)
        if trust is None:
            raise CronError(f"{key} is not served by the access rules any more")
        return trust

    async def unmet(self, condition: str, key: str) -> str | None:
        """None when a job's `condition` exits 0 run for the chat `key` (with the trust the
        rules give it now), else why the job does not run."""
        try:
            trust = await self.target_trust(key)
        except CronError as exc:
            return str(exc)
        return await condition_unmet(self.runtime, condition, trust, key)

    async def turn(
        self, channel: str, chat_id: str, text: str, trust: Trust, *, keep_runs: int
    ) -> OutboundMessage | None:
        message = InboundMessage(
            channel=channel,
            chat_id=chat_id,
            sender_id="scheduler",
            sender_name="scheduler",
            text=text,
            trust=trust,
        )
        sessions = self.runtime.sessions
        session = await sessions.get(message.session_key)
        with session.pinned():
            try:
                reply = await self.runtime.loop.handle(message)
            finally:
                keep = max(self.runtime.config.agent.memory_window // 2, 2)
                trim_history(sessions, session, keep_runs=keep_runs, max_messages=keep)
        await sessions.sync(session)
        return reply

    async def deliver(self, deliver_to: str, text: str, *, label: str) -> None:
        """Append `label + text` to the target session and send `text` to its chat, in that
        session's turn order: never while one of its turns (and its tool calls) runs."""
        await self.dispatcher.run_in_session(
            deliver_to, lambda: self._append_and_send(deliver_to, text, label)
        )

    async def _append_and_send(self, deliver_to: str, text: str, label: str) -> None:
        channel, chat_id = deliver_to.split(":", 1)
        sessions = self.runtime.sessions
        target = await sessions.get(deliver_to)
        stored = sessions.append(target, Message(role="assistant", content=label + text))
        await sessions.sync(target)
        await self.bus.publish_outbound(
            OutboundMessage(channel=channel, chat_id=chat_id, text=text, seq=stored.seq)
        )
