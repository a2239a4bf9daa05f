"""What `clawgate cluster status` shows and what `clawgate cluster drain` does, from the
database alone (any machine with the config can ask, no worker needs to answer)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel

from clawgate.kernel.errors import ClusterError

if TYPE_CHECKING:
    import asyncpg


class WorkerRow(BaseModel, frozen=True):
    name: str
    seen_seconds_ago: float
    draining: bool
    live: bool


class LeaseRow(BaseModel, frozen=True):
    resource: str
    worker: str | None
    generation: int
    expires_in_seconds: float  # negative: expired


class BacklogRow(BaseModel, frozen=True):
    """What waits for one agent or one bot (every leased one, and any other with something
    waiting): messages received and not yet consumed, replies queued and not yet sent
    (pending, or being sent)."""

    name: str  # 'agent:<name>' or 'bot:<platform>:<hash>'
    inbound: int
    outbound: int


class ClusterStatus(BaseModel, frozen=True):
    at: datetime
    schema_version: int
    workers: list[WorkerRow]
    leases: list[LeaseRow]
    backlog: list[BacklogRow]


async def read_status(pool: asyncpg.Pool, lease_seconds: float) -> ClusterStatus:
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read"):
        at = await conn.fetchval("SELECT now()")
        version = await conn.fetchval("SELECT max(version) FROM clawgate_schema")
        workers = await conn.fetch(
            """
            SELECT name, draining, extract(epoch FROM now() - seen_at)::float AS ago
            FROM workers ORDER BY name
            """
        )
        leases = await conn.fetch(
            """
            SELECT resource, worker, generation,
                   extract(epoch FROM expires_at - now())::float AS left
            FROM leases ORDER BY resource
            """
        )
        backlog = await conn.fetch(
            """
            WITH waiting AS (
                SELECT 'agent:' || agent AS name, 1 AS inbound, 0 AS outbound
                    FROM inbound WHERE consumed_at IS NULL
                UNION ALL SELECT bot, 1, 0 FROM inbound WHERE consumed_at IS NULL
                UNION ALL SELECT 'agent:' || agent, 0, 1
                    FROM outbound WHERE status IN ('pending', 'sending') AND agent IS NOT NULL
                UNION ALL SELECT bot, 0, 1 FROM outbound WHERE status IN ('pending', 'sending')
            ), sums AS (
                SELECT name, sum(inbound)::int AS inbound, sum(outbound)::int AS outbound
                FROM waiting GROUP BY name
            )
            SELECT coalesce(l.resource, s.name) AS name,
                   coalesce(s.inbound, 0) AS inbound, coalesce(s.outbound, 0) AS outbound
            FROM leases l FULL JOIN sums s ON s.name = l.resource ORDER BY 1
            """
        )
    return ClusterStatus(
        at=at,
        schema_version=version or 0,
        workers=[
            WorkerRow(
                name=w["name"],
                seen_seconds_ago=w["ago"],
                draining=w["draining"],
                live=w["ago"] < lease_seconds,
            )
            for w in workers
        ],
        leases=[
            LeaseRow(
                resource=lease["resource"],
                worker=lease["worker"],
                generation=lease["generation"],
                expires_in_seconds=lease["left"],
            )
            for lease in leases
        ],
        backlog=[
            BacklogRow(name=row["name"], inbound=row["inbound"], outbound=row["outbound"])
            for row in backlog
        ],
    )


async def set_draining(pool: asyncpg.Pool, worker: str) -> None:
    """Ask a worker to hand its leases over (it does on its next round); a worker that restarts
    takes work again."""
    done = await pool.execute("UPDATE workers SET draining = true WHERE name = $1", worker)
    if done == "UPDATE 0":
        raise ClusterError(
            f"no worker named {worker!r} in the cluster (see: clawgate cluster status)"
        )


async def held_by(pool: asyncpg.Pool, worker: str) -> list[str]:
    """The resources `worker` holds now (unexpired)."""
    rows = await pool.fetch(
        "SELECT resource FROM leases WHERE worker = $1 AND expires_at > now() ORDER BY resource",
        worker,
    )
    return [row["resource"] for row in rows]
