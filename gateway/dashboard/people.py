"""The people page: pending pairing requests, approved people, seen groups, channel states.

Every decision goes through `gateway/setup/approvals.py`, the module `clawgate pairing` and
`clawgate groups` use: approvals are the same write to `<data_dir>/pairing.json` (the
running channels re-read it on the next message, so an approved person is answered at
once), groups the same config edit as `clawgate groups allow` (applied on restart).
Blocking file work (a flock, an atomic replace) runs in a thread.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from yarl import URL

from clawgate.channels.groups import SeenGroup
from clawgate.channels.pairing import CODE_TTL_SECONDS, Approval
from clawgate.gateway.dashboard.render import render, services
from clawgate.gateway.setup import approvals, welcome
from clawgate.kernel.config import Config, default_config_path, load_config
from clawgate.kernel.errors import ClawgateError

ROLES = {"owner": True, "allowed": False, "auto": None}


@dataclass(frozen=True)
class PendingRow:
    channel: str
    user_id: str
    username: str | None
    code: str
    expires_minutes: int
    # Approving without a role makes this person the owner: their channel has none yet.
    would_own: bool


@dataclass(frozen=True)
class GroupRow:
    group: SeenGroup
    allowed: bool  # by the running gateway
    on_file: bool  # by the config file: differs until the gateway restarts


def config_path(request: web.Request) -> Path:
    """The config file the gateway was started with (the CLI's default when not known)."""
    return services(request).config_path or default_config_path()


def channel_rows(request: web.Request) -> dict[str, dict[str, Any]]:
    """Each channel's supervision state (state, last_error, restarts, since)."""
    states = services(request).channel_states
    report = states.snapshot() if states is not None else {}
    return services(request).runtime.redact.data(report)


def _people(request: web.Request) -> dict[str, Any]:
    svc = services(request)
    config, store = svc.config, svc.pairing
    now = time.time()
    configured = approvals.channels_with_configured_owner(config)
    pending = [
        PendingRow(
            p.channel,
            p.user_id,
            p.username,
            p.code,
            max(0, int((p.created_at + CODE_TTL_SECONDS - now) // 60)),
            p.channel not in configured and not store.has_owner(p.channel),
        )
        for p in store.pending()
    ]
    approved: list[Approval] = sorted(store.approved(), key=lambda a: (a.channel, a.approved_at))
    try:
        saved = load_config(config_path(request))
    except ClawgateError:
        saved = config  # a broken file: `clawgate doctor` on the health page says why
    seen = approvals.seen(config)
    groups = [
        GroupRow(g, approvals.group_allowed(config, g), approvals.group_allowed(saved, g))
        for g in seen
    ]
    listed = {(g.channel, g.group_id) for g in seen}
    # Allowed in the config but never seen mentioning the bot: still worth showing.
    configured_groups = [
        (name, entry.strip())
        for name in approvals.CHANNELS
        for entry in getattr(saved.channels, name).group_allow
        if entry.strip() and (name, entry.strip()) not in listed
    ]
    return {
        "pending": pending,
        "approved": approved,
        "groups": groups,
        "configured_groups": configured_groups,
    }


async def people_page(request: web.Request) -> web.Response:
    values = await asyncio.to_thread(_people, request)
    return render(
        request,
        "people.html",
        title="People and channels",
        channels=channel_rows(request),
        notice=request.query.get("notice", ""),
        error=request.query.get("error", ""),
        **values,
    )


async def channels_json(request: web.Request) -> web.Response:
    """What the page's script polls to keep the channel table live."""
    return web.json_response({"channels": channel_rows(request)})


def _done(message: str = "", *, error: str = "") -> web.HTTPSeeOther:
    query = {"error": error} if error else {"notice": message}
    return web.HTTPSeeOther(location=str(URL("/people").with_query(query)))


Action = Callable[[dict[str, str]], str]


WELCOME_TIMEOUT = 5.0


async def _act(request: web.Request, action: Action) -> web.Response:
    """Run a decision on the posted form in a thread (file locks, atomic replaces); back to
    the page with its one line, or with the error a person can act on."""
    form = await request.post()
    try:
        message = await asyncio.to_thread(action, {k: str(v) for k, v in form.items()})
    except ClawgateError as exc:
        raise _done(error=str(exc)) from None
    except KeyError as exc:
        raise web.HTTPBadRequest(text=f"missing form field {exc}") from None
    raise _done(message)


async def approve(request: web.Request) -> web.Response:
    svc = services(request)

    def run(form: dict[str, str]) -> str:
        role = form.get("role", "auto")
        if role not in ROLES:
            raise web.HTTPBadRequest(text=f"unknown role {role!r}")
        approval = approvals.approve(svc.pairing, svc.config, form["code"], ROLES[role])
        done = f"approved {approval.who} as {approval.role}; they can chat now"
        # Same welcome as `clawgate pairing approve`; this worker thread has no loop of its
        # own, and the short timeout keeps a slow platform from holding the page.
        told = asyncio.run(welcome.tell_approved(svc.config, approval, WELCOME_TIMEOUT))
        if told == "sent":
            return f"{done} (welcome sent)"
        return f"{done} (welcome not sent: {told})" if told else done

    return await _act(request, run)


async def deny(request: web.Request) -> web.Response:
    svc = services(request)

    def run(form: dict[str, str]) -> str:
        dropped = svc.pairing.deny(form["code"])
        return f"denied {dropped.who} (code {dropped.code})"

    return await _act(request, run)


def _set_owner(request: web.Request, owner: bool) -> Action:
    svc = services(request)

    def run(form: dict[str, str]) -> str:
        changed = svc.pairing.set_owner(form["user_id"], form["channel"], owner)
        return "; ".join(f"{a.who} is now {a.role}" for a in changed)

    return run


async def promote(request: web.Request) -> web.Response:
    return await _act(request, _set_owner(request, True))


async def demote(request: web.Request) -> web.Response:
    return await _act(request, _set_owner(request, False))


async def revoke(request: web.Request) -> web.Response:
    svc = services(request)

    def run(form: dict[str, str]) -> str:
        removed = svc.pairing.revoke(form["user_id"], form["channel"])
        return "; ".join(f"revoked {a.who}" for a in removed)

    return await _act(request, run)


async def allow_group(request: web.Request) -> web.Response:
    return await _group_decision(
        request, approvals.allow_group, "{channel} group {id} is already allowed"
    )


async def deny_group(request: web.Request) -> web.Response:
    return await _group_decision(request, approvals.deny_group, "forgot {channel} group {id}")


async def _group_decision(
    request: web.Request,
    decide: Callable[[Path, Config, str, str | None], approvals.GroupEdit],
    unchanged: str,
) -> web.Response:
    svc = services(request)

    def run(form: dict[str, str]) -> str:
        edit = decide(config_path(request), svc.config, form["group_id"], form["channel"])
        if not edit.changed:
            return unchanged.format(channel=edit.channel, id=edit.group_id)
        return f"{' and '.join(edit.done)}; restart the gateway to apply it"

    return await _act(request, run)


def routes(_services: object) -> list[web.RouteDef]:
    return [
        web.get("/people", people_page),
        web.get("/people/channels.json", channels_json),
        web.post("/people/pairing/approve", approve),
        web.post("/people/pairing/deny", deny),
        web.post("/people/approved/promote", promote),
        web.post("/people/approved/demote", demote),
        web.post("/people/approved/revoke", revoke),
        web.post("/people/groups/allow", allow_group),
        web.post("/people/groups/deny", deny_group),
    ]
