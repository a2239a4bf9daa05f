"""Runs the inbound messages the gateway submits (daemon/gateway.py takes them off the
bus): in order within a session, sessions in parallel up to a cap. Owns every running turn, so it is where /stop and shutdown act.

On `submit` a `/stop` (any command whose `interrupts` is true, by the agent's own
`parse_command`) cancels the session's running turn, and only that turn: the messages queued
behind it still run, in order. Once the cancelled turn has ended, `on_stopped` records it (the
agent's `record_stop`: a replay or a restart never runs it again) and the `/stop` is answered
"Stopped." (reply_to: the /stop; `stopped`: the message whose turn ended, the only one a
channel's journal may mark answered for it). A turn that finished before the cancel reached
it was not stopped: the `/stop` then takes its place at the head of the queue, like a /stop
with nothing running. Every other message meets the per-sender rate limit (ratelimit.py): an
owner's is queued and its turn waits for room in the window; anyone else's over the limit is
queued to be kept, not answered (`keep_over_limit`), and only once it is stored does its
channel hear it will not be answered. The channel hears each message's fate through
`on_admitted`. Each session key has one FIFO and one worker task while it is busy; a global
semaphore caps the turns running at once
(`agent.max_concurrent_turns`). Right before a turn the trust is decided again
(`AccessPolicies.decide`, channels/access.py), so replays and queued messages get the trust the
rules give now; a message no longer served is dropped and its channel told.
`run_in_session` queues other work - a scheduled reply's delivery - in a session's FIFO, so
it never lands inside a turn.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from clawgate.agent.commands import parse_command
from clawgate.channels.access import AccessPolicies
from clawgate.gateway.daemon.ratelimit import RateLimiter, Verdict, delay_notice, limit_notice
from clawgate.kernel.bus import InboundMessage, MessageBus, OutboundMessage

log = logging.getLogger(__name__)

Handler = Callable[[InboundMessage], Coroutine[Any, Any, OutboundMessage | None]]
# Told of a message whose turn a /stop ended, before "Stopped." goes out.
Stopped = Callable[[InboundMessage], Awaitable[None]]
# Told of each message's fate: True once it is queued for a turn, False when it will not be
# answered (kept over the rate limit, or no longer served by the access rules).
Admitted = Callable[[InboundMessage, bool], Awaitable[None]]
# Told of each message whose turn starts now (the channel shows it: a status reaction).
TurnStarts = Callable[[InboundMessage], Awaitable[None]]
# Stores a message over the rate limit, marked, without a turn (AgentRuntime.keep_over_limit).
Keep = Callable[[InboundMessage], Awaitable[None]]
INTERNAL_ERROR = "Sorry, something went wrong on my side (it has been logged). Please try again."
T = TypeVar("T")


@dataclass(frozen=True)
class _Job:
    """Work queued in a session's FIFO like a message, e.g. a scheduled reply's delivery."""

    work: Callable[[], Awaitable[Any]]
    done: asyncio.Future[Any]

    async def run(self) -> None:
        if self.done.done():
            return  # its caller gave up waiting (cancelled): nothing to deliver to
        try:
            result = await self.work()
        except asyncio.CancelledError:
            self.done.cancel()
            raise
        except Exception as exc:
            if not self.done.done():
                self.done.set_exception(exc)
            return
        if not self.done.done():
            self.done.set_result(result)


class Dispatcher:
    """Per-session FIFO queues, one worker task per busy session, a global concurrency cap.

    Messages that arrive while their session's turn runs wait and get their own turn after
    it; they are not merged, so every message gets exactly one answer.
    """

    def __init__(
        self,
        bus: MessageBus,
        handle: Handler,
        *,
        max_concurrent: int = 8,
        messages_per_minute: int = 0,
        rate_limiter: RateLimiter | None = None,
        on_admitted: Admitted | None = None,
        keep_over_limit: Keep,
        trusts: AccessPolicies | None = None,
        context: contextvars.Context | None = None,
        on_stopped: Stopped | None = None,
        on_turn: TurnStarts | None = None,
    ) -> None:
        """`rate_limiter` replaces the one built from `messages_per_minute` (0 = off), e.g.
        one with a clock a test moves. `on_admitted` hears whether each message will be
        answered (the channels' typing indicator and journal act on it). `trusts` decides
        each message's trust right before its turn (replays and queued messages included);
        without it the channel's trust stands. `keep_over_limit` stores a message over the
        rate limit without a turn. `on_stopped` records a turn a /stop ended; `on_turn` hears
        of each turn as it starts. `context`: the
        one the session workers run in (a copy of it each), e.g. one that names the agent in
        log lines."""
        self.bus = bus
        self._context = context
        self._on_stopped = on_stopped
        self._on_turn = on_turn
        # Per session, the /stops that cancelled its running turn, answered once it has ended.
        self._stops: dict[str, list[InboundMessage]] = {}
        self._trusts = trusts
        self._keep_over_limit = keep_over_limit
        self._handle = handle
        self._on_admitted = on_admitted
        self.rate_limiter = rate_limiter or RateLimiter(messages_per_minute)
        self._slots = asyncio.Semaphore(max_concurrent)
        self._queues: dict[str, deque[InboundMessage | _Job]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._turns: dict[str, asyncio.Task[OutboundMessage | None]] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self._accepting = True

    async def submit(self, message: InboundMessage) -> None:
        if not self._accepting:
            log.warning("%s: shutting down, message left for the next start", message.session_key)
            return
        command = parse_command(message.text)
        if command is not None and command.interrupts and message.session_key in self._turns:
            self._turns[message.session_key].cancel()
            self._stops.setdefault(message.session_key, []).append(message)
            return
        key = message.session_key
        if not self._is_owner(message) and not await self._within_limit(message):
            self._queues.setdefault(key, deque()).append(self._kept(message))
            self._ensure_worker(key)
            return
        self._queues.setdefault(key, deque()).append(message)
        if self._on_admitted is not None:
            await self._on_admitted(message, True)
        self._ensure_worker(key)

    async def run_in_session(self, key: str, work: Callable[[], Awaitable[T]]) -> T:
        """Run `work` in session `key`'s FIFO: after the turns queued before it (and their
        replies), before those queued after. A scheduled reply appended in the middle of a
        turn would land between a tool call and its result."""
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queues.setdefault(key, deque()).append(_Job(work, done))
        self._ensure_worker(key)
        return await done

    def _ensure_worker(self, key: str) -> None:
        if key not in self._workers:
            self._idle.clear()
            self._workers[key] = asyncio.create_task(
                self._work(key),
                name=f"session {key}",
                context=self._context.copy() if self._context is not None else None,
            )

    def _is_owner(self, message: InboundMessage) -> bool:
        if message.trust.is_owner or message.sender_is_owner:
            return True
        return self._trusts is not None and self._trusts.sender_is_owner(
            message.channel, message.facts
        )

    async def _within_limit(self, message: InboundMessage) -> bool:
        """Apply the per-sender rate limit to someone not an owner: over it, a message gets
        no turn. Commands count too: only a /stop of a running turn (above) is never refused."""
        verdict = self.rate_limiter.check(message)
        if verdict is Verdict.ACCEPT:
            return True
        sender = self.rate_limiter.sender_key(message)
        if verdict is Verdict.NOTIFY:
            log.info("%s: over the rate limit, told the sender once", sender)
            await self._notice(message, limit_notice(self.rate_limiter.per_minute))
        else:
            log.debug("%s: over the rate limit, message kept unanswered", sender)
        return False

    async def _notice(self, message: InboundMessage, text: str) -> None:
        # No reply_to: the notice answers nothing, and a channel's journal must not take it
        # as having answered this sender's earlier, still queued messages.
        await self.bus.publish_outbound(
            OutboundMessage(channel=message.channel, chat_id=message.chat_id, text=text)
        )

    def _kept(self, message: InboundMessage) -> _Job:
        """A message over the limit, stored in its turn (so its session's lines keep their
        order); its channel hears it will not be answered only once it is stored."""

        async def keep() -> None:
            try:
                await self._keep_over_limit(message)
                if self._on_admitted is not None:
                    await self._on_admitted(message, False)
            except Exception as exc:
                # Still pending in its channel's journal: a restart offers it again.
                log.warning("%s: a message over the limit not kept: %s", message.session_key, exc)

        return _Job(keep, asyncio.get_running_loop().create_future())

    async def _owner_room(self, message: InboundMessage) -> None:
        """An owner's turn waits for room in the sender's window: delayed, never lost."""
        if not self._is_owner(message):
            return

        async def notify() -> None:
            sender = self.rate_limiter.sender_key(message)
            log.info("%s: over the rate limit, the owner's messages wait their turn", sender)
            await self._notice(message, delay_notice(self.rate_limiter.per_minute))

        await self.rate_limiter.wait_turn(message, notify)

    async def _work(self, key: str) -> None:
        queue = self._queues[key]
        try:
            while queue:
                message = queue.popleft()
                if isinstance(message, _Job):
                    await message.run()
                    continue
                current = await self._with_current_trust(message)
                if current is None:
                    continue
                await self._owner_room(current)
                async with self._slots:
                    if self._on_turn is not None:
                        await self._on_turn(current)
                    reply = await self._run_one(key, current)
                if reply is not None:
                    await self.bus.publish_outbound(reply)
        finally:
            del self._workers[key]
            for item in queue:
                if isinstance(item, _Job):
                    item.done.cancel()  # shutdown cancelled the worker: it never runs
            if not queue:
                self._queues.pop(key, None)
            if not self._workers:
                self._idle.set()

    async def _with_current_trust(self, message: InboundMessage) -> InboundMessage | None:
        """The message at the trust the access rules give it now; None (and the channel told
        it is ignored) when they no longer serve it."""
        if self._trusts is None:
            return message
        trust = self._trusts.decide(message.channel, message.facts, message.trust)
        if trust is None:
            log.warning("%s: sender no longer served by the access rules", message.session_key)
            if self._on_admitted is not None:
                await self._on_admitted(message, False)
            return None
        owner = trust.is_owner or self._trusts.sender_is_owner(message.channel, message.facts)
        if trust is message.trust and owner == message.sender_is_owner:
            return message
        return message.model_copy(update={"trust": trust, "sender_is_owner": owner})

    async def _run_one(self, key: str, message: InboundMessage) -> OutboundMessage | None:
        turn = asyncio.create_task(self._handle(message), name=f"turn {key}")
        self._turns[key] = turn
        try:
            await asyncio.wait({turn})
        except asyncio.CancelledError:
            turn.cancel()
            await asyncio.gather(turn, return_exceptions=True)
            if stops := self._stops.pop(key, []):
                await self._stopped(message, stops)  # shutdown came on top of a /stop
            raise
        finally:
            self._turns.pop(key, None)
        stops = self._stops.pop(key, [])
        if turn.cancelled():
            if stops:
                await self._stopped(message, stops)
            return None
        # Finished before the cancel reached it: each /stop is answered as with nothing running.
        self._queues[key].extendleft(reversed(stops))
        exc = turn.exception()
        if exc is not None:
            log.error("%s: turn failed", key, exc_info=exc)
            return _reply(message, INTERNAL_ERROR, is_error=True)
        return turn.result()

    async def _stopped(self, message: InboundMessage, stops: list[InboundMessage]) -> None:
        """The turn of `message` ended by /stop: recorded, then each /stop answered; the
        first names the stopped message, so its channel marks that one answered."""
        if self._on_stopped is not None:
            try:
                await self._on_stopped(message)
            except OSError as exc:
                # Not recorded: a restart may run it again, as for a turn a crash cut off.
                log.error("%s: the stop could not be recorded: %s", message.session_key, exc)
        for n, stop in enumerate(stops):
            notice = _reply(stop, "Stopped.")
            if n == 0 and message.message_id:
                notice = notice.model_copy(update={"stopped": message.message_id})
            await self.bus.publish_outbound(notice)

    def running(self) -> int:
        """How many turns run right now."""
        return len(self._turns)

    def busy_sessions(self) -> list[str]:
        """The sessions running a turn right now."""
        return sorted(self._turns)

    def busy(self, key: str) -> bool:
        return key in self._turns

    async def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no session has work queued or running; False on timeout."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def shutdown(self, grace: float) -> None:
        """Stop taking new messages, let queued and running turns finish for `grace` seconds,
        then cancel them (a cancelled turn persists what it produced, tool pairs intact)."""
        self._accepting = False
        if not await self.wait_idle(grace):
            for task in list(self._workers.values()):
                task.cancel()
            await asyncio.gather(*self._workers.values(), return_exceptions=True)


def _reply(message: InboundMessage, text: str, *, is_error: bool = False) -> OutboundMessage:
    # reply_to lets a channel mark the message as answered (Telegram's inbound journal).
    return OutboundMessage(
        channel=message.channel,
        chat_id=message.chat_id,
        text=text,
        reply_to=message.message_id or None,
        is_error=is_error,
    )
