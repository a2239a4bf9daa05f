"""The header's agent switcher: POST /agent remembers the chosen agent in a cookie, which
`render.services` reads to scope every page (and the web chat) to that agent."""

from __future__ import annotations

from aiohttp import web

from clawgate.gateway.dashboard.render import AGENT_COOKIE, services
from clawgate.gateway.dashboard.services import DashboardServices


def routes(_services: DashboardServices) -> list[web.RouteDef]:
    return [web.post("/agent", switch)]


def _back_to(path: str) -> str:
    """Where to go after switching: a path of this site, else the chat."""
    if not path.startswith("/") or path.startswith("//") or "\\" in path:
        return "/chat"
    return path


async def switch(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    name = str(form.get("agent", ""))
    if name not in services(request).agent_names:
        raise web.HTTPBadRequest(text=f"no agent named {name!r} here")
    response = web.HTTPSeeOther(_back_to(str(form.get("next", "/chat"))))
    response.set_cookie(AGENT_COOKIE, name, path="/", httponly=True, samesite="Strict")
    raise response
