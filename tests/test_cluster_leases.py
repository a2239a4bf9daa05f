"""Agents leased to workers of a cluster, fenced by generation: real worker processes
(tests/cluster_worker.py) on a private PostgreSQL, killed, paused and cut off from it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from clawgate.gateway.cluster.db import open_pool
from clawgate.gateway.cluster.leases import Lease, acquire, agent_resource, release, renew
from clawgate.gateway.cluster.schema import MIGRATIONS, migrate
from clawgate.kernel.errors import ClusterError
from tests.cluster_helpers import (
    LEASE,
    Leases,
    cluster_config,
    eventually,
    generations_never_go_back,
    log_sizes,
    start_worker,
    writers_of,
)
from tests.postgres import PrivatePostgres

AGENTS = ["a1", "a2", "a3", "a4"]


async def test_the_schema_is_created_once_and_a_newer_one_is_refused(database_url: str) -> None:
    pool = await open_pool(cluster_config(database_url))
    try:
        assert await asyncio.gather(migrate(pool), migrate(pool)) == [len(MIGRATIONS)] * 2
        assert await pool.fetchval("SELECT count(*) FROM clawgate_schema") == len(MIGRATIONS)
        await pool.execute("INSERT INTO clawgate_schema VALUES ($1)", len(MIGRATIONS) + 1)
        with pytest.raises(ClusterError, match="newer than this clawgate"):
            await migrate(pool)
    finally:
        await pool.close()


async def test_an_unreachable_database_is_one_line_without_the_password() -> None:
    config = cluster_config("postgresql://me:hunter2@127.0.0.1:1/nowhere")
    with pytest.raises(ClusterError) as caught:
        await open_pool(config, timeout=2)
    assert "127.0.0.1:1/nowhere" in str(caught.value)
    assert "hunter2" not in str(caught.value)


async def test_a_lease_changes_hands_only_under_a_new_generation(database_url: str) -> None:
    pool = await open_pool(cluster_config(database_url))
    try:
        await migrate(pool)
        async with pool.acquire() as conn:
            old = await acquire(conn, agent_resource("a"), "w1", 0.2)
            assert old is not None
            assert await acquire(conn, agent_resource("a"), "w2", 5) is None
            await asyncio.sleep(0.3)  # past the database's expiry
            new = await acquire(conn, agent_resource("a"), "w2", 5)
            assert new == Lease(agent_resource("a"), "w2", old.generation + 1)
            # The old holder can neither renew nor release what is now another's.
            assert await renew(conn, [old], 5) == set()
            await release(conn, old)
            assert await renew(conn, [new], 5) == {new}
    finally:
        await pool.close()


async def test_a_killed_worker_s_agents_move_within_the_lease(
    database_url: str, tmp_path: Path
) -> None:
    leases = await Leases.open(database_url)
    workers = [await start_worker(database_url, f"w{i}", tmp_path, AGENTS) for i in (1, 2)]
    try:
        await eventually(lambda: _spread(leases, {"w1", "w2"}), 30)
        holder = (await leases.holders())["agent:a1"]
        victim = next(w for w in workers if w.name == holder)
        survivor = next(w for w in workers if w is not victim)
        victim.kill()
        moved = await eventually(lambda: _all_held_by(leases, survivor.name), LEASE + 5)
        assert moved <= LEASE + 5
        generations_never_go_back(tmp_path)
    finally:
        for worker in workers:
            await worker.stop()
        await leases.close()


async def test_a_paused_worker_stops_writing_before_another_takes_over(
    database_url: str, tmp_path: Path
) -> None:
    leases = await Leases.open(database_url)
    workers = [await start_worker(database_url, f"w{i}", tmp_path, AGENTS) for i in (1, 2)]
    paused, other = workers
    try:
        await eventually(lambda: _spread(leases, {"w1", "w2"}), 30)
        paused.pause()
        await eventually(lambda: _all_held_by(leases, other.name), LEASE + 5)
        paused.resume()
        await eventually(lambda: _spread(leases, {"w1", "w2"}), 30)
        generations_never_go_back(tmp_path)
        assert writers_of(tmp_path) == {"w1", "w2"}
    finally:
        for worker in workers:
            await worker.stop()
        await leases.close()


@pytest.mark.long
async def test_a_database_stopped_for_30_s_never_leaves_two_writers(tmp_path: Path) -> None:
    server = PrivatePostgres()  # its own server: this test stops it
    server.start()
    try:
        url = server.create_database()
        leases = await Leases.open(url)
        workers = [await start_worker(url, f"w{i}", tmp_path, AGENTS) for i in (1, 2)]
        try:
            await eventually(lambda: _spread(leases, {"w1", "w2"}), 30)
            await leases.close()
            await asyncio.to_thread(server.stop)
            await asyncio.sleep(30)
            # Every worker stopped writing before its leases could expire in the database.
            sizes = log_sizes(tmp_path)
            await asyncio.sleep(LEASE)
            assert log_sizes(tmp_path) == sizes
            await asyncio.to_thread(server.start)
            leases = await Leases.open(url)
            await eventually(lambda: _spread(leases, {"w1", "w2"}), 30)
            generations_never_go_back(tmp_path)
        finally:
            for worker in workers:
                await worker.stop()
            await leases.close()
    finally:
        server.remove()


async def _spread(leases: Leases, workers: set[str]) -> bool:
    holders = await leases.holders()
    return len(holders) == len(AGENTS) and set(holders.values()) == workers


async def _all_held_by(leases: Leases, worker: str) -> bool:
    holders = await leases.holders()
    return len(holders) == len(AGENTS) and set(holders.values()) == {worker}
