"""Helpers of the cluster tests: worker processes (tests/cluster_worker.py) against the
private PostgreSQL (tests/postgres.py), and what the tests read back from the database."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from pydantic import SecretStr

from clawgate.gateway.cluster.db import open_pool
from clawgate.gateway.cluster.schema import migrate
from clawgate.kernel.config_cluster import ClusterConfig

ROOT = Path(__file__).resolve().parent.parent
LEASE = 3.0


def cluster_config(url: str, worker: str = "test", lease: float = LEASE) -> ClusterConfig:
    return ClusterConfig(database_url=SecretStr(url), worker_name=worker, lease_seconds=lease)


class Worker:
    def __init__(self, process: asyncio.subprocess.Process, name: str) -> None:
        self.process = process
        self.name = name

    def kill(self) -> None:
        self.process.kill()

    def pause(self) -> None:
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
        await self.process.wait()


async def start_worker(url: str, name: str, log_dir: Path, agents: list[str]) -> Worker:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAWGATE_")}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.cluster_worker", url, name, str(log_dir), *agents,
        "--lease", str(LEASE),
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), 60)
    assert line.startswith(b"ready"), line
    return Worker(process, name)


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float) -> float:
    """Seconds until `check()` holds; fails after `timeout`."""
    started = time.monotonic()
    while not await check():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"not true within {timeout} s")
        await asyncio.sleep(0.1)
    return time.monotonic() - started


class Leases:
    """What the tests read back from the cluster's database."""

    def __init__(self, pool) -> None:  # type: ignore[no-untyped-def]
        self.pool = pool

    @classmethod
    async def open(cls, url: str) -> Leases:
        pool = await open_pool(cluster_config(url))
        await migrate(pool)
        return cls(pool)

    async def holders(self) -> dict[str, str]:
        rows = await self.pool.fetch(
            "SELECT resource, worker FROM leases "
            "WHERE resource LIKE 'agent:%' AND worker IS NOT NULL AND expires_at > now()"
        )
        return {row["resource"]: row["worker"] for row in rows}

    async def close(self) -> None:
        await self.pool.close()


def generations_never_go_back(log_dir: Path) -> None:
    """In every agent's log, writes come in non-decreasing lease generations: once a newer
    holder wrote, no older one did."""
    logs = list(log_dir.glob("*.log"))
    assert logs
    for path in logs:
        generations = [int(line.split()[0]) for line in path.read_text().splitlines()]
        assert generations == sorted(generations), path.name


def writers_of(log_dir: Path) -> set[str]:
    """The workers that wrote any agent's log."""
    return {line.split()[1] for p in log_dir.glob("*.log") for line in p.read_text().splitlines()}


def log_sizes(log_dir: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in log_dir.glob("*.log")}
