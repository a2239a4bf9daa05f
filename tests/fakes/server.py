"""What every fake service shares: an aiohttp app on 127.0.0.1 (a free port), run inside
the test's event loop, usable as `async with Fake() as fake`."""

from __future__ import annotations

import asyncio
from typing import Self

from aiohttp import web


class LoopbackServer:
    client_max_size = 1024**2
    # Any address of 127.0.0.0/8: every one of them is this machine.
    host = "127.0.0.1"
    # Short: handlers that hang on purpose are released through `_stopping` anyway.
    shutdown_timeout = 1.0

    def __init__(self) -> None:
        self._stopping = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._port = 0

    def add_routes(self, app: web.Application) -> None:
        raise NotImplementedError

    @property
    def port(self) -> int:
        if self._runner is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return self._port

    async def start(self) -> None:
        app = web.Application(client_max_size=self.client_max_size)
        self.add_routes(app)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=self.shutdown_timeout)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0)
        await site.start()
        self._port = self._runner.addresses[0][1]

    async def before_stop(self) -> None:
        """Hook: close what the server holds open (e.g. a websocket)."""

    async def stop(self) -> None:
        self._stopping.set()
        await self.before_stop()
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()
