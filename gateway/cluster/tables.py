"""TableWriter: one holder's way to the inbound and outbound tables, under its lease.

Work on a pooled connection (`pooled`: thrown away when cut short), tried again while the
database is away when the work may safely run twice (`retry=True`: every inbound write is
keyed by the platform's message id, every status change names the status it leaves), once
otherwise (a reply queued twice would be sent twice). A `Fenced` refusal is never retried:
the lease is gone and the holder's work is being stopped."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from clawgate.gateway.cluster.db import database_errors, pooled
from clawgate.gateway.cluster.leases import Lease
from clawgate.kernel.errors import ClusterError

if TYPE_CHECKING:
    import asyncpg

log = logging.getLogger(__name__)

T = TypeVar("T")

RETRY_SECONDS = 0.5


class TableWriter:
    def __init__(self, pool: asyncpg.Pool, lease: Lease) -> None:
        self.pool = pool
        self.lease = lease

    async def run(
        self, work: Callable[[asyncpg.Connection], Awaitable[T]], *, retry: bool = True
    ) -> T:
        errors = database_errors()
        while True:
            try:
                async with pooled(self.pool) as conn:
                    return await work(conn)
            except errors as exc:
                if not retry:
                    raise ClusterError(f"the cluster database failed ({exc})") from exc
                log.warning(
                    "cluster: %s: database write failed (%s); trying again",
                    self.lease.resource,
                    type(exc).__name__,
                )
                await asyncio.sleep(RETRY_SECONDS)
