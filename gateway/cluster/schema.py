"""The cluster's tables, created and migrated by clawgate itself. Each migration is applied
once, in order, in one transaction under an advisory lock, so workers starting together do
not race; `clawgate_schema` records the version reached. Append new steps, never edit one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clawgate.kernel.errors import ClusterError

if TYPE_CHECKING:
    import asyncpg

# Any constant that no other application's advisory lock is likely to use.
_MIGRATION_LOCK = 0x6C617767617465

MIGRATIONS: tuple[str, ...] = (
    # 1: workers and leases.
    """
    CREATE TABLE workers (
        name        text PRIMARY KEY,
        started_at  timestamptz NOT NULL DEFAULT now(),
        seen_at     timestamptz NOT NULL DEFAULT now(),
        draining    boolean NOT NULL DEFAULT false
    );
    CREATE TABLE leases (
        resource    text PRIMARY KEY,          -- 'agent:<name>'
        worker      text,                      -- NULL: released
        generation  bigint NOT NULL,           -- +1 on every change of holder
        expires_at  timestamptz NOT NULL
    );
    """,
)


async def migrate(pool: asyncpg.Pool) -> int:
    """Bring the schema to the newest version; the version reached. A database newer than this
    clawgate is refused: an older worker must not write tables it does not know."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
        await conn.execute("CREATE TABLE IF NOT EXISTS clawgate_schema (version int NOT NULL)")
        version = await conn.fetchval("SELECT max(version) FROM clawgate_schema") or 0
        if version > len(MIGRATIONS):
            raise ClusterError(
                f"the cluster database is at schema {version}, newer than this clawgate "
                f"({len(MIGRATIONS)}): upgrade this worker"
            )
        for number, sql in enumerate(MIGRATIONS[version:], start=version + 1):
            await conn.execute(sql)
            await conn.execute("INSERT INTO clawgate_schema (version) VALUES ($1)", number)
        return len(MIGRATIONS)
