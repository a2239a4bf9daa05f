"""Wires channels to the agents: bus -> router -> each agent's dispatcher -> agent loop ->
bus -> channel manager (through the bot of the agent that replies)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from clawgate.agent.runtime import AgentRuntime
from clawgate.agent.tools.mcp_hub import McpHub
from clawgate.channels.access import AccessPolicies, AccessPolicy
from clawgate.channels.base import Channel
from clawgate.channels.manager import ChannelManager, ChannelStates
from clawgate.channels.pairing import PairingStore
from clawgate.gateway.daemon.ratelimit import RateLimiter
from clawgate.gateway.daemon.routing import Router
from clawgate.gateway.daemon.streaming import StreamRelay
from clawgate.gateway.daemon.unit import AgentUnit
from clawgate.gateway.ops.housekeeping import sweep
from clawgate.gateway.ops.status_file import StatusWriter
from clawgate.kernel.agent_configs import PLATFORMS
from clawgate.kernel.bus import (
    InboundMessage,
    MessageBus,
    OutboundMessage,
    ReplyDraft,
    agent_key,
)
from clawgate.kernel.config import Config, settings_digest

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_SECONDS = 20.0
HOUSEKEEPING_EVERY_SECONDS = 24 * 3600.0


class Gateway:
    """A running set of channels around one or more agent runtimes.

    Built in dependency order; nothing is set on a part once built. `start` opens one
    TaskGroup that owns every long-lived task: outbound, the inbound hand-over to each
    agent's dispatcher, one supervisor per channel and, in the daemon, the status writer and
    housekeeping (the cron schedulers still keep their own tasks, which their `stop` ends).
    `stop` is the shutdown order.
    """

    def __init__(
        self,
        agents: Sequence[tuple[AgentRuntime, MessageBus]],
        channels: Sequence[Channel] | Mapping[str, Channel],
        bus: MessageBus,
        *,
        router: Router | None = None,
        channel_states: ChannelStates | None = None,
        scheduler: bool = False,
        scheduler_options: Mapping[str, Any] | None = None,
        rate_limiter: RateLimiter | None = None,
        daemon: bool = False,
        mcp: McpHub | None = None,
    ) -> None:
        """`agents`: each runtime with the bus it publishes to: `bus` itself for a single
        agent (built with `outbox=bus.publish_outbound` and, to show channel states in
        /status, `channel_status=channel_states.snapshot`), or with a `router`, a
        routing.AgentBus over `bus` per agent.
        `channels`: by account key when several bots share a platform (see routing.py).
        `scheduler`: run cron jobs and the heartbeat (only the daemon does: one process fires
        the jobs; its runtimes are built with `cron_tools`), with `scheduler_options` passed to
        `CronScheduler`. `rate_limiter`: the dispatcher's, instead of one from the config.
        `daemon`: also keep `<data_dir>/status.json` current and run the daily housekeeping.
        `mcp`: the MCP servers, supervised in the TaskGroup (the runtimes offer their tools)."""
        self.bus = bus
        self.router = router
        self.mcp = mcp
        self.manager = ChannelManager(
            bus,
            channels,
            on_delivery=self._record_delivery,
            states=channel_states,
            redact=agents[0][0].redact,
            account_of=router.account_for if router is not None else None,
            on_stream_open=self._record_stream,
        )
        # Turns on the platforms whose channels show replies as they are written stream.
        relay = StreamRelay(self.manager)
        streaming = {c.name for c in self.manager.channels.values() if c.streams}
        self.units: dict[str, AgentUnit] = {}
        for agent_runtime, agent_bus in agents:
            unit = AgentUnit(
                agent_runtime,
                agent_bus,
                trusts=_trusts(agent_runtime.config, router),
                on_admitted=self.manager.admitted,
                on_turn=self.manager.turn_started,
                rate_limiter=rate_limiter,
                scheduler=scheduler,
                scheduler_options=scheduler_options,
                named_logs=router is not None and len(agents) > 1,
            )
            self.units[unit.name] = unit
            relay.attach(agent_runtime.loop.progress, streaming)
        # A cluster worker runs some agents only: the default may be another worker's.
        first = next(iter(self.units.values()))
        if router is not None:
            first = self.units.get(router.root.default_agent, first)
        # The agent a message naming none goes to.
        self.default = first
        self.status: StatusWriter | None = None
        self._settings = ""
        if daemon:
            root = router.root if router is not None else first.runtime.config
            self.status = StatusWriter(root.data_dir, self._report, first.runtime.redact)
            self._settings = settings_digest(root)
        self._running: contextlib.AsyncExitStack | None = None
        self._dispatching: asyncio.Task[None] | None = None
        self._outbound: asyncio.Task[None] | None = None
        self._servers: asyncio.Task[None] | None = None
        self._chores: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self._running = contextlib.AsyncExitStack()
        tasks = await self._running.enter_async_context(asyncio.TaskGroup())
        try:
            # Outbound and dispatch run before channels start, so nothing a channel publishes
            # waits.
            self._outbound = tasks.create_task(self.manager.run_outbound(), name="outbound")
            self._dispatching = tasks.create_task(self._hand_over(), name="dispatcher")
            await asyncio.gather(*(unit.runtime.start() for unit in self.units.values()))
            platforms = {
                channel.name
                for channel in self.manager.channels.values()
                if not channel.replays_unanswered
            }
            # Read before the channels start: what they deliver from now on is in a turn (or
            # queued for one), not left over, even while a slower channel still starts.
            leftovers = [
                (unit, await unit.runtime.unanswered(platforms)) for unit in self.units.values()
            ]
            await self.manager.start_all(tasks)
            for unit in self.units.values():
                await unit.start_scheduler(tasks)
            if self.mcp is not None:
                self._servers = tasks.create_task(self.mcp.run(), name="mcp servers")
                if self.status is not None:
                    self._chores.append(
                        tasks.create_task(
                            report_mcp_changes(self.mcp, self.status), name="mcp status"
                        )
                    )
            for unit, messages in leftovers:
                for message in messages:
                    log.info(
                        "%s: answering a message left unanswered by the last run",
                        agent_key(unit.name if self.router else None, message.session_key),
                    )
                    await unit.bus.publish_inbound(message)
            if self.status is not None:
                self._chores += [
                    # What the first turns need (litellm, the memory index), loaded now.
                    *(
                        tasks.create_task(unit.runtime.warm_up(), name=f"warm-up {unit.name}")
                        for unit in self.units.values()
                    ),
                    tasks.create_task(self.status.run(), name="status"),
                    *(
                        tasks.create_task(
                            _housekeeping(unit.runtime.config), name=f"housekeeping {unit.name}"
                        )
                        for unit in self.units.values()
                    ),
                ]
        except BaseException:
            # Channel supervisors are in the group too: the group cannot close until they end.
            await self.manager.stop_all()
            await self.manager.close_all()
            # The caller sees this error itself, not wrapped in the TaskGroup's.
            await self._end_tasks()
            raise

    async def stop(self, grace: float = SHUTDOWN_GRACE_SECONDS) -> None:
        """Stop receiving, finish (or persist and cancel) in-flight turns, flush replies."""
        await _cancel(self._chores)
        for unit in self.units.values():
            await unit.stop_scheduler(grace / 2)
        # Channels stop receiving but keep sending (a terminal's connection stays open): what
        # the dispatchers finish within the grace still reaches its chat. close_all ends that.
        await self.manager.stop_all()
        if self._dispatching is not None:
            # Hand over what the bus still holds before the dispatchers stop reading it.
            while not self.bus.inbound.empty():
                await self._submit(self.bus.inbound.get_nowait())
            self._dispatching.cancel()
        await asyncio.gather(*(unit.dispatcher.shutdown(grace) for unit in self.units.values()))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.bus.outbound.join(), timeout=5)
        try:
            await self._end_tasks()
        finally:
            await self.manager.close_all()
            await asyncio.gather(*(unit.runtime.close() for unit in self.units.values()))
            if self.status is not None:
                self.status.remove()

    async def _hand_over(self) -> None:
        """Each inbound message to its agent's dispatcher, until cancelled."""
        while True:
            await self._submit(await self.bus.inbound.get())

    async def _submit(self, message: InboundMessage) -> None:
        if message.choice is not None:
            await self._answer_choice(message)
            return
        unit = self._unit(message.agent)
        if unit is not None:
            await unit.dispatcher.submit(message)
            return
        known = ", ".join(self.units)
        log.warning("%s: no agent named %r", message.session_key, message.agent)
        await self.bus.publish_outbound(
            OutboundMessage(
                channel=message.channel,
                chat_id=message.chat_id,
                text=f"No agent named {message.agent!r} here (known: {known}).",
                reply_to=message.message_id or None,
                is_error=True,
            )
        )

    async def _answer_choice(self, message: InboundMessage) -> None:
        """A pressed button, never a turn (it must not wait behind the turn that asked): the
        agent whose card it is answers, if the one trust function says an owner pressed."""
        choice = message.choice or ""
        for unit in self.units.values():
            approvals = unit.runtime.approvals
            if await asyncio.to_thread(approvals.holds, choice):
                by_owner = unit.trusts.sender_is_owner(message.channel, message.facts)
                text = approvals.answer(choice, message.sender_id, by_owner=by_owner)
                break
        else:
            text = "This button has expired; nothing was run."
        await self.bus.publish_outbound(
            OutboundMessage(
                channel=message.channel, chat_id=message.chat_id, text=text, agent=message.agent
            )
        )

    def _unit(self, agent: str | None) -> AgentUnit | None:
        return self.default if agent is None else self.units.get(agent)

    async def _record_delivery(self, message: OutboundMessage, error: str | None) -> None:
        unit = self._unit(message.agent)
        if unit is not None:
            await unit.runtime.record_delivery(message, error)

    async def _record_stream(self, draft: ReplyDraft) -> None:
        unit = self._unit(draft.agent)
        if unit is not None:
            await unit.runtime.record_stream(draft)

    async def _end_tasks(self) -> None:
        """Cancel what still runs and close the TaskGroup, which raises if a task crashed."""
        started = [
            t
            for t in (*self._chores, self._servers, self._outbound, self._dispatching)
            if t is not None
        ]
        await _cancel(started)
        self._chores, self._servers, self._outbound, self._dispatching = [], None, None, None
        if self._running is not None:
            running, self._running = self._running, None
            await running.aclose()

    def _report(self) -> dict[str, Any]:
        router = self.router
        return {
            "channels": self.manager.status(),
            "busy_sessions": sum(unit.dispatcher.running() for unit in self.units.values()),
            "settings": self._settings,
            "mcp": [asdict(s) for s in self.mcp.snapshot()] if self.mcp is not None else [],
            "agents": [
                unit.report(router.accounts_of(name) if router is not None else [])
                for name, unit in self.units.items()
            ],
        }


def _trusts(config: Config, router: Router | None) -> AccessPolicies:
    """Trust as the bots this agent answers through decide it: its own bot's rules and
    pairing approvals, or the shared bot's."""
    if router is None:
        return AccessPolicies.from_config(config)
    policies = {}
    for platform in PLATFORMS:
        account = router.accounts.get(router.account_for(config.agent_name, platform))
        if account is not None:
            rules = getattr(account.config.channels, platform)
            store = PairingStore(account.config.pairing_file)
            policies[platform] = AccessPolicy(platform, rules, store)
    return AccessPolicies(policies)


async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def report_mcp_changes(mcp: McpHub, status: StatusWriter) -> None:
    """Rewrite the status file at each MCP server's change of state: `clawgate mcp list`
    shows a server up (or down) as soon as it is, not at the next periodic write. A change
    made while a write runs is written next (a server that went from starting to running
    during the write would otherwise show "starting" until the periodic write)."""
    written = 0  # the hub's count when made: a change before this task ran is written too
    while True:
        async with mcp.changed:
            while mcp.changes == written:
                await mcp.changed.wait()
            written = mcp.changes
        try:
            await asyncio.to_thread(status.write_once)
        except OSError as exc:
            log.warning("cannot write %s: %s", status.path, exc)


async def _housekeeping(config: Config) -> None:
    """Retention once at start (after a minute, out of the way of start-up), then daily."""
    await asyncio.sleep(60)
    while True:
        try:
            report = await asyncio.to_thread(sweep, config)
            level = logging.WARNING if report.skipped else logging.INFO
            log.log(level, "housekeeping: %s", report.summary())
        except OSError as exc:
            log.warning("housekeeping failed: %s", exc)
        await asyncio.sleep(HOUSEKEEPING_EVERY_SECONDS)
