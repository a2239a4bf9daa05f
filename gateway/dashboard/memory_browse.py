"""Reading memory in the browser: HISTORY.md and the daily logs by date, memory search with
why each result ranked (and, switched on, what was said in past conversations, the words
of the question highlighted), and the audit of transcripts against HISTORY.md. Read-only; every
file is reached through the runtime's MemoryStore, SessionStore and MemorySearch."""

from __future__ import annotations

import asyncio
import re
from datetime import date

from aiohttp import web

from clawgate.agent.memory.audit import audit_sessions
from clawgate.agent.memory.entries import parse_entries
from clawgate.agent.memory.query import keyword_query
from clawgate.gateway.dashboard.render import render, services
from clawgate.gateway.dashboard.services import DashboardServices
from clawgate.kernel.bus import Trust
from clawgate.kernel.errors import PathOutsideRoot
from clawgate.kernel.storage import confine

DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
DAILY_NAME = re.compile(r"^(\d{4}-\d{2}-\d{2})\.md$")
HISTORY_PAGE = 100  # entries shown without a date picked


def routes(_services: DashboardServices) -> list[web.RouteDef]:
    return [
        web.get("/memory/history", history_page),
        web.get("/memory/daily", daily_index),
        web.get("/memory/daily/{day}", daily_page),
        web.get("/memory/search", search_page),
        web.get("/memory/audit", audit_page),
    ]


def _day(text: str) -> date:
    if not DAY.match(text):
        raise web.HTTPNotFound(text="no such day")
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise web.HTTPNotFound(text="no such day") from None


async def history_page(request: web.Request) -> web.StreamResponse:
    memory = services(request).memory
    entries = parse_entries(await asyncio.to_thread(memory.read_history))
    days = sorted({entry.stamp[:10] for entry in entries}, reverse=True)
    picked = request.query.get("date", "")
    if picked:
        _day(picked)
        shown = [entry for entry in entries if entry.stamp.startswith(picked)]
    else:
        shown = entries[-HISTORY_PAGE:]
    return render(
        request,
        "memory_history.html",
        title="History",
        entries=list(reversed(shown)),
        days=days,
        picked=picked,
        total=len(entries),
    )


async def daily_index(request: web.Request) -> web.StreamResponse:
    memory = services(request).memory

    def listing() -> list[str]:
        if not memory.dir.exists():
            return []
        found = (DAILY_NAME.match(path.name) for path in memory.dir.iterdir())
        return sorted((match.group(1) for match in found if match), reverse=True)

    return render(
        request, "memory_daily.html", title="Daily logs", days=await asyncio.to_thread(listing)
    )


async def daily_page(request: web.Request) -> web.StreamResponse:
    memory = services(request).memory
    day = _day(request.match_info["day"])
    try:
        confine(memory.dir, memory.daily_path(day).name)
    except PathOutsideRoot:
        raise web.HTTPNotFound(text="no such day") from None
    text = await asyncio.to_thread(memory.read_daily, day)
    if not text:
        raise web.HTTPNotFound(text=f"no daily log for {day.isoformat()}")
    return render(
        request, "memory_day.html", title=f"Daily log {day.isoformat()}", day=day, text=text
    )


async def search_page(request: web.Request) -> web.StreamResponse:
    search = services(request).search
    query = request.query.get("q", "").strip()
    with_sessions = request.query.get("sessions") == "1"
    hits = await search.search(query) if query else []
    said = []
    if query and with_sessions and search.transcripts is not None:
        # The dashboard is the owner's: every conversation, groups included.
        found = await search.transcripts.search(query, Trust.OWNER)
        said = [(hit, marked(hit.snippet, query)) for hit in found]
    w_v, w_t = search.weights
    return render(
        request,
        "memory_search.html",
        title="Search memory",
        query=query,
        hits=hits,
        with_sessions=with_sessions,
        said=said,
        weights={"keyword": w_t, "vector": w_v},
    )


def marked(text: str, query: str) -> list[tuple[str, bool]]:
    """`text` cut into (piece, is_a_word_of_the_query) for the template to highlight; the
    template escapes every piece."""
    plan = keyword_query(query)
    words = sorted({w for w in plan.terms if len(w) > 1 or not w.isascii()}, key=len, reverse=True)
    if not words:
        return [(text, False)]
    pattern = re.compile("|".join(re.escape(w) for w in words), re.IGNORECASE)
    parts: list[tuple[str, bool]] = []
    last = 0
    for match in pattern.finditer(text):
        if match.start() > last:
            parts.append((text[last : match.start()], False))
        parts.append((match.group(0), True))
        last = match.end()
    if last < len(text):
        parts.append((text[last:], False))
    return parts


async def audit_page(request: web.Request) -> web.StreamResponse:
    report = await asyncio.to_thread(audit_sessions, services(request).sessions.directory)
    return render(request, "memory_audit.html", title="Memory audit", report=report)
