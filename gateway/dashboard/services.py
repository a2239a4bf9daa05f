"""What the dashboard's handlers reach: the very objects the daemon runs, never a copy.

Each page handler gets one `DashboardServices`. Memory goes through `runtime.memory` (the
workspace's MemoryStore and its one memory lock), sessions through `runtime.sessions`, search
through `runtime.search`, pairing through the same `PairingStore` file the channels and the
CLI use, cron through the scheduler's `CronStore`. No handler opens a workspace file by a
path of its own making.

With several agents, `agents` holds one `DashboardServices` per agent (the default first),
sharing the login, the pairing store and the channels; `render.services(request)` hands a
page the one of the agent the browser chose (the `clawgate_agent` cookie), so every page is
scoped to it without knowing.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from clawgate.channels.pairing import PairingStore
from clawgate.gateway.dashboard.auth import Auth

if TYPE_CHECKING:
    from clawgate.agent.memory.lock import MemoryLock
    from clawgate.agent.memory.search import MemorySearch
    from clawgate.agent.memory.store import MemoryStore
    from clawgate.agent.runtime import AgentRuntime
    from clawgate.agent.session import SessionStore
    from clawgate.agent.tools.mcp_hub import McpHub
    from clawgate.channels.manager import ChannelManager, ChannelStates
    from clawgate.gateway.cluster.status import ClusterStatus
    from clawgate.gateway.cron.scheduler import CronScheduler
    from clawgate.gateway.daemon.dispatcher import Dispatcher
    from clawgate.gateway.daemon.unit import AgentUnit
    from clawgate.gateway.dashboard.restart import Restarts
    from clawgate.kernel.bus import MessageBus
    from clawgate.kernel.config import Config


@dataclass(frozen=True)
class DashboardServices:
    """The running assistant as the dashboard sees it (the default agent's runtime)."""

    config: Config
    runtime: AgentRuntime
    bus: MessageBus
    auth: Auth
    pairing: PairingStore
    manager: ChannelManager | None = None
    dispatcher: Dispatcher | None = None
    scheduler: CronScheduler | None = None
    started_at: float = field(default_factory=time.time)
    # The config file the gateway was started with: what `groups allow` and doctor read.
    config_path: Path | None = None
    mcp: McpHub | None = None
    # Every agent's services by name, the default agent first; empty: this one only.
    agents: Mapping[str, DashboardServices] = field(default_factory=dict)
    # Exec approvals waiting for the owner, every agent's (the composition root counts
    # them); counted with pairing requests in the header's badge.
    pending_approvals: Callable[[], int] | None = None
    # How the running gateway restarts itself (restart.py); None: it cannot (a test's app).
    restarts: Restarts | None = None
    # A cluster worker's view of the whole cluster (the health page shows it); None: one machine.
    cluster: Callable[[], Awaitable[ClusterStatus]] | None = None

    @property
    def agent_name(self) -> str:
        return self.config.agent_name

    @property
    def agent_names(self) -> list[str]:
        return list(self.agents) or [self.agent_name]

    def for_agent(self, name: str | None) -> DashboardServices:
        """The services of agent `name`; this (the default agent's) for None or a name no
        agent has (a cookie left from a config that had it)."""
        return self.agents.get(name or "", self)

    def pending_count(self) -> int:
        """What waits for the owner: pairing requests and exec approvals."""
        approvals = self.pending_approvals() if self.pending_approvals is not None else 0
        return len(self.pairing.pending()) + approvals

    def with_agents(self, units: list[AgentUnit]) -> DashboardServices:
        """These services (the default agent's) with one per agent of `units` beside them,
        sharing the login, the channels and the bus."""
        agents: dict[str, DashboardServices] = {}
        for unit in sorted(units, key=lambda u: u.name != self.agent_name):
            config = unit.runtime.config
            agents[unit.name] = dataclasses.replace(
                self,
                config=config,
                runtime=unit.runtime,
                dispatcher=unit.dispatcher,
                scheduler=unit.scheduler,
                pairing=(
                    self.pairing
                    if config.pairing_file == self.config.pairing_file
                    else PairingStore(config.pairing_file, writer=unit.runtime.writer)
                ),
                agents=agents,
            )
        return agents[self.agent_name]

    @property
    def memory(self) -> MemoryStore:
        return self.runtime.memory

    @property
    def memory_lock(self) -> MemoryLock:
        """The workspace's one memory lock: every memory write from a page runs in it."""
        return self.runtime.memory.lock

    @property
    def sessions(self) -> SessionStore:
        return self.runtime.sessions

    @property
    def search(self) -> MemorySearch:
        return self.runtime.search

    @property
    def channel_states(self) -> ChannelStates | None:
        return self.manager.states if self.manager is not None else None

    @classmethod
    def build(
        cls,
        runtime: AgentRuntime,
        bus: MessageBus,
        *,
        manager: ChannelManager | None = None,
        dispatcher: Dispatcher | None = None,
        scheduler: CronScheduler | None = None,
        config_path: Path | None = None,
        mcp: McpHub | None = None,
        auth: Auth | None = None,
        restarts: Restarts | None = None,
        pending_approvals: Callable[[], int] | None = None,
        cluster: Callable[[], Awaitable[ClusterStatus]] | None = None,
    ) -> DashboardServices:
        """`auth`: the logins of the run before an in-process restart, kept (when the data
        folder is the same) so the browsers stay logged in. `pending_approvals`: how many
        exec approvals wait for the owner (the header's badge counts them)."""
        config = runtime.config
        data_dir = config.root.data_dir
        if auth is None or auth.data_dir != data_dir:
            auth = Auth(
                data_dir,
                writer=runtime.writer,
                idle_seconds=config.dashboard.session_idle_minutes * 60,
            )
        return cls(
            config=config,
            runtime=runtime,
            bus=bus,
            auth=auth,
            pairing=PairingStore(config.pairing_file, writer=runtime.writer),
            manager=manager,
            dispatcher=dispatcher,
            scheduler=scheduler,
            config_path=config_path,
            mcp=mcp,
            restarts=restarts,
            pending_approvals=pending_approvals,
            cluster=cluster,
        )
