"""The lease keeper in this process against the private PostgreSQL: a round cut short in the
middle of a statement throws its connection away (a connection left mid-operation and handed
to the next round made asyncpg refuse it: "cannot switch to state 12; another operation is in
progress"), and no database error ends the keeper: a failed round is a missed renewal."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from clawgate.gateway.cluster.db import open_pool
from clawgate.gateway.cluster.keeper import LeaseKeeper
from clawgate.gateway.cluster.leases import Lease, agent_resource
from clawgate.gateway.cluster.schema import migrate
from tests.cluster_helpers import cluster_config, eventually

LEASE = 2.0
RENEW = LEASE / 4
RESOURCE = agent_resource("a")


class Holder:
    """The LeaseHolder: what it was told, in order."""

    def __init__(self) -> None:
        self.leases: list[Lease] = []
        self.dropped: list[str] = []

    async def gained(self, lease: Lease) -> None:
        self.leases.append(lease)

    async def lost(self, resource: str) -> None:
        self.dropped.append(resource)


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    # A backend waiting on a lock notices its client gone within 0.1 s (else only once the
    # lock is free): what the test of a thrown-away connection looks for.
    conn = await asyncpg.connect(database_url)
    await conn.execute(
        "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET client_connection_check_interval"
        " = 100', current_database()); END $$"
    )
    await conn.close()
    pool = await open_pool(cluster_config(database_url))
    await migrate(pool)
    yield pool
    await pool.close()


async def _keeper(pool: asyncpg.Pool, holder: Holder) -> tuple[LeaseKeeper, asyncio.Task[None]]:
    keeper = LeaseKeeper(pool, "w1", [RESOURCE], holder, lease_seconds=LEASE, renew_seconds=RENEW)
    task = asyncio.create_task(keeper.run())

    async def holding() -> bool:
        return keeper.holds(RESOURCE) is not None

    await eventually(holding, 10)
    return keeper, task


async def test_a_round_cancelled_mid_statement_throws_its_connection_away(
    pool: asyncpg.Pool,
) -> None:
    holder = Holder()
    keeper, task = await _keeper(pool, holder)
    blocker = await pool.acquire()
    try:
        # Hold the worker's row: the next round's first statement waits on it past its time.
        transaction = blocker.transaction()
        await transaction.start()
        await blocker.execute("SELECT 1 FROM workers WHERE name = 'w1' FOR UPDATE")

        async def blocked() -> int | None:
            # Asked outside the blocker's transaction, which would see one snapshot of it.
            return await pool.fetchval(
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE '%INSERT INTO workers%'"
            )

        async def waiting() -> bool:
            return await blocked() is not None

        await eventually(waiting, 10)
        pid = await blocked()

        async def gone() -> bool:
            return not await pool.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid
            )

        # Gone while the lock is still held: terminated, not cancelled and kept for reuse.
        await eventually(gone, 10)
        await transaction.rollback()
    finally:
        await pool.release(blocker)
    # The rounds go on, on fresh connections; the lease is held again (or still).
    await eventually(lambda: _holds(keeper), 10)
    assert not task.done()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_a_database_error_is_a_missed_renewal_not_the_keeper_s_end(
    pool: asyncpg.Pool,
) -> None:
    holder = Holder()
    keeper, task = await _keeper(pool, holder)
    # Every round now fails with an error the server answers (no such table).
    await pool.execute("ALTER TABLE leases RENAME TO leases_away")
    try:

        async def dropped() -> bool:
            return holder.dropped == [RESOURCE]

        await eventually(dropped, LEASE + 5)
        assert not task.done()
    finally:
        await pool.execute("ALTER TABLE leases_away RENAME TO leases")
    await eventually(lambda: _holds(keeper), LEASE + 5)
    assert len(holder.leases) == 2 and holder.leases[1].generation > holder.leases[0].generation
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _holds(keeper: LeaseKeeper) -> bool:
    return keeper.holds(RESOURCE) is not None
