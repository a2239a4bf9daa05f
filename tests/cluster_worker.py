"""A cluster worker for the lease tests, run as a child process (`python -m
tests.cluster_worker`): the real LeaseKeeper over agent leases, and for each agent it holds a
writer that appends "<generation> <worker> <n>" to <log_dir>/<agent>.log every few
milliseconds, checking the lease before each line as an agent writing its workspace would
(gateway/worker.py stops the agent's gateway instead). Like gateway/worker.py it first takes
the agent's instance lock (<log_dir>/<agent>/gateway.lock): a worker paused between its check
and its write finishes that write when it wakes, and the lock keeps the next holder waiting
until then. The tests read these files to prove that no two workers wrote one agent."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
from pathlib import Path

from pydantic import SecretStr

from clawgate.gateway.cluster.db import open_pool
from clawgate.gateway.cluster.keeper import LeaseKeeper
from clawgate.gateway.cluster.leases import LEASE_CHANNEL, Lease, agent_resource
from clawgate.gateway.cluster.schema import migrate
from clawgate.gateway.cluster.wakeups import Wakeups
from clawgate.gateway.daemon.lock import InstanceLock
from clawgate.kernel.config_cluster import ClusterConfig


class Writers:
    """The LeaseHolder: one writer task per agent held."""

    def __init__(self, log_dir: Path, worker: str) -> None:
        self._log_dir = log_dir
        self._worker = worker
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self.keeper: LeaseKeeper | None = None

    async def gained(self, lease: Lease) -> None:
        self._tasks[lease.resource] = asyncio.create_task(self._write(lease))

    async def lost(self, resource: str) -> None:
        task = self._tasks.pop(resource)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    async def _write(self, lease: Lease) -> None:
        agent = lease.resource.split(":", 1)[1]
        assert self.keeper is not None
        lock_dir = self._log_dir / agent
        lock_dir.mkdir(exist_ok=True)
        lock = InstanceLock(lock_dir)
        await lock.acquire_when_free(0.05)
        try:
            n = 0
            while self.keeper.holds(lease.resource) == lease:
                n += 1
                with (self._log_dir / f"{agent}.log").open("a") as log:
                    log.write(f"{lease.generation} {self._worker} {n}\n")
                await asyncio.sleep(0.02)
        finally:
            lock.release()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("worker")
    parser.add_argument("log_dir", type=Path)
    parser.add_argument("agents", nargs="+")
    parser.add_argument("--lease", type=float, default=3.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format=f"{args.worker} %(message)s")
    config = ClusterConfig(
        database_url=SecretStr(args.url), worker_name=args.worker, lease_seconds=args.lease
    )
    pool = await open_pool(config)
    await migrate(pool)
    wakeups = Wakeups(config, (LEASE_CHANNEL,), poll_seconds=config.renew_seconds)
    holder = Writers(args.log_dir, args.worker)
    keeper = LeaseKeeper(
        pool,
        args.worker,
        [agent_resource(a) for a in args.agents],
        holder,
        lease_seconds=config.lease_seconds,
        renew_seconds=config.renew_seconds,
        wakeups=wakeups,
    )
    holder.keeper = keeper
    print(f"ready {os.getpid()}", flush=True)
    async with asyncio.TaskGroup() as tasks:
        tasks.create_task(wakeups.run())
        tasks.create_task(keeper.run())


if __name__ == "__main__":
    asyncio.run(main())
