"""Starts the enabled channels, keeps them running, and routes each outbound message.

Each channel has a supervisor task: it starts the channel, and if `start()` fails or the
channel reports that it died, restarts it with exponential backoff - one channel down never
holds up the others. A channel reports death through an optional `wait_closed()` coroutine
(returns or raises when its connection is gone); without one it is assumed alive once started.
A running channel that cannot receive (Telegram's polling failing for over a minute) says so
through an optional `failing()` (its last error, or None); it is then reported as failing.
"ready" is logged only for a channel whose optional `connected()` is true (Telegram: getMe
answered). A start refused with `CredentialsRejected` (Telegram's InvalidToken, Discord's
LoginFailure or close code 4004) is remembered: `rejected()` lists those channels, and the
daemon stops with exit code 2 when every chat channel is one of them (beside a working
channel, the refused one stays failed in status and is retried). `ChannelStates` is what
/status, status.json and `clawgate status` read.

Outbound: `run_outbound` sends each reply through its channel (the replying agent's bot,
through `account_of`), with its text and any error redacted, and reports the outcome to
`on_delivery` (the runtime's `record_delivery`: a `Delivery` record, sent or failed).
`stream` hands a reply still being written to its channel, redacted the same way; a channel
that shows it calls `on_stream_open` before its first piece (the runtime's `record_stream`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from clawgate.channels.base import Channel, StreamOpened
from clawgate.kernel.bus import InboundMessage, MessageBus, OutboundMessage, ReplyDraft
from clawgate.kernel.errors import ChannelError, CredentialsRejected
from clawgate.kernel.retry import Backoff
from clawgate.kernel.secrets import Redactor

log = logging.getLogger(__name__)

# Replies to different chats go out side by side; one slow chat must not hold up the rest.
MAX_PARALLEL_SENDS = 16

DeliveryHook = Callable[[OutboundMessage, str | None], Awaitable[None]]
AccountOf = Callable[[str | None, str], str]
Sleep = Callable[[float], Awaitable[object]]

RESTART_BACKOFF = Backoff(first=1.0, factor=2.0, cap=300.0)
# A start that neither succeeds nor fails would leave the channel dead with no retry.
START_TIMEOUT = 120.0
# A channel that stayed up this long was healthy: its next failure starts backoff afresh.
STABLE_AFTER = 60.0

STARTING = "starting"
RUNNING = "running"
RESTARTING = "restarting"  # died after running; waiting out the backoff
FAILED = "failed"  # the last start attempt failed; waiting out the backoff
FAILING = "failing"  # started, but cannot receive (the channel's `failing()` says why)
STOPPED = "stopped"


@dataclass
class _Supervised:
    channel: Channel
    state: str
    since: float
    last_error: str | None = None
    restarts: int = 0
    task: asyncio.Task[None] | None = None
    rejected: bool = False  # the last start failed because the platform refused the token
    key: str = ""  # the manager's name for it: its platform, or its account ("telegram@work")


class ChannelStates:
    """Each channel's supervision state, kept current by the ChannelManager it is given to.

    Made before that manager, so whatever reports it can be built first: the agent runtime
    answers `/status` with it, and the manager needs the runtime (to record deliveries).
    """

    def __init__(self) -> None:
        self._channels: dict[str, _Supervised] = {}

    def _track(self, channels: Mapping[str, Channel], now: float) -> dict[str, _Supervised]:
        self._channels = {
            key: _Supervised(channel, STOPPED, now, key=key) for key, channel in channels.items()
        }
        return self._channels

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """Per channel: state, last_error, restarts, since (a timestamp from the clock)."""
        report: dict[str, dict[str, Any]] = {}
        for name, sup in self._channels.items():
            state, error = sup.state, sup.last_error
            trouble = _trouble(sup.channel) if state == RUNNING else None
            if trouble is not None:
                state, error = FAILING, trouble
            report[name] = {
                "state": state,
                "last_error": error,
                "restarts": sup.restarts,
                "since": sup.since,
            }
        return report


def _trouble(channel: Channel) -> str | None:
    failing = getattr(channel, "failing", None)
    return failing() if failing is not None else None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return f"did not become ready within {START_TIMEOUT:g} s"
    return str(exc) or type(exc).__name__


def _seconds(delay: float) -> str:
    return f"{delay:g} s"


class ChannelManager:
    def __init__(
        self,
        bus: MessageBus,
        channels: Iterable[Channel] | Mapping[str, Channel],
        *,
        on_delivery: DeliveryHook | None = None,
        states: ChannelStates | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.time,
        redact: Redactor | None = None,
        account_of: AccountOf | None = None,
        on_stream_open: StreamOpened | None = None,
    ) -> None:
        """`redact`: the gateway's redactor; every text sent and every error kept for
        status passes it (by default only token-shaped values are caught).
        `channels` by account key when several bots share a platform ("telegram@work"), and
        then `account_of(agent, platform)` names the one a message of that agent goes
        through; else each channel is its platform's only one."""
        self.bus = bus
        self.redact = redact or Redactor()
        if isinstance(channels, Mapping):
            self.channels = dict(channels)
        else:
            self.channels = {channel.name: channel for channel in channels}
        self._account_of = account_of
        # Called with (message, None) once sent, or (message, error) once given up on.
        self._on_delivery = on_delivery
        self._on_stream_open = on_stream_open
        self._sleep = sleep
        self._clock = clock
        self.states = states if states is not None else ChannelStates()
        self._supervised = self.states._track(self.channels, clock())

    # -- lifecycle -------------------------------------------------------------------------

    async def start_all(self, tasks: asyncio.TaskGroup | None = None) -> None:
        """Start every channel at once; return when each has started or failed its first try.

        A channel that failed keeps being retried in the background, by a supervisor task
        created in `tasks` (the gateway's TaskGroup) when given; `stop_all` ends them.
        """
        spawn = tasks.create_task if tasks is not None else asyncio.create_task
        first_tries: list[asyncio.Event] = []
        for sup in self._supervised.values():
            if sup.task is not None and not sup.task.done():
                continue
            tried = asyncio.Event()
            first_tries.append(tried)
            sup.task = spawn(self._supervise(sup, tried), name=f"channel:{sup.key}")
        await asyncio.gather(*(tried.wait() for tried in first_tries))

    async def stop_all(self) -> None:
        # Supervisors go first, so a channel closing because we stop it is not "restarted".
        tasks = [sup.task for sup in self._supervised.values() if sup.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for sup in self._supervised.values():
            sup.task = None
            try:
                await sup.channel.stop()
            except Exception:
                log.exception("channel %s did not stop cleanly", sup.key)
            self._set_state(sup, STOPPED)

    async def close_all(self) -> None:
        """After `stop_all` and the last replies: each channel releases its connections."""
        for sup in self._supervised.values():
            try:
                await sup.channel.close()
            except Exception:
                log.exception("channel %s did not close cleanly", sup.key)

    def status(self) -> dict[str, dict[str, Any]]:
        return self.states.snapshot()

    def rejected(self) -> dict[str, str]:
        """Channels whose last start failed because their token was refused: their errors."""
        return {
            name: sup.last_error or "credentials rejected"
            for name, sup in self._supervised.items()
            if sup.rejected and sup.state == FAILED
        }

    async def admitted(self, message: InboundMessage, accepted: bool) -> None:
        """Pass the dispatcher's decision on to the message's channel (an optional
        `admitted(message, accepted)`): typing only for what will be answered."""
        hook = getattr(self._channel_of(message), "admitted", None)
        if hook is None:
            return
        try:
            await hook(message, accepted)
        except Exception:
            # The dispatcher must keep reading its queue whatever a channel makes of this.
            log.exception(
                "%s: channel %s failed to take note", message.session_key, message.channel
            )

    async def turn_started(self, message: InboundMessage) -> None:
        """Tell the message's channel its turn starts now (an optional `turn_started`)."""
        hook = getattr(self._channel_of(message), "turn_started", None)
        if hook is None:
            return
        try:
            await hook(message)
        except Exception:
            log.exception(
                "%s: channel %s failed to take note", message.session_key, message.channel
            )

    def _channel_of(self, message: InboundMessage | OutboundMessage | ReplyDraft) -> Channel | None:
        if self._account_of is None:
            return self.channels.get(message.channel)
        return self.channels.get(self._account_of(message.agent, message.channel))

    # -- supervision -----------------------------------------------------------------------

    async def _supervise(self, sup: _Supervised, first_try: asyncio.Event) -> None:
        name = sup.key
        failures = 0  # in a row: a run of STABLE_AFTER starts the count afresh
        try:
            while True:
                failure = await self._start_once(sup)
                first_try.set()
                died: str | None = None
                if failure is None:
                    if getattr(sup.channel, "connected", lambda: True)():
                        log.info("channel %s ready", name)
                    else:
                        log.warning(
                            "channel %s started but cannot reach its platform yet; it keeps trying",
                            name,
                        )
                    started = self._clock()
                    died = await self._until_closed(sup.channel)
                    if died is None:
                        return  # no way to watch it: assume it stays up
                    if self._clock() - started >= STABLE_AFTER:
                        failures = 0
                failures += 1
                delay = RESTART_BACKOFF.delay(failures)
                if died is not None:
                    sup.last_error = self.redact(died)
                    self._set_state(sup, RESTARTING)
                    log.warning(
                        "channel %s stopped unexpectedly: %s; restarting in %s",
                        name,
                        died,
                        _seconds(delay),
                    )
                    await self._quiet_stop(sup.channel)
                else:
                    # A ChannelError is a condition a person fixes (bad token, no network):
                    # one line. Anything else is a bug in the adapter and gets its traceback.
                    expected = isinstance(failure, ChannelError | TimeoutError)
                    log.error(
                        "channel %s failed to start: %s; retrying in %s",
                        name,
                        sup.last_error,
                        _seconds(delay),
                        exc_info=None if expected else failure,
                    )
                await self._sleep(delay)
                sup.restarts += 1
        finally:
            first_try.set()

    async def _start_once(self, sup: _Supervised) -> Exception | None:
        """Start the channel; None when ready, else why not (also kept as last_error)."""
        self._set_state(sup, STARTING)
        try:
            async with asyncio.timeout(START_TIMEOUT):
                await sup.channel.start()
        except Exception as exc:
            sup.last_error = self.redact(_describe(exc))
            sup.rejected = isinstance(exc, CredentialsRejected)
            self._set_state(sup, FAILED)
            # Release whatever the half-done start holds before the next attempt.
            await self._quiet_stop(sup.channel)
            return exc
        self._set_state(sup, RUNNING)
        return None

    async def _until_closed(self, channel: Channel) -> str | None:
        """Wait until the channel reports death; its reason, or None if it cannot report."""
        wait_closed = getattr(channel, "wait_closed", None)
        if wait_closed is None:
            return None
        try:
            await wait_closed()
        except Exception as exc:
            return _describe(exc)
        return "connection closed"

    async def _quiet_stop(self, channel: Channel) -> None:
        try:
            await channel.stop()
        except Exception as exc:
            log.debug("channel %s: stop after failure raised: %s", channel.name, exc)

    def _set_state(self, sup: _Supervised, state: str) -> None:
        if sup.state != state:
            sup.state = state
            sup.since = self._clock()

    # -- outbound --------------------------------------------------------------------------

    async def deliver(self, message: OutboundMessage) -> None:
        text = self.redact(message.text)
        if text != message.text:
            message = message.model_copy(update={"text": text})
        channel = self._channel_of(message)
        error: str | None = None
        if channel is None:
            error = f"no channel named {message.channel!r} is running"
            log.error("%s: reply dropped: %s", message.session_key, error)
        else:
            try:
                await channel.send(message)
            except Exception as exc:
                error = str(exc) or type(exc).__name__
                log.error("%s: reply not delivered: %s", message.session_key, error)
        if self._on_delivery is not None:
            await self._on_delivery(message, error)

    async def stream(self, draft: ReplyDraft) -> None:
        """A reply so far, to its channel (which may show it or ignore it)."""
        channel = self._channel_of(draft)
        if channel is None:
            return
        text = self.redact(draft.text)
        status = self.redact(draft.status) if draft.status else draft.status
        if text != draft.text or status != draft.status:
            draft = draft.model_copy(update={"text": text, "status": status})
        try:
            await channel.stream(draft, self._stream_opened)
        except Exception:
            # A preview that fails must not fail the turn: the complete reply still goes out.
            log.exception("%s: live reply failed", draft.session_key)

    async def _stream_opened(self, draft: ReplyDraft) -> None:
        if self._on_stream_open is not None:
            await self._on_stream_open(draft)

    async def run_outbound(self) -> None:
        """Deliver outbound messages until cancelled: chats in parallel (up to
        MAX_PARALLEL_SENDS), each chat's replies one at a time in order."""
        queues: dict[str, deque[OutboundMessage]] = {}
        workers: set[asyncio.Task[None]] = set()
        slots = asyncio.Semaphore(MAX_PARALLEL_SENDS)

        async def work(key: str) -> None:
            queue = queues[key]
            try:
                while queue:
                    message = queue.popleft()
                    try:
                        async with slots:
                            await self.deliver(message)
                    except Exception:
                        # Recording the delivery failed; later replies must still go out.
                        log.exception("%s: delivery bookkeeping failed", message.session_key)
                    finally:
                        self.bus.outbound.task_done()
            finally:
                del queues[key]

        try:
            while True:
                message = await self.bus.outbound.get()
                key = message.agent_session_key
                if key in queues:
                    queues[key].append(message)
                    continue
                queues[key] = deque([message])
                task = asyncio.create_task(work(key), name=f"send {key}")
                workers.add(task)
                task.add_done_callback(workers.discard)
        finally:
            for task in list(workers):
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
