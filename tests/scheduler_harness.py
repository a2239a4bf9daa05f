"""The test harness with the daemon's scheduler switched on, and jobs.json written the way
the scheduler and cron CLI tests need it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clawgate.agent.session import StoredMessage, load_session
from clawgate.agent.tools import Tool
from clawgate.gateway.cron.models import CronJob, JobsFile, Schedule
from clawgate.gateway.cron.scheduler import CronScheduler
from clawgate.gateway.cron.store import CronStore
from clawgate.gateway.cron.tool import cron_tools
from clawgate.kernel.config import AgentConfig, Config, HeartbeatConfig
from tests.harness import Harness, make_config

TARGET = "test:1"


class SchedulerHarness(Harness):
    """The test harness with the daemon's scheduler switched on (fast file polling); `tools`
    are added to the cron tools."""

    def __init__(self, config: Config, *, tools: Sequence[Tool] = (), **options: Any) -> None:
        options.setdefault("poll_interval", 0.05)
        super().__init__(
            config,
            extra_tools=[*cron_tools(config), *tools],
            scheduler=True,
            scheduler_options=options,
        )

    @property
    def scheduler(self) -> CronScheduler:
        assert self.gateway.default.scheduler is not None
        return self.gateway.default.scheduler

    @property
    def store(self) -> CronStore:
        return self.scheduler.store

    def session(self, key: str) -> list[StoredMessage]:
        path = self.runtime.sessions.path_for(key)
        return load_session(path, key).messages if path.exists() else []


def make(tmp_path: Path, agent_config: AgentConfig, **overrides: Any) -> Config:
    overrides.setdefault("heartbeat", HeartbeatConfig(enabled=False))
    return make_config(tmp_path, agent_config.model_copy(update={"max_retries": 0}), **overrides)


def write_jobs(store: CronStore, *jobs: CronJob) -> None:
    store.save(JobsFile(jobs=list(jobs)))


def a_job(job_id: str = "j1", **fields: Any) -> CronJob:
    values: dict[str, Any] = {
        "id": job_id,
        "name": f"job {job_id}",
        "schedule": Schedule(every=3600),
        "timezone": "UTC",
        "message": "Say the time",
        "deliver_to": TARGET,
    }
    values.update(fields)
    return CronJob(**values)
