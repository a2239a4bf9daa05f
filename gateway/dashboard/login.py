"""Logging in: a one-time code from `clawgate dashboard` (a link) or the token itself (the
form) becomes an HttpOnly, SameSite=Strict session cookie; logging out ends the session on
the server (the cookie stops working wherever it went) and clears it. A failed attempt is
logged, and the same client's next one waits a little (browser_sessions.LoginThrottle)."""

from __future__ import annotations

import asyncio

from aiohttp import web

from clawgate.gateway.dashboard.auth import COOKIE_NAME
from clawgate.gateway.dashboard.browser_sessions import SESSION_SECONDS
from clawgate.gateway.dashboard.render import render, services
from clawgate.gateway.dashboard.services import DashboardServices


def routes(_services: DashboardServices) -> list[web.RouteDef]:
    return [
        web.get("/login", login_page),
        web.post("/login", login_with_token),
        web.post("/logout", logout),
    ]


async def login_page(request: web.Request) -> web.StreamResponse:
    code = request.query.get("code")
    if code is None:
        return render(request, "login.html", title="Log in", error="")
    auth, client = services(request).auth, _client(request)
    await auth.throttle.wait_turn(client)
    # In a thread: the login codes file is read and rewritten under its file lock.
    if await asyncio.to_thread(auth.consume_code, code):
        auth.throttle.succeeded(client)
        return _logged_in(request)
    auth.throttle.failed(client, "a used, expired or unknown login link")
    return render(
        request,
        "login.html",
        title="Log in",
        status=403,
        error="That login link is used or expired: run `clawgate dashboard` for a new one.",
    )


async def login_with_token(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    auth, client = services(request).auth, _client(request)
    await auth.throttle.wait_turn(client)
    if auth.check_token(str(form.get("token", ""))):
        auth.throttle.succeeded(client)
        return _logged_in(request)
    auth.throttle.failed(client, "wrong token")
    return render(request, "login.html", title="Log in", status=403, error="Wrong token.")


async def logout(request: web.Request) -> web.StreamResponse:
    services(request).auth.end_session(request.cookies.get(COOKIE_NAME))
    response = web.Response(status=303, headers={"Location": "/login"})
    response.del_cookie(COOKIE_NAME, path="/")
    return response


def _logged_in(request: web.Request) -> web.StreamResponse:
    # A redirect, so the code leaves the address bar and a reload does not resend it.
    response = web.Response(status=303, headers={"Location": "/"})
    response.set_cookie(
        COOKIE_NAME,
        services(request).auth.new_session(),
        max_age=SESSION_SECONDS,
        path="/",
        httponly=True,
        samesite="Strict",
        secure=request.secure,
    )
    return response


def _client(request: web.Request) -> str:
    return request.remote or "unknown"
