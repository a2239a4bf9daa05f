"""`AgentUnit`: what the gateway runs per agent. Each unit has its own dispatcher (and so its
own limit of concurrent turns and its own session queues) and its own scheduler, so a
failing agent - a bad key, a model answering 500s - holds up only its own turns."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from typing import Any

from clawgate.agent.runtime import AgentRuntime
from clawgate.channels.access import AccessPolicies
from clawgate.gateway.cron.scheduler import CronScheduler
from clawgate.gateway.daemon.dispatcher import Admitted, Dispatcher, TurnStarts
from clawgate.gateway.daemon.ratelimit import RateLimiter
from clawgate.gateway.ops.logs import agent_context
from clawgate.kernel.bus import MessageBus, agent_key


class AgentUnit:
    def __init__(
        self,
        runtime: AgentRuntime,
        bus: MessageBus,
        *,
        trusts: AccessPolicies,
        on_admitted: Admitted,
        on_turn: TurnStarts | None = None,
        rate_limiter: RateLimiter | None = None,
        scheduler: bool = False,
        scheduler_options: Mapping[str, Any] | None = None,
        named_logs: bool = False,
    ) -> None:
        """`bus`: the one `runtime` publishes to (its outbox), through which its replies and
        scheduled messages leave. `named_logs`: its turns' and jobs' log lines start with
        its name (a gateway of several agents)."""
        if runtime.loop.outbox != bus.publish_outbound:
            # Caught here, not when a send_file call finds no way out.
            raise ValueError("build the runtime with outbox=bus.publish_outbound")
        self.name = runtime.config.agent_name
        self._context = agent_context(self.name) if named_logs else None
        self.runtime = runtime
        self.bus = bus
        self.trusts = trusts  # also asked whether a pressed approval button is the owner's
        config = runtime.config
        self.dispatcher = Dispatcher(
            bus,
            runtime.loop.handle,
            max_concurrent=config.agent.max_concurrent_turns,
            messages_per_minute=config.limits.messages_per_minute,
            rate_limiter=rate_limiter,
            on_admitted=on_admitted,
            keep_over_limit=runtime.keep_over_limit,
            trusts=trusts,
            context=self._context,
            on_stopped=runtime.loop.record_stop,
            on_turn=on_turn,
        )
        self.scheduler: CronScheduler | None = None
        if scheduler:
            self.scheduler = CronScheduler(
                runtime, bus, self.dispatcher, **dict(scheduler_options or {})
            )

    async def start(self, tasks: asyncio.TaskGroup) -> None:
        await self.runtime.start()
        await self.start_scheduler(tasks)

    async def start_scheduler(self, tasks: asyncio.TaskGroup) -> None:
        """Start its cron jobs and heartbeat (if it runs them), their tasks in its context."""
        if self.scheduler is not None:
            await self._in_context(self.scheduler.start(tasks))

    async def _in_context(self, work: Coroutine[Any, Any, None]) -> None:
        # A task copies the context it is given; the tasks it starts copy that one.
        await asyncio.create_task(work, context=self._context)

    async def stop_scheduler(self, grace: float) -> None:
        if self.scheduler is not None:
            await self.scheduler.stop(grace)

    def report(self, accounts: list[str]) -> dict[str, Any]:
        """This agent in status.json: its workspace, model, channel accounts and the
        sessions running a turn (`main/telegram:123`)."""
        config = self.runtime.config
        return {
            "name": self.name,
            "workspace": str(config.workspace),
            "model": config.agent.model,
            "channels": accounts,
            "busy_sessions": [agent_key(self.name, k) for k in self.dispatcher.busy_sessions()],
        }
