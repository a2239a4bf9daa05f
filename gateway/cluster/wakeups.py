"""Wake-ups by LISTEN/NOTIFY, polling as the fallback. A waiter sleeps until a notification
names its key or its timeout passes, whichever is first: a notification lost with a dropped
connection (or never sent) delays the work to the next poll, never loses it."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from clawgate.gateway.cluster.db import connect, database_errors
from clawgate.kernel.config_cluster import ClusterConfig
from clawgate.kernel.errors import ClusterError

if TYPE_CHECKING:
    import asyncpg

log = logging.getLogger(__name__)


class Wakeups:
    def __init__(
        self, config: ClusterConfig, channels: tuple[str, ...], *, poll_seconds: float
    ) -> None:
        self._config = config
        self._channels = channels
        self._poll_seconds = poll_seconds
        self._events: defaultdict[tuple[str, str], asyncio.Event] = defaultdict(asyncio.Event)

    async def wait(self, channel: str, key: str, timeout: float) -> None:
        """Until `key` is notified on `channel`, or `timeout` seconds."""
        event = self._events[(channel, key)]
        try:
            async with asyncio.timeout(timeout):
                await event.wait()
        except TimeoutError:
            pass
        event.clear()

    async def run(self) -> None:
        """Listen, reconnecting after the database goes away, until cancelled."""
        while True:
            try:
                conn = await connect(self._config, timeout=self._poll_seconds * 4)
            except ClusterError as exc:
                log.warning("cluster: no wake-ups (%s); polling", exc)
                await asyncio.sleep(self._poll_seconds)
                continue
            try:
                await self._listen(conn)
            except database_errors():
                log.warning("cluster: wake-up connection lost; polling until it is back")
            finally:
                conn.terminate()

    async def _listen(self, conn: asyncpg.Connection) -> None:
        lost = asyncio.Event()
        conn.add_termination_listener(lambda *_: lost.set())
        for channel in self._channels:
            await conn.add_listener(channel, self._notified)
        # Anything written while this connection was down is found by the first poll.
        for event in self._events.values():
            event.set()
        while not lost.is_set():
            try:
                async with asyncio.timeout(self._poll_seconds * 4):
                    await lost.wait()
            except TimeoutError:
                await conn.execute("SELECT 1")  # a dead peer shows up as an error here

    def _notified(self, _conn: Any, _pid: int, channel: str, payload: str) -> None:
        self._events[(channel, payload)].set()
