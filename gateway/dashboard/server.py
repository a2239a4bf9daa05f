"""The dashboard's web server: an aiohttp application inside the gateway process, on its
event loop, owned by the daemon through `Dashboard.start()` / `stop()`.

Every request passes these checks before a page sees it (see `auth.py` for the token):
- security headers on every response, errors included (CSP with no inline script, no
  framing, no sniffing, no referrer, no caching);
- when bound to loopback, the Host header names the site host (auth.site_host: a name
  under .localhost derived from the token, so the cookie reaches no other port's listener;
  a DNS-rebinding page cannot talk to it either); requests under any other name, 127.0.0.1
  included, get 421 and learn nothing;
- a session cookie naming a live server-side session (browser_sessions.py), except for the
  login page and the static files: pages redirect to `/login`, anything else (a script
  asking for JSON or a stream, a POST) gets 401; a task of the app sweeps out the sessions
  a rotated token or the idle timeout revoked, ending their open event streams;
- on POST, PUT, PATCH and DELETE: no cross-site request (Sec-Fetch-Site, Origin) and, once
  logged in, the session's CSRF token in the `X-CSRF-Token` header or the `_csrf` field.

`GET /proof?challenge=...` answers HMAC(nonce, challenge) with this run's nonce, which the
gateway also writes to `<data_dir>/dashboard.json` (gateway/ops/rendezvous.py): how
`clawgate dashboard` knows the listener on the port is this gateway before it makes a link.

Pages are modules of this package listed in PAGE_MODULES, each exposing
`routes(services) -> list[web.RouteDef]`; one not installed yet shows a placeholder.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import logging
import mimetypes
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from aiohttp import web

from clawgate.gateway.dashboard.auth import (
    COOKIE_NAME,
    CSRF_FIELD,
    CSRF_HEADER,
    ensure_token,
    is_loopback,
    read_token,
)
from clawgate.gateway.dashboard.browser_sessions import SWEEP_SECONDS
from clawgate.gateway.dashboard.render import (
    ENVIRONMENT,
    NAV,
    SERVICES,
    STATIC_DIR,
    environment,
    render,
)
from clawgate.gateway.dashboard.services import DashboardServices
from clawgate.gateway.dashboard.web_channel import WebChannel
from clawgate.gateway.ops.rendezvous import (
    PROOF_PATH,
    DashboardRecord,
    answer,
    new_nonce,
    record_path,
)
from clawgate.kernel.errors import ConfigError, PathOutsideRoot, Retry
from clawgate.kernel.retry import Backoff, retrying
from clawgate.kernel.storage import confine

log = logging.getLogger(__name__)

# The page modules, in this package; a missing one is skipped (its nav entry shows a
# placeholder). Each exposes `routes(services) -> list[web.RouteDef]`.
PAGE_MODULES = (
    "login",
    "agent_switch",
    "memory",
    "memory_browse",
    "owner_files",
    "sessions",
    "chat",
    "approvals",
    "people",
    "jobs",
    "spend",
    "health",
    "settings",
    "restart",
)
PUBLIC_PREFIXES = ("/login", "/static/", PROOF_PATH)
PROOF_NONCE = web.AppKey("proof_nonce", str)
# How long to wait before trying a taken port again, after 1, 2, ... failures.
BIND_BACKOFF = Backoff(first=1.0, factor=2.0, cap=30.0)
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cache-Control": "no-store",
}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def build_app(services: DashboardServices, *, loopback: bool | None = None) -> web.Application:
    """The whole dashboard as an aiohttp application. `loopback`: enforce a loopback Host
    header (default: when the configured host is loopback)."""
    if loopback is None:
        loopback = is_loopback(services.config.dashboard.host)
    middlewares = [_host_check] if loopback else []
    app = web.Application(middlewares=[*middlewares, _require_login, _csrf_check])
    app[SERVICES] = services
    app[ENVIRONMENT] = environment()
    app.on_response_prepare.append(_security_headers)
    app.cleanup_ctx.append(_session_sweeper)
    app.router.add_get("/", _home)
    app.router.add_get(PROOF_PATH, _proof)
    app.router.add_get("/static/{name:.+}", _static)
    for name in PAGE_MODULES:
        module_name = f"{__package__}.{name}"
        if importlib.util.find_spec(module_name) is None:
            continue
        app.router.add_routes(importlib.import_module(module_name).routes(services))
    served = {info.get("path") for info in (r.get_info() for r in app.router.resources())}
    for title, path in NAV:
        if path not in served:
            app.router.add_get(path, _placeholder(title))
    return app


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)


async def _session_sweeper(app: web.Application) -> AsyncIterator[None]:
    """While the app serves: end revoked sessions even when no request comes (a rotation by
    the CLI, an idle timeout), so their open event streams end too."""

    async def sweep() -> None:
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            app[SERVICES].auth.sweep()

    task = asyncio.create_task(sweep(), name="dashboard session sweep")
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


@web.middleware
async def _host_check(request: web.Request, handler: Handler) -> web.StreamResponse:
    host = request.host.rsplit(":", 1)[0].lower()
    if host != request.app[SERVICES].auth.site_host():
        # The answer must not name the site host: anyone on this machine can ask.
        raise web.HTTPMisdirectedRequest(
            text="open the dashboard through the link `clawgate dashboard` prints"
        )
    return await handler(request)


@web.middleware
async def _require_login(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.path.startswith(PUBLIC_PREFIXES):
        return await handler(request)
    if request.app[SERVICES].auth.valid_session(request.cookies.get(COOKIE_NAME)):
        return await handler(request)
    accept = request.headers.get("Accept", "")
    if request.method == "GET" and not ("application/json" in accept or "event-stream" in accept):
        raise web.HTTPSeeOther("/login")
    raise web.HTTPUnauthorized(text="log in first: run `clawgate dashboard`")


@web.middleware
async def _csrf_check(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.method not in UNSAFE_METHODS:
        return await handler(request)
    if request.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
        raise web.HTTPForbidden(text="cross-site request refused")
    origin = request.headers.get("Origin")
    # With Referrer-Policy no-referrer a browser sends `Origin: null` on same-origin form
    # posts; a concrete origin must be ours.
    if origin not in (None, "null") and origin != f"{request.scheme}://{request.host}":
        raise web.HTTPForbidden(text="cross-origin request refused")
    if request.path.startswith(PUBLIC_PREFIXES):
        # Logging in needs the token itself, which a forged request cannot carry; a stale
        # cookie (the token was rotated) must not stand in the way.
        return await handler(request)
    cookie = request.cookies.get(COOKIE_NAME)
    given = request.headers.get(CSRF_HEADER)
    if given is None and request.content_type in (
        "application/x-www-form-urlencoded",
        "multipart/form-data",
    ):
        given = str((await request.post()).get(CSRF_FIELD, "")) or None
    if not request.app[SERVICES].auth.valid_csrf(cookie, given):
        raise web.HTTPForbidden(text="missing or wrong CSRF token: reload the page")
    return await handler(request)


async def _home(request: web.Request) -> web.StreamResponse:
    raise web.HTTPSeeOther("/chat")


async def _proof(request: web.Request) -> web.StreamResponse:
    nonce = request.app.get(PROOF_NONCE)
    challenge = request.query.get("challenge", "")
    if nonce is None or not 32 <= len(challenge) <= 128:
        raise web.HTTPNotFound()
    return web.Response(text=answer(nonce, challenge))


async def _static(request: web.Request) -> web.StreamResponse:
    try:
        path = confine(STATIC_DIR, request.match_info["name"])
    except PathOutsideRoot:
        raise web.HTTPNotFound() from None
    if not path.is_file():
        raise web.HTTPNotFound()
    kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return web.FileResponse(path, headers={"Content-Type": kind, "Cache-Control": "no-cache"})


def _placeholder(title: str) -> Handler:
    async def page(request: web.Request) -> web.StreamResponse:
        return render(request, "placeholder.html", title=title)

    return page


class Dashboard:
    """The dashboard server of one gateway. Built before the gateway starts (a setup error
    stops the daemon with one line); `start` binds after the gateway runs: a port in use is
    logged once, recorded for `clawgate status` and doctor, and tried again with backoff
    while the gateway keeps running; `stop` closes every connection. While it runs,
    `<data_dir>/dashboard.json` says where it listens (or what keeps it from listening) and
    holds this run's proof nonce."""

    def __init__(self, services: DashboardServices) -> None:
        self.services = services
        self.settings = services.config.dashboard
        self.url: str | None = None
        self._runner: web.AppRunner | None = None
        self._retrying: asyncio.Task[None] | None = None
        self._nonce = new_nonce()
        data_dir = services.config.root.data_dir
        self._record_file = record_path(data_dir)
        if self.settings.enabled and not is_loopback(self.settings.host):
            if read_token(data_dir) is None:
                raise ConfigError(
                    f"[dashboard] host = {self.settings.host!r} is not loopback and there is "
                    "no dashboard token: run `clawgate dashboard --rotate` to make one, or "
                    'set host = "127.0.0.1"'
                )

    async def start(self) -> None:
        if not self.settings.enabled:
            return
        ensure_token(self.services.config.root.data_dir, self.services.runtime.writer)
        error = await self._bind()
        if error is None:
            return
        log.error(
            "dashboard: cannot listen on %s:%d (%s): another process holds the port; stop it "
            "or set [dashboard] port (or CLAWGATE_DASHBOARD__PORT) to a free one, 0 for any; "
            "the gateway runs on and tries again",
            self.settings.host,
            self.settings.port,
            error,
        )
        self._retrying = asyncio.create_task(self._retry(), name="dashboard bind")

    async def _bind(self) -> str | None:
        """Listen, and record where; or record why not and return it."""
        app = build_app(self.services)
        app[PROOF_NONCE] = self._nonce
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.settings.host, self.settings.port).start()
        except OSError as exc:
            await runner.cleanup()
            error = exc.strerror or str(exc)
            self._record(self.settings.host, self.settings.port, error)
            return error
        self._runner = runner
        host, port = _first_address(runner.addresses)
        self.url = f"http://{host}:{port}/"
        self._record(host.strip("[]"), port, None)
        log.info("dashboard listening on %s (log in with `clawgate dashboard`)", self.url)
        return None

    async def _retry(self) -> None:
        """Bind again, with backoff, until the port is free; `start`'s bind was the first try."""

        async def bind() -> None:
            error = await self._bind()
            if error is not None:
                raise Retry(error)

        await asyncio.sleep(BIND_BACKOFF.delay(1))
        await retrying(bind, attempts=None, backoff=BIND_BACKOFF)

    def _record(self, host: str, port: int, error: str | None) -> None:
        record = DashboardRecord(
            pid=os.getpid(), host=host, port=port, nonce=self._nonce, error=error
        )
        try:
            self.services.runtime.writer.replace(self._record_file, record.model_dump_json())
        except OSError as exc:  # `clawgate dashboard` will say it cannot prove the gateway
            log.warning("dashboard: cannot write %s: %s", self._record_file, exc)

    async def stop(self) -> None:
        retrying, self._retrying = self._retrying, None
        if retrying is not None:
            retrying.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await retrying
        if self.settings.enabled:
            self._record_file.unlink(missing_ok=True)
        runner, self._runner = self._runner, None
        if runner is not None:
            manager = self.services.manager
            chat = manager.channels.get(WebChannel.name) if manager is not None else None
            if isinstance(chat, WebChannel):
                chat.end_streams()
            await runner.cleanup()


def _first_address(addresses: list[Any]) -> tuple[str, int]:
    host, port = addresses[0][:2]
    return (f"[{host}]" if ":" in host else host), int(port)
