"""Logging in: a one-time code from `clawgate dashboard` (a link) or the token itself (the
form) becomes an HttpOnly, SameSite=Strict session cookie, host-only on the site host
(auth.site_host); logging out ends the session on the server (the cookie stops working
wherever it went) and clears it. A failed attempt is logged, and the same client's next one
waits a little (browser_sessions.LoginThrottle).

A login link arrives from outside the site (typed, or the 0600 page `clawgate dashboard`
opens: login_link.py), and a browser withholds a SameSite=Strict cookie from every redirect
of a navigation another site started; so a good code answers with a page that moves on to
`/` itself, a navigation of this site that carries the new cookie."""

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
        # The page's refresh also takes the code out of the address bar.
        response = render(request, "logged_in.html", title="Logged in")
        _set_session(request, response)
        return response
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
        # A redirect, so a reload does not post the token again.
        response = web.Response(status=303, headers={"Location": "/"})
        _set_session(request, response)
        return response
    auth.throttle.failed(client, "wrong token")
    return render(request, "login.html", title="Log in", status=403, error="Wrong token.")


async def logout(request: web.Request) -> web.StreamResponse:
    services(request).auth.end_session(request.cookies.get(COOKIE_NAME))
    response = web.Response(status=303, headers={"Location": "/login"})
    response.del_cookie(COOKIE_NAME, path="/")
    return response


def _set_session(request: web.Request, response: web.StreamResponse) -> None:
    # No Domain attribute: the cookie belongs to the site host alone.
    response.set_cookie(
        COOKIE_NAME,
        services(request).auth.new_session(),
        max_age=SESSION_SECONDS,
        path="/",
        httponly=True,
        samesite="Strict",
        secure=request.secure,
    )


def _client(request: web.Request) -> str:
    return request.remote or "unknown"
