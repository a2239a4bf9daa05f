"""What the dashboard's handlers reach: the very objects the daemon runs, never a copy.

Each page handler gets one `DashboardServices`. Memory goes through `runtime.memory` (the
workspace's MemoryStore and its one memory lock), sessions through `runtime.sessions`, search
through `runtime.search`, pairing through the same `PairingStore` file the channels and the
CLI use, cron through the scheduler's `CronStore`. No handler opens a workspace file by a
path of its own making.
"""

from __future__ import annotations

import time
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
    from clawgate.gateway.cron.scheduler import CronScheduler
    from clawgate.gateway.daemon.dispatcher import Dispatcher
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
    ) -> DashboardServices:
        config = runtime.config
        return cls(
            config=config,
            runtime=runtime,
            bus=bus,
            auth=Auth(
                config.root.data_dir,
                writer=runtime.writer,
                idle_seconds=config.dashboard.session_idle_minutes * 60,
            ),
            pairing=PairingStore(config.pairing_file, writer=runtime.writer),
            manager=manager,
            dispatcher=dispatcher,
            scheduler=scheduler,
            config_path=config_path,
            mcp=mcp,
        )
