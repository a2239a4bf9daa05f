"""The sessions pages: every session, a transcript, the archive."""

from __future__ import annotations

import asyncio

from aiohttp import web

from clawgate.gateway.dashboard.render import render, services
from clawgate.gateway.dashboard.services import DashboardServices


def routes(_services: DashboardServices) -> list[web.RouteDef]:
    return [web.get("/sessions", sessions_page)]


async def sessions_page(request: web.Request) -> web.StreamResponse:
    keys = await asyncio.to_thread(services(request).sessions.list_keys)
    return render(request, "sessions.html", title="Sessions", keys=[key for key, _ in keys])
