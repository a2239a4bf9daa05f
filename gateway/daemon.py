"""Wires channels to the agent: bus -> dispatcher -> agent loop -> bus -> channel manager."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Sequence

from clawgate.agent.runtime import AgentRuntime
from clawgate.channels.base import Channel
from clawgate.channels.manager import ChannelManager
from clawgate.gateway.cron.scheduler import CronScheduler
from clawgate.gateway.cron.tool import cron_tools
from clawgate.gateway.dispatcher import Dispatcher
from clawgate.gateway.ops.housekeeping import sweep
from clawgate.gateway.ops.status import StatusWriter
from clawgate.kernel.bus import MessageBus
from clawgate.kernel.config import Config
from clawgate.kernel.errors import ChannelError, ConfigError

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_SECONDS = 20.0
HOUSEKEEPING_EVERY_SECONDS = 24 * 3600.0


class Gateway:
    """A running set of channels around one agent runtime."""

    def __init__(
        self,
        runtime: AgentRuntime,
        channels: Sequence[Channel],
        bus: MessageBus,
        *,
        scheduler: bool = False,
    ) -> None:
        """`scheduler`: run cron jobs and the heartbeat (only the daemon does: one process
        fires the jobs; its runtime is built with `cron_tools`)."""
        self.runtime = runtime
        self.bus = bus
        self.dispatcher = Dispatcher(
            bus,
            runtime.loop.handle,
            max_concurrent=runtime.config.agent.max_concurrent_turns,
            messages_per_minute=runtime.config.limits.messages_per_minute,
        )
        self.manager = ChannelManager(bus, channels, on_delivery=runtime.record_delivery)
        runtime.loop.outbox = bus.publish_outbound
        self.scheduler: CronScheduler | None = None
        if scheduler:
            self.scheduler = CronScheduler(runtime, bus, self.dispatcher)
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        # Outbound and dispatch run before channels start, so nothing a channel publishes waits.
        self._tasks = [
            asyncio.create_task(self.manager.run_outbound(), name="outbound"),
            asyncio.create_task(self.dispatcher.run(), name="dispatcher"),
        ]
        await self.runtime.start()
        await self.manager.start_all()
        if self.scheduler is not None:
            await self.scheduler.start()
        for message in await self.runtime.unanswered(set(self.manager.channels)):
            log.info("%s: answering a message left unanswered by the last run", message.session_key)
            await self.bus.publish_inbound(message)

    async def stop(self, grace: float = SHUTDOWN_GRACE_SECONDS) -> None:
        """Stop receiving, finish (or persist and cancel) in-flight turns, flush replies."""
        if self.scheduler is not None:
            await self.scheduler.stop(grace / 2)
        await self.manager.stop_all()
        dispatcher_task = self._tasks[1] if len(self._tasks) > 1 else None
        if dispatcher_task is not None:
            # Hand over what the bus still holds before the dispatcher stops reading it.
            while not self.bus.inbound.empty():
                await self.dispatcher.submit(self.bus.inbound.get_nowait())
            dispatcher_task.cancel()
        await self.dispatcher.shutdown(grace)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.bus.outbound.join(), timeout=5)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        await self.runtime.close()


def check_ready(config: Config) -> None:
    """The gateway needs a model and at least one chat channel; say exactly what to set."""
    if not config.agent.model:
        raise ConfigError(
            'no model configured: set [agent] model in the config (e.g. "openai/gpt-4o-mini") '
            "or CLAWGATE_AGENT__MODEL"
        )
    enabled = [name for name, ch in config.channels if getattr(ch, "enabled", False)]
    if not enabled:
        raise ConfigError(
            "no chat channel enabled: set [channels.telegram] enabled = true and token "
            "(or the same for discord)"
        )
    for name in enabled:
        channel_config = getattr(config.channels, name)
        if channel_config.token is None or not channel_config.token.get_secret_value():
            raise ConfigError(
                f"channels.{name} is enabled but has no token: set [channels.{name}] token "
                f"or CLAWGATE_CHANNELS__{name.upper()}__TOKEN"
            )


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


async def serve(config: Config) -> None:
    """Run the gateway until SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    bus = MessageBus()
    runtime = AgentRuntime.build(config, extra_tools=cron_tools(config))
    gateway = Gateway(runtime, build_channels(config, bus), bus, scheduler=True)
    await gateway.start()
    runtime.commands.channel_status = gateway.manager.status
    status = StatusWriter(
        config.data_dir,
        lambda: {
            "channels": gateway.manager.status(),
            "busy_sessions": gateway.dispatcher.running(),
        },
    )
    chores = [
        asyncio.create_task(status.run(), name="status"),
        asyncio.create_task(_housekeeping(config), name="housekeeping"),
    ]
    log.info("gateway running (workspace %s); Ctrl-C to stop", config.workspace)
    try:
        await stop.wait()
    finally:
        log.info("shutting down: finishing in-flight turns")
        for task in chores:
            task.cancel()
        await asyncio.gather(*chores, return_exceptions=True)
        await gateway.stop()
        status.remove()
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
