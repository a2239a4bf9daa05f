"""The memory pages: MEMORY.md (view, edit), its versions, HISTORY.md and the daily logs,
search, audit. Every read and write goes through the runtime's MemoryStore and its writer."""

from __future__ import annotations

import asyncio

from aiohttp import web

from clawgate.gateway.dashboard.render import render, services
from clawgate.gateway.dashboard.services import DashboardServices


def routes(_services: DashboardServices) -> list[web.RouteDef]:
    return [web.get("/memory", memory_page)]


async def memory_page(request: web.Request) -> web.StreamResponse:
    text = await asyncio.to_thread(services(request).memory.read_memory)
    return render(request, "memory.html", title="Memory", text=text)
