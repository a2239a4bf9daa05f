"""Helpers of the cluster tests: worker processes (tests/cluster_worker.py) against the
private PostgreSQL (tests/postgres.py), and what the tests read back from the database."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from clawgate.gateway.cluster.db import open_pool
from clawgate.gateway.cluster.schema import migrate
from clawgate.kernel.config_cluster import ClusterConfig
from tests.discord_world import OWNER
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import FakeLLM, Reply, text
from tests.fakes.telegram import FakeTelegram
from tests.process import ClawgateProcess, fake_model, fake_telegram, toml_value, write_config

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

    async def holders(self, kind: str = "agent") -> dict[str, str]:
        """Each held lease of `kind` ("agent", "bot", or "" for every one): its worker."""
        rows = await self.pool.fetch(
            "SELECT resource, worker FROM leases "
            "WHERE resource LIKE $1 AND worker IS NOT NULL AND expires_at > now()",
            f"{kind}:%" if kind else "%",
        )
        return {row["resource"]: row["worker"] for row in rows}

    async def generations(self) -> dict[str, int]:
        """Each held agent lease's generation now."""
        rows = await self.pool.fetch(
            "SELECT resource, generation FROM leases "
            "WHERE resource LIKE 'agent:%' AND worker IS NOT NULL AND expires_at > now()"
        )
        return {row["resource"]: row["generation"] for row in rows}

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


# -- a cluster of real gateways: three agents, each with its own bot on the fakes -----------

WORK_USER = 2002
MAIN_USER = 1001
WORK_TOKEN = "654321:WORK-token"
AGENT_LEASES = {"agent:main", "agent:work", "agent:home"}
GATEWAY_LEASE = 5.0  # a gateway starting up holds its event loop longer than LEASE allows


def echo(body: dict[str, Any]) -> Reply:
    said = [m for m in body["messages"] if m.get("role") == "user"][-1]["content"]
    return text(f"re: {str(said).split('] ')[-1]}")


def cluster_home(
    home: Path,
    url: str,
    telegram: FakeTelegram,
    work_telegram: FakeTelegram,
    discord: FakeDiscord,
    llm: FakeLLM,
) -> tuple[Path, str]:
    """The config (each agent its own bot) and the owner's Discord DM channel."""
    owner_dm = discord.dm_channel(OWNER, "ann")

    def section(name: str, values: dict[str, Any]) -> list[str]:
        return [f"[{name}]", *(f"{k} = {toml_value(v)}" for k, v in values.items())]

    config = write_config(
        home,
        agent=fake_model(llm, request_timeout=30),
        telegram=fake_telegram(telegram, (MAIN_USER,)),
    )
    lines = [
        "[limits]",
        "messages_per_minute = 0",
        *section(
            "cluster", {"database_url": url, "worker_name": "unset", "lease_seconds": GATEWAY_LEASE}
        ),
        *section("agents.work", {}),
        *section(
            "agents.work.channels.telegram",
            {**fake_telegram(work_telegram, (WORK_USER,)), "token": WORK_TOKEN},
        ),
        *section("agents.home", {}),
        *section("agents.home.channels.telegram", {"enabled": False}),
        *section(
            "agents.home.channels.discord",
            {
                "enabled": True,
                "token": discord.token,
                "api_base": discord.api_url,
                "gateway_url": discord.gateway_url,
                "allow_from": [OWNER],
                "streaming": "off",
                "reactions": False,
            },
        ),
    ]
    with config.open("a", encoding="utf-8") as file:
        file.write("\n".join(lines) + "\n")
    return config, owner_dm


def worker(home: Path, config: Path, name: str) -> ClawgateProcess:
    return ClawgateProcess(
        home, "--config", str(config), "gateway", env={"CLAWGATE_CLUSTER__WORKER_NAME": name}
    )


async def agent_started(processes: Iterable[ClawgateProcess], agent: str) -> bool:
    """Whether any of the workers logged that it runs `agent`."""
    needle = f"agent {agent} running here"
    return any(needle in line for p in processes for line in p.stderr_lines)
