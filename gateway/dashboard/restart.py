"""Restarting the gateway from the dashboard, in the same process: after a settings change
or a group allowed, the owner presses Restart; the config file is read again (a file that
does not load is refused with its one line, and the gateway runs on as it was); the gateway
stops as on SIGTERM (in-flight turns finish) and `app.serve` builds everything again from the
new config. Browser logins survive it (the composition root hands the same `Auth` to the new
dashboard), so the page that asked waits on `/restart/alive` until a new run answers, then
goes back where it was (static/restart.js).

    POST /restart          ask for it; answered with the waiting page
    POST /restart/go       the waiting page has loaded its script: restart now (else it
                           starts GO_ANYWAY_SECONDS later)
    GET  /restart/alive    {"run": the id of this run}
"""

from __future__ import annotations

import asyncio
import uuid

from aiohttp import web

from clawgate.gateway.dashboard.render import render, services
from clawgate.gateway.dashboard.services import DashboardServices
from clawgate.kernel.config import Config, default_config_path, load_config
from clawgate.kernel.errors import ConfigError

GO_ANYWAY_SECONDS = 3.0


class Restarts:
    """What `app.serve` waits on beside its stop signal: a restart asked for, with the
    config it checked."""

    def __init__(self) -> None:
        self.wanted = asyncio.Event()
        self.config: Config | None = None
        self.run = uuid.uuid4().hex  # this run's id; a new one each restart

    def request(self, config: Config) -> None:
        """Restart with `config` once `go` is called."""
        self.config = config

    def go(self) -> None:
        """Restart now, if one was asked for and has not happened yet."""
        if self.config is not None:
            self.wanted.set()

    def take(self) -> Config | None:
        """The config to restart with (None: no restart asked); ready for the next run."""
        config, self.config = self.config, None
        self.wanted.clear()
        self.run = uuid.uuid4().hex
        return config


def routes(_services: DashboardServices) -> list[web.RouteDef]:
    return [
        web.post("/restart", restart),
        web.post("/restart/go", go),
        web.get("/restart/alive", alive),
    ]


def _back(path: str) -> str:
    return path if path.startswith("/") and not path.startswith("//") else "/settings"


async def restart(request: web.Request) -> web.StreamResponse:
    svc = services(request)
    form = await request.post()
    back = _back(str(form.get("next", "/settings")))
    if svc.restarts is None:
        raise web.HTTPServiceUnavailable(text="this gateway cannot restart itself")
    path = svc.config_path or default_config_path()
    try:
        config = await asyncio.to_thread(load_config, path)
    except ConfigError as exc:
        return render(
            request, "restart.html", title="Restart", error=str(exc), back=back, run="", status=400
        )
    run = svc.restarts.run
    svc.restarts.request(config)
    # The waiting page's script says go once it has loaded (it must, to come back by
    # itself); a page without scripts gets its restart a few seconds later anyway.
    asyncio.get_running_loop().call_later(GO_ANYWAY_SECONDS, svc.restarts.go)
    return render(request, "restart.html", title="Restarting", error="", back=back, run=run)


async def go(request: web.Request) -> web.StreamResponse:
    restarts = services(request).restarts
    if restarts is not None:
        restarts.go()
    return web.json_response({"ok": True})


async def alive(request: web.Request) -> web.StreamResponse:
    restarts = services(request).restarts
    return web.json_response({"run": restarts.run if restarts is not None else ""})
