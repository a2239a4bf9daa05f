"""Lease rows: who holds an agent or a bot account, until when, and under which generation.

Every change of holder adds one to the generation, and every write to a lease row names the
generation it expects (a renewal or a release by a holder that was taken over changes
nothing). Expiry is the database's clock alone; a worker measures its own time left from the
moment it asked for a renewal (keeper.py), which can only be earlier than the database's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncpg


# Notified when a lease is handed back, so that a keeper waiting for its next round takes it.
LEASE_CHANNEL = "clawgate_leases"
RELEASED = "released"


@dataclass(frozen=True)
class Lease:
    resource: str
    worker: str
    generation: int


def agent_resource(agent: str) -> str:
    return f"agent:{agent}"


async def acquire(
    conn: asyncpg.Connection, resource: str, worker: str, seconds: float
) -> Lease | None:
    """Take a lease that is free, expired, or already this worker's (a restarted worker's own
    leases come back at once); always under a new generation. None: another worker holds it."""
    generation = await conn.fetchval(
        """
        INSERT INTO leases AS l (resource, worker, generation, expires_at)
        VALUES ($1, $2, 1, now() + make_interval(secs => $3))
        ON CONFLICT (resource) DO UPDATE
            SET worker = EXCLUDED.worker, generation = l.generation + 1,
                expires_at = EXCLUDED.expires_at
            WHERE l.worker IS NULL OR l.expires_at < now() OR l.worker = EXCLUDED.worker
        RETURNING generation
        """,
        resource,
        worker,
        seconds,
    )
    return Lease(resource, worker, generation) if generation is not None else None


async def renew(conn: asyncpg.Connection, leases: list[Lease], seconds: float) -> set[Lease]:
    """Extend the leases still held as they are; the ones renewed."""
    if not leases:
        return set()
    rows = await conn.fetch(
        """
        UPDATE leases SET expires_at = now() + make_interval(secs => $4)
        FROM unnest($1::text[], $2::text[], $3::bigint[]) AS held(resource, worker, generation)
        WHERE leases.resource = held.resource AND leases.worker = held.worker
          AND leases.generation = held.generation AND leases.expires_at > now()
        RETURNING leases.resource
        """,
        [lease.resource for lease in leases],
        [lease.worker for lease in leases],
        [lease.generation for lease in leases],
        seconds,
    )
    renewed = {row["resource"] for row in rows}
    return {lease for lease in leases if lease.resource in renewed}


async def release(conn: asyncpg.Connection, lease: Lease) -> None:
    """Give a lease up now (its work already stopped), so another worker need not wait: the
    other keepers are woken (LEASE_CHANNEL)."""
    await conn.execute(
        """
        UPDATE leases SET worker = NULL, expires_at = now()
        WHERE resource = $1 AND worker = $2 AND generation = $3
        """,
        lease.resource,
        lease.worker,
        lease.generation,
    )
    await conn.execute("SELECT pg_notify($1, $2)", LEASE_CHANNEL, RELEASED)
