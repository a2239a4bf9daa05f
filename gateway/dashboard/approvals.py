"""The pending exec approvals: the cards waiting for the owner, answerable from here.

    GET  /approvals          the cards waiting now (command, folder, chat, when asked), each
                             with Allow once / Allow for this session / Deny, and the last
                             decisions recorded in the sessions
    POST /approvals/answer   `choice` (a form field, or JSON {"choice": ...}): press a button

The dashboard is the owner's (its token), so a press here is an owner's press; it goes through
the same `ExecApprovals.answer` as a Telegram or Discord tap. `pending_approvals` is what a
header badge counts.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from clawgate.agent.session import SessionStore
from clawgate.agent.session.records import ExecApproval
from clawgate.agent.tools.approval import CHOICE_PREFIX, LABELS, PendingCard
from clawgate.gateway.dashboard.render import render, services
from clawgate.gateway.dashboard.services import DashboardServices

# Decisions shown, newest first, from the most recently changed sessions.
SHOWN_DECISIONS = 50
SCANNED_SESSIONS = 20


def routes(_services: DashboardServices) -> list[web.RouteDef]:
    return [web.get("/approvals", approvals_page), web.post("/approvals/answer", answer)]


def pending_approvals(dashboard: DashboardServices) -> list[PendingCard]:
    """The cards waiting for the owner now, oldest first."""
    return dashboard.runtime.approvals.pending()


def buttons(card: PendingCard) -> list[tuple[str, str]]:
    """(choice id, label) for each answer to a card, as the card was sent with."""
    return [(f"{CHOICE_PREFIX}{card.id}:{key}", label) for key, label in LABELS.items()]


def _recent_keys(store: SessionStore) -> list[str]:
    keys = store.list_keys()
    keys.sort(key=lambda item: item[1].stat().st_mtime if item[1].exists() else 0, reverse=True)
    return [key for key, _ in keys[:SCANNED_SESSIONS]]


async def _decisions(dashboard: DashboardServices) -> list[dict[str, Any]]:
    store = dashboard.sessions
    found: list[dict[str, Any]] = []
    for key in await asyncio.to_thread(_recent_keys, store):
        session = await store.get(key)
        found += [{"session": key, **r.to_dict()} for r in session.records_of(ExecApproval)]
    found.sort(key=lambda d: d.get("timestamp") or "", reverse=True)
    return found[:SHOWN_DECISIONS]


async def approvals_page(request: web.Request) -> web.StreamResponse:
    dashboard = services(request)
    cards = [(card, buttons(card)) for card in pending_approvals(dashboard)]
    return render(
        request,
        "approvals.html",
        title="Approvals",
        cards=cards,
        decisions=await _decisions(dashboard),
    )


async def answer(request: web.Request) -> web.StreamResponse:
    is_form = request.content_type != "application/json"
    if is_form:
        choice: Any = (await request.post()).get("choice", "")
    else:
        try:
            body = await request.json()
        except ValueError:
            raise web.HTTPBadRequest(text="the body is not JSON") from None
        choice = body.get("choice") if isinstance(body, dict) else None
    if not isinstance(choice, str) or not choice.startswith(CHOICE_PREFIX):
        raise web.HTTPBadRequest(text='send {"choice": "exec:..."}')
    said = services(request).runtime.approvals.answer(choice, "dashboard", by_owner=True)
    if is_form:
        raise web.HTTPSeeOther("/approvals")
    return web.json_response({"result": said})
