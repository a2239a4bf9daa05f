"""Server-rendered pages: one Jinja2 environment (autoescaping every template), the layout's
navigation, and the helpers every page module uses.

A page module renders with `render(request, "page.html", title=..., **values)`; the layout
(`templates/base.html`) adds the navigation, the CSRF token (a `<meta>` for scripts and
`csrf_field()` for forms) and the static files. Scripts are files under `static/`: the
Content-Security-Policy allows no inline script.
"""

from __future__ import annotations

import datetime as dt
import functools
from pathlib import Path
from typing import Any

import jinja2
from aiohttp import web
from markupsafe import Markup

from clawgate.gateway.dashboard.auth import COOKIE_NAME, CSRF_FIELD
from clawgate.gateway.dashboard.services import DashboardServices

PACKAGE_DIR = Path(__file__).parent
TEMPLATES_DIR = PACKAGE_DIR / "templates"
STATIC_DIR = PACKAGE_DIR / "static"

SERVICES = web.AppKey("services", DashboardServices)
# The agent the pages are scoped to, as the header's switcher set it (agent_switch.py).
AGENT_COOKIE = "clawgate_agent"
ENVIRONMENT = web.AppKey("jinja", jinja2.Environment)

# Every page the layout links to, in order. A page whose module is not installed yet shows
# a placeholder (server.py), so the navigation never leads nowhere.
NAV: tuple[tuple[str, str], ...] = (
    ("Chat", "/chat"),
    ("Approvals", "/approvals"),
    ("Memory", "/memory"),
    ("Files", "/files"),
    ("Sessions", "/sessions"),
    ("People", "/people"),
    ("Jobs", "/jobs"),
    ("Spend", "/spend"),
    ("Health", "/health"),
    ("Settings", "/settings"),
)


@functools.cache
def environment() -> jinja2.Environment:
    """One a process, shared by every dashboard app in it: each template is compiled once
    (~3 ms apiece) and recompiled only when its file changes (Jinja's auto_reload)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = format_time
    return env


def format_time(value: float | str | dt.datetime | None) -> str:
    """A timestamp (epoch seconds, ISO text or datetime) as `YYYY-MM-DD HH:MM` UTC."""
    if value is None or value == "":
        return ""
    if isinstance(value, int | float):
        moment = dt.datetime.fromtimestamp(value, dt.UTC)
    elif isinstance(value, str):
        try:
            moment = dt.datetime.fromisoformat(value)
        except ValueError:
            return value
    else:
        moment = value
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M")


def services(request: web.Request) -> DashboardServices:
    """The services of the agent this browser chose (the default agent's until it chooses)."""
    return request.app[SERVICES].for_agent(request.cookies.get(AGENT_COOKIE))


def csrf_token(request: web.Request) -> str:
    """The CSRF token of this request's session; "" when it is not logged in."""
    cookie = request.cookies.get(COOKIE_NAME, "")
    auth = services(request).auth
    return auth.csrf_token(cookie) if auth.valid_session(cookie) else ""


def render(
    request: web.Request, template: str, *, title: str, status: int = 200, **values: Any
) -> web.Response:
    """The page `template` inside the layout, as an HTML response."""
    token = csrf_token(request)
    scoped = services(request)
    page = request.app[ENVIRONMENT].get_template(template)
    html = page.render(
        title=title,
        nav=NAV,
        path=request.path,
        csrf=token,
        csrf_field=Markup('<input type="hidden" name="{}" value="{}">').format(CSRF_FIELD, token),
        logged_in=bool(token),
        agents=scoped.agent_names,
        agent=scoped.agent_name,
        waiting=scoped.pending_count() if token else 0,
        approvals_waiting=bool(token and scoped.pending_approvals and scoped.pending_approvals()),
        can_restart=scoped.restarts is not None,
        **values,
    )
    return web.Response(text=html, status=status, content_type="text/html", charset="utf-8")
