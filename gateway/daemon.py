"""Wires channels to the agent: bus -> dispatcher -> agent loop -> bus -> channel manager."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from clawgate.agent.runtime import AgentRuntime
from clawgate.agent.tools.shell import forbid_environ_reads
from clawgate.channels.access import Trusts
from clawgate.channels.base import Channel
from clawgate.channels.manager import ChannelManager, ChannelStates
from clawgate.gateway.control import ControlChannel
from clawgate.gateway.cron.scheduler import CronScheduler
from clawgate.gateway.cron.tool import cron_tools
from clawgate.gateway.dispatcher import Dispatcher
from clawgate.gateway.ops.housekeeping import sweep
from clawgate.gateway.ops.status import StatusWriter
from clawgate.gateway.ratelimit import RateLimiter
from clawgate.kernel.bus import MessageBus
from clawgate.kernel.config import Config
from clawgate.kernel.errors import ChannelError, CredentialsRejected

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_SECONDS = 20.0
HOUSEKEEPING_EVERY_SECONDS = 24 * 3600.0


class Gateway:
    """A running set of channels around one agent runtime.

    Built in dependency order; nothing is set on a part once built. `start` opens one
    TaskGroup that owns every long-lived task: outbound, dispatcher, one supervisor per
    channel and, in the daemon, the status writer and housekeeping (the cron scheduler still
    keeps its own tasks, which its `stop` ends). `stop` is the shutdown order.
    """

    def __init__(
        self,
        runtime: AgentRuntime,
        channels: Sequence[Channel],
        bus: MessageBus,
        *,
        channel_states: ChannelStates | None = None,
        scheduler: bool = False,
        scheduler_options: Mapping[str, Any] | None = None,
        rate_limiter: RateLimiter | None = None,
        daemon: bool = False,
    ) -> None:
        """`runtime` must be built with `outbox=bus.publish_outbound` (and, to show channel
        states in /status, `channel_status=channel_states.snapshot`).
        `scheduler`: run cron jobs and the heartbeat (only the daemon does: one process fires
        the jobs; its runtime is built with `cron_tools`), with `scheduler_options` passed to
        `CronScheduler`. `rate_limiter`: the dispatcher's, instead of one from the config.
        `daemon`: also keep `<data_dir>/status.json` current and run the daily housekeeping."""
        if runtime.loop.outbox != bus.publish_outbound:
            # Caught here, not when a send_file call finds no way out.
            raise ValueError("build the runtime with outbox=bus.publish_outbound")
        self.runtime = runtime
        self.bus = bus
        self.manager = ChannelManager(
            bus,
            channels,
            on_delivery=runtime.record_delivery,
            states=channel_states,
            redact=runtime.redact,
        )
        self.dispatcher = Dispatcher(
            bus,
            runtime.loop.handle,
            max_concurrent=runtime.config.agent.max_concurrent_turns,
            messages_per_minute=runtime.config.limits.messages_per_minute,
            rate_limiter=rate_limiter,
            on_admitted=self.manager.admitted,
            trusts=Trusts.from_config(runtime.config),
        )
        self.scheduler: CronScheduler | None = None
        if scheduler:
            self.scheduler = CronScheduler(
                runtime, bus, self.dispatcher, **dict(scheduler_options or {})
            )
        self.status: StatusWriter | None = None
        if daemon:
            self.status = StatusWriter(runtime.config.data_dir, self._report, runtime.redact)
        self._running: contextlib.AsyncExitStack | None = None
        self._dispatching: asyncio.Task[None] | None = None
        self._outbound: asyncio.Task[None] | None = None
        self._chores: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self._running = contextlib.AsyncExitStack()
        tasks = await self._running.enter_async_context(asyncio.TaskGroup())
        try:
            # Outbound and dispatch run before channels start, so nothing a channel publishes
            # waits.
            self._outbound = tasks.create_task(self.manager.run_outbound(), name="outbound")
            self._dispatching = tasks.create_task(self.dispatcher.run(), name="dispatcher")
            await self.runtime.start()
            await self.manager.start_all(tasks)
            if self.scheduler is not None:
                await self.scheduler.start(tasks)
            for message in await self.runtime.unanswered(set(self.manager.channels)):
                log.info(
                    "%s: answering a message left unanswered by the last run", message.session_key
                )
                await self.bus.publish_inbound(message)
            if self.status is not None:
                self._chores = [
                    # The daemon will need litellm: load it now, not on the first message.
                    tasks.create_task(self.runtime.llm.warm_up(), name="litellm import"),
                    tasks.create_task(self.status.run(), name="status"),
                    tasks.create_task(_housekeeping(self.runtime.config), name="housekeeping"),
                ]
        except BaseException:
            # Channel supervisors are in the group too: the group cannot close until they end.
            await self.manager.stop_all()
            # The caller sees this error itself, not wrapped in the TaskGroup's.
            await self._end_tasks()
            raise

    async def stop(self, grace: float = SHUTDOWN_GRACE_SECONDS) -> None:
        """Stop receiving, finish (or persist and cancel) in-flight turns, flush replies."""
        await _cancel(self._chores)
        if self.scheduler is not None:
            await self.scheduler.stop(grace / 2)
        await self.manager.stop_all()
        if self._dispatching is not None:
            # Hand over what the bus still holds before the dispatcher stops reading it.
            while not self.bus.inbound.empty():
                await self.dispatcher.submit(self.bus.inbound.get_nowait())
            self._dispatching.cancel()
        await self.dispatcher.shutdown(grace)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.bus.outbound.join(), timeout=5)
        try:
            await self._end_tasks()
        finally:
            await self.runtime.close()
            if self.status is not None:
                self.status.remove()

    async def _end_tasks(self) -> None:
        """Cancel what still runs and close the TaskGroup, which raises if a task crashed."""
        started = [t for t in (*self._chores, self._outbound, self._dispatching) if t is not None]
        await _cancel(started)
        self._chores, self._outbound, self._dispatching = [], None, None
        if self._running is not None:
            running, self._running = self._running, None
            await running.aclose()

    def _report(self) -> dict[str, Any]:
        return {"channels": self.manager.status(), "busy_sessions": self.dispatcher.running()}


async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def build_channels(config: Config, bus: MessageBus) -> list[Channel]:
    """Instantiate the enabled chat channels. Their libraries are imported only here."""
    channels: list[Channel] = []
    for name, channel_config in config.channels:
        if not channel_config.enabled:
            continue
        try:
            module = __import__(f"clawgate.channels.{name}", fromlist=["create_channel"])
        except ImportError:
            raise ChannelError(f"channel {name!r} is not available in this version") from None
        channels.append(module.create_channel(channel_config, bus, config))
    return channels


async def serve(config: Config, config_path: Path | None = None) -> None:
    """Run the gateway until SIGINT or SIGTERM. `config_path`: the file `config` came from."""
    forbid_environ_reads()  # exec'd commands must not read our environment or memory
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    bus = MessageBus()
    # /status reports the channel states, which the manager (built after the runtime, since
    # it records deliveries through it) keeps current.
    channel_states = ChannelStates()
    runtime = AgentRuntime.build(
        config,
        outbox=bus.publish_outbound,
        channel_status=channel_states.snapshot,
        extra_tools=cron_tools(config),
    )
    chats = build_channels(config, bus)
    gateway = Gateway(
        runtime,
        # The control socket is the terminal's channel: `clawgate agent` talks through it.
        [*chats, ControlChannel(bus, config.data_dir)],
        bus,
        channel_states=channel_states,
        scheduler=True,
        daemon=True,
    )
    from clawgate.gateway.dashboard.server import Dashboard

    dashboard = Dashboard.for_gateway(gateway, config_path)  # serves the default agent
    await gateway.start()
    rejected = gateway.manager.rejected()
    if rejected and len(rejected) == len(chats):
        # Every chat channel refused its token: a daemon nobody can reach from a chat should
        # not look healthy. With another chat channel up, the rejected one shows in status.
        await gateway.stop()
        raise CredentialsRejected("; ".join(rejected.values()))
    await dashboard.start()
    log.info("gateway running (workspace %s); Ctrl-C to stop", config.workspace)
    try:
        await stop.wait()
    finally:
        log.info("shutting down: finishing in-flight turns")
        await dashboard.stop()
        await gateway.stop()
        log.info("stopped")


async def _housekeeping(config: Config) -> None:
    """Retention once at start (after a minute, out of the way of start-up), then daily."""
    await asyncio.sleep(60)
    while True:
        try:
            report = await asyncio.to_thread(sweep, config)
            log.info("housekeeping: %s", report.summary())
        except OSError as exc:
            log.warning("housekeeping failed: %s", exc)
        await asyncio.sleep(HOUSEKEEPING_EVERY_SECONDS)
