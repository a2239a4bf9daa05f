"""Sessions in the browser: every live session (channel, trust, messages, last activity), a
transcript (messages, tool calls, delivery status, consolidated ranges shaded, the other
records), and the archive that /new moves transcripts into.

Files are found through the runtime's SessionStore (its key -> file mapping, its listing)
and read with the store's own loader, in a thread; a transcript is confined to its folder.
Read-only: nothing here writes a session.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from clawgate.agent.session import (
    Consolidation,
    Delivery,
    Session,
    SessionStore,
    ToolCall,
    load_session,
    read_key,
)
from clawgate.gateway.dashboard.render import render, services
from clawgate.gateway.dashboard.services import DashboardServices
from clawgate.kernel.errors import PathOutsideRoot
from clawgate.kernel.storage import confine


def routes(_services: DashboardServices) -> list[web.RouteDef]:
    return [
        web.get("/sessions", sessions_page),
        web.get("/sessions/view", transcript_page),
        web.get("/sessions/archive", archive_page),
        web.get("/sessions/archive/{name}", archived_transcript_page),
    ]


@dataclass(frozen=True)
class Summary:
    key: str
    channel: str
    trust: str
    messages: int
    last_activity: str
    consolidated: int  # seq up to which memory covers the session
    size: int
    name: str = ""  # the archived file's name


def summarise(session: Session, size: int, name: str = "") -> Summary:
    trust = session.trust_marks[-1][1] if session.trust_marks else session.state.trust
    messages = session.messages
    return Summary(
        key=session.key,
        channel=session.key.split(":", 1)[0],
        trust=str(trust or "?"),
        messages=len(messages),
        last_activity=messages[-1].timestamp if messages else "",
        consolidated=session.last_consolidated,
        size=size,
        name=name,
    )


def _load(path: Path, key: str | None = None) -> Session:
    return load_session(path, key or read_key(path) or path.stem)


def _live(store: SessionStore) -> list[Summary]:
    found = [summarise(_load(path, key), path.stat().st_size) for key, path in store.list_keys()]
    return sorted(found, key=lambda s: s.last_activity, reverse=True)


def _archived(store: SessionStore) -> list[Summary]:
    found = []
    for path in store.list_archived():
        found.append(summarise(_load(path), path.stat().st_size, name=path.name))
    return sorted(found, key=lambda s: s.name, reverse=True)


async def sessions_page(request: web.Request) -> web.StreamResponse:
    summaries = await asyncio.to_thread(_live, services(request).sessions)
    return render(request, "sessions.html", title="Sessions", sessions=summaries)


async def archive_page(request: web.Request) -> web.StreamResponse:
    summaries = await asyncio.to_thread(_archived, services(request).sessions)
    return render(request, "sessions_archive.html", title="Archive", sessions=summaries)


@dataclass
class Entry:
    """One message of a transcript as the page shows it."""

    seq: int
    role: str
    content: str
    timestamp: str
    consolidated: bool
    tool_calls: list[dict[str, str]] = field(default_factory=list)
    tool_name: str = ""
    delivery: str = ""  # "sent", "failed" or "" (not a delivered reply, or not recorded)
    error: str = ""


def transcript(session: Session) -> tuple[list[Entry], list[dict[str, Any]]]:
    """The messages, marked, and every other record as plain data (oldest first)."""
    deliveries = {record.seq: record for record in session.records_of(Delivery)}
    ranges = [(r.from_seq, r.to_seq) for r in session.records_of(Consolidation)]
    entries = []
    for message in session.messages:
        seq = message.seq
        delivered = deliveries.get(seq)
        covered = seq <= session.last_consolidated or any(a <= seq <= b for a, b in ranges)
        entries.append(
            Entry(
                seq=seq,
                role=message.role,
                content=message.content,
                timestamp=message.timestamp,
                consolidated=covered,
                tool_calls=[_call(call) for call in message.tool_calls],
                tool_name=message.name or "",
                delivery=delivered.status if delivered else "",
                error=(delivered.error or "") if delivered else "",
            )
        )
    others = [
        record.model_dump(exclude_none=True)
        for record in session.records
        if not isinstance(record, Delivery)
    ]
    return entries, others


def _call(call: ToolCall) -> dict[str, str]:
    arguments = call.function.arguments
    try:
        arguments = json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except ValueError:
        pass
    return {"id": call.id, "name": call.function.name, "arguments": arguments}


def _confined(folder: Path, name: str) -> Path:
    try:
        path = confine(folder, name)
    except PathOutsideRoot:
        raise web.HTTPNotFound(text="no such session") from None
    if path.parent != folder.resolve() or path.suffix != ".jsonl" or not path.is_file():
        raise web.HTTPNotFound(text="no such session")
    return path


async def transcript_page(request: web.Request) -> web.StreamResponse:
    store = services(request).sessions
    key = request.query.get("key", "")
    if not key:
        raise web.HTTPNotFound(text="no such session")
    return await _show(request, store.directory, store.path_for(key).name, key)


async def archived_transcript_page(request: web.Request) -> web.StreamResponse:
    store = services(request).sessions
    return await _show(request, store.archive_dir, request.match_info["name"], None)


async def _show(
    request: web.Request, folder: Path, name: str, key: str | None
) -> web.StreamResponse:
    archived = key is None

    def load() -> tuple[Session, Summary]:
        path = _confined(folder, name)
        session = _load(path, key)
        return session, summarise(session, path.stat().st_size, path.name if archived else "")

    session, summary = await asyncio.to_thread(load)
    entries, records = transcript(session)
    return render(
        request,
        "transcript.html",
        title=session.key,
        summary=summary,
        entries=entries,
        records=records,
        archived=archived,
    )
