"""The cluster's connection pool. asyncpg is an optional extra (`clawgate[cluster]`): it is
imported here, when a `[cluster]` config is used, and nowhere else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from clawgate.kernel.config_cluster import ClusterConfig
from clawgate.kernel.errors import ClusterError

if TYPE_CHECKING:
    import asyncpg

# asyncpg's own errors a database that is down, restarting or refusing us raises.
_CONNECT_ERRORS: tuple[type[Exception], ...] = (OSError, TimeoutError)


def _driver() -> Any:
    try:
        import asyncpg
    except ImportError:
        raise ClusterError(
            "[cluster] needs the PostgreSQL driver: pip install 'clawgate[cluster]'"
        ) from None
    return asyncpg


async def open_pool(config: ClusterConfig, *, timeout: float = 10.0) -> asyncpg.Pool:
    """A pool of `config.pool_size` connections; a database that cannot be reached is one
    line naming the host, never the password."""
    asyncpg = _driver()
    url = config.database_url.get_secret_value()
    try:
        pool = await asyncpg.create_pool(
            url, min_size=1, max_size=config.pool_size, timeout=timeout, command_timeout=timeout
        )
    except (*_CONNECT_ERRORS, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise ClusterError(f"cannot reach the cluster database at {_where(url)}: {exc}") from None
    assert pool is not None
    return pool


async def connect(config: ClusterConfig, *, timeout: float = 10.0) -> asyncpg.Connection:
    """One connection of its own (LISTEN needs one that the pool does not hand out)."""
    asyncpg = _driver()
    url = config.database_url.get_secret_value()
    try:
        return await asyncpg.connect(url, timeout=timeout, command_timeout=timeout)
    except (*_CONNECT_ERRORS, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise ClusterError(f"cannot reach the cluster database at {_where(url)}: {exc}") from None


def transient_errors() -> tuple[type[Exception], ...]:
    """What work against a database that went away, or is shutting down or starting,
    raises: retried on the next round."""
    asyncpg = _driver()
    return (
        *_CONNECT_ERRORS,
        asyncpg.PostgresConnectionError,
        asyncpg.InterfaceError,
        asyncpg.exceptions.OperatorInterventionError,  # shutting down, cannot connect now
    )


def database_errors() -> tuple[type[Exception], ...]:
    """Everything work against the database can raise that is the database's doing, not a bug
    of ours: the transient ones, an error the server answered, a connection whose protocol
    state is broken (asyncpg's InternalClientError). A loop that must outlive the database
    (the lease keeper, the queues) counts any of them as one missed round."""
    asyncpg = _driver()
    return (*transient_errors(), asyncpg.PostgresError, asyncpg.InternalClientError)


@asynccontextmanager
async def pooled(pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Connection]:
    """A connection of the pool for one piece of work. Work that was cancelled (a round out of
    time) or failed anywhere but in SQL leaves the connection's protocol possibly mid-operation:
    it is terminated, never handed back for the next piece of work to find busy ("cannot
    switch to state ...; another operation is in progress"). An error the server answered
    cleanly (a constraint, a missing table) leaves it usable."""
    asyncpg = _driver()
    conn = await pool.acquire()
    try:
        yield conn
    except asyncpg.PostgresError as exc:
        if isinstance(exc, transient_errors()):
            conn.terminate()
        raise
    except BaseException:
        conn.terminate()
        raise
    finally:
        await pool.release(conn)


def _where(url: str) -> str:
    """host:port/database of a URL, without user or password."""
    rest = url.split("://", 1)[-1]
    return rest.rsplit("@", 1)[-1]
