"""LeaseKeeper: one worker's leases, kept, balanced and given up in time.

Every `renew_seconds` one round, bounded by that time: mark this worker seen, renew what it
holds, take free or expired leases up to its fair share (the resources of a kind over the
live workers that are not draining, rounded up), and hand one surplus lease back per round
so that a worker that joins gets work without anyone dying. A draining worker hands all of
them back. A lease is lost when a renewal finds it gone, and, whatever the database answers
or fails to answer, when its local deadline passes: the moment the renewal was asked for plus
`lease_seconds`, less one renewal interval to stop the work in. The holder is told
(`LeaseHolder.lost`) and has stopped that resource's work when it returns, so a worker cut off
from the database stops before its lease can expire there and another worker take over."""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from clawgate.gateway.cluster.db import database_errors, pooled
from clawgate.gateway.cluster.leases import (
    LEASE_CHANNEL,
    RELEASED,
    Lease,
    acquire,
    release,
    renew,
)
from clawgate.gateway.cluster.wakeups import Wakeups

if TYPE_CHECKING:
    import asyncpg

log = logging.getLogger(__name__)


class LeaseHolder(Protocol):
    async def gained(self, lease: Lease) -> None:
        """Start the resource's work under this lease (in tasks of the holder's own)."""

    async def lost(self, resource: str) -> None:
        """Stop the resource's work; return only once it has stopped."""


class LeaseKeeper:
    def __init__(
        self,
        pool: asyncpg.Pool,
        worker: str,
        resources: list[str],
        holder: LeaseHolder,
        *,
        lease_seconds: float,
        renew_seconds: float,
        wakeups: Wakeups | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`wakeups`: listening on LEASE_CHANNEL, to take a handed-back lease at once rather
        than at the next round."""
        self._pool = pool
        self._worker = worker
        self._resources = resources
        self._holder = holder
        self._lease_seconds = lease_seconds
        self._renew_seconds = renew_seconds
        self._wakeups = wakeups
        self._clock = clock
        self._held: dict[str, Lease] = {}
        self._deadline: dict[str, float] = {}
        self._changing = asyncio.Lock()
        self._registered = False
        self.drained = asyncio.Event()

    def holds(self, resource: str) -> Lease | None:
        """The lease on `resource` if this worker holds it and its local deadline is ahead."""
        lease = self._held.get(resource)
        if lease is None or self._clock() >= self._deadline[resource]:
            return None
        return lease

    async def run(self) -> None:
        """Rounds until cancelled; every lease handed back on the way out."""
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(self._watch())
                tasks.create_task(self._rounds())
        finally:
            await asyncio.shield(self._give_all_back())

    async def _rounds(self) -> None:
        # TimeoutError included: a round out of time. Whatever the database does, the keeper
        # lives on; a failed round is a missed renewal, which the local deadlines account for.
        errors = database_errors()
        while True:
            started = self._clock()
            try:
                async with asyncio.timeout(self._renew_seconds), pooled(self._pool) as conn:
                    await self._round(conn, started)
            except errors as exc:
                log.warning("cluster: lease round failed (%s); retrying", type(exc).__name__)
            left = max(0.0, started + self._renew_seconds - self._clock())
            if self._wakeups is not None:
                await self._wakeups.wait(LEASE_CHANNEL, RELEASED, left)
            else:
                await asyncio.sleep(left)

    async def _watch(self) -> None:
        """Drop leases whose local deadline passed, even while a round hangs on the database."""
        while True:
            now = self._clock()
            for resource, deadline in list(self._deadline.items()):
                if now >= deadline:
                    # Not under the round's lock: a round hung on the database holds it.
                    log.warning("cluster: %s not renewed in time; its work stops", resource)
                    await self._drop(resource)
            await asyncio.sleep(self._renew_seconds / 8)

    async def _round(self, conn: asyncpg.Connection, started: float) -> None:
        # A worker (re)starting takes work again, even if it was drained before.
        draining = await conn.fetchval(
            """
            INSERT INTO workers AS w (name) VALUES ($1)
            ON CONFLICT (name) DO UPDATE
                SET seen_at = now(),
                    started_at = CASE WHEN $2 THEN w.started_at ELSE now() END,
                    draining = w.draining AND $2
            RETURNING draining
            """,
            self._worker,
            self._registered,
        )
        self._registered = True
        async with self._changing:
            kept = await renew(conn, list(self._held.values()), self._lease_seconds)
            for resource in list(self._held):
                if resource not in self._held:
                    continue  # the watchdog dropped it meanwhile
                if self._held[resource] in kept:
                    self._deadline[resource] = self._local_deadline(started)
                else:
                    log.warning("cluster: lost %s to another worker", resource)
                    await self._drop(resource)
            if draining:
                for resource in list(self._held):
                    await self._hand_back(conn, resource)
                self.drained.set()
                return
            self.drained.clear()
            await self._balance(conn, started)

    async def _balance(self, conn: asyncpg.Connection, started: float) -> None:
        live = await conn.fetchval(
            """
            SELECT count(*) FROM workers
            WHERE NOT draining AND seen_at > now() - make_interval(secs => $1)
            """,
            self._lease_seconds,
        )
        taken = {
            row["resource"]
            for row in await conn.fetch(
                "SELECT resource FROM leases WHERE worker IS NOT NULL AND expires_at > now()"
            )
        }
        for kind in sorted({resource.split(":", 1)[0] for resource in self._resources}):
            of_kind = [r for r in self._resources if r.split(":", 1)[0] == kind]
            share = math.ceil(len(of_kind) / max(1, live))
            mine = [r for r in of_kind if r in self._held]
            if len(mine) > share:
                await self._hand_back(conn, random.choice(mine))
                continue
            free = [r for r in of_kind if r not in taken and r not in self._held]
            random.shuffle(free)
            for resource in free[: share - len(mine)]:
                lease = await acquire(conn, resource, self._worker, self._lease_seconds)
                if lease is not None:
                    self._held[resource] = lease
                    self._deadline[resource] = self._local_deadline(started)
                    log.info("cluster: %s taken, generation %d", resource, lease.generation)
                    await self._holder.gained(lease)

    async def _hand_back(self, conn: asyncpg.Connection, resource: str) -> None:
        lease = self._held.get(resource)
        if lease is None:
            return
        await self._drop(resource)
        await release(conn, lease)
        log.info("cluster: %s handed back", resource)

    async def _drop(self, resource: str) -> None:
        if self._held.pop(resource, None) is not None:
            del self._deadline[resource]
            await self._holder.lost(resource)

    async def _give_all_back(self) -> None:
        leases = list(self._held.values())
        for resource in list(self._held):
            await self._drop(resource)
        try:
            async with asyncio.timeout(self._renew_seconds), pooled(self._pool) as conn:
                for lease in leases:
                    await release(conn, lease)
        except database_errors():
            pass  # they expire on their own

    def _local_deadline(self, asked_at: float) -> float:
        return asked_at + self._lease_seconds - self._renew_seconds
