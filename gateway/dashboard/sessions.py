"""Sessions in the browser: every live session by name (session_names.py), with its trust,
last activity and unread (read_marks.py) and active markers; a transcript (Markdown
rendered, speakers in groups, tool calls as collapsed cards holding their results, delivery
status, consolidated ranges shaded, the other records, the session's archived transcripts),
and the archive that /new moves transcripts into.

Files are found through the runtime's SessionStore (its key -> file mapping, its listing)
and read with the store's own loader, in a thread; a transcript is confined to its folder.
Nothing here writes a session; opening a transcript moves its read mark.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from clawgate.agent.session import (
    Consolidation,
    Delivery,
    Session,
    ToolCall,
    load_session,
    read_key,
)
from clawgate.gateway.dashboard.markdown import to_html
from clawgate.gateway.dashboard.read_marks import ReadMarks
from clawgate.gateway.dashboard.render import render, services
from clawgate.gateway.dashboard.services import DashboardServices
from clawgate.gateway.dashboard.session_names import Directory, speaker
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
    title: str  # who it is with, in words (session_names.py)
    channel: str
    trust: str  # what the chat's next message would get
    messages: int
    last_activity: str
    last_seq: int
    consolidated: int  # seq up to which memory covers the session
    size: int
    file: str = ""  # the archived file's name
    unread: bool = False
    active: bool = False  # a turn runs in it now


def _recorded(session: Session) -> str | None:
    """The trust the session's last turn was handled at."""
    recorded = session.trust_marks[-1][1] if session.trust_marks else session.state.trust
    return str(recorded) if recorded else None


def summarise(session: Session, size: int, names: Directory, file: str = "") -> Summary:
    messages = session.messages
    facts = session.state.chat
    return Summary(
        key=session.key,
        title=names.name(session.key, facts),
        channel=session.key.split(":", 1)[0],
        trust=names.trust(session.key, facts, _recorded(session)),
        messages=len(messages),
        last_activity=messages[-1].timestamp if messages else "",
        last_seq=messages[-1].seq if messages else 0,
        consolidated=session.last_consolidated,
        size=size,
        file=file,
    )


def _load(path: Path, key: str | None = None) -> Session:
    return load_session(path, key or read_key(path) or path.stem)


def _live(svc: DashboardServices) -> list[Summary]:
    names = Directory.read(svc.config)
    marks = ReadMarks(svc.config.data_dir).read()
    busy = set(svc.dispatcher.busy_sessions()) if svc.dispatcher is not None else set()
    found = []
    for key, path in svc.sessions.list_keys():
        summary = summarise(_load(path, key), path.stat().st_size, names)
        found.append(
            dataclasses.replace(
                summary,
                unread=summary.last_seq > marks.get(key, 0),
                active=key in busy,
            )
        )
    return sorted(found, key=lambda s: s.last_activity, reverse=True)


def _archived(svc: DashboardServices) -> list[Summary]:
    names = Directory.read(svc.config)
    found = []
    for path in svc.sessions.list_archived():
        found.append(summarise(_load(path), path.stat().st_size, names, file=path.name))
    return sorted(found, key=lambda s: s.file, reverse=True)


async def sessions_page(request: web.Request) -> web.StreamResponse:
    summaries = await asyncio.to_thread(_live, services(request))
    return render(request, "sessions.html", title="Sessions", sessions=summaries)


async def archive_page(request: web.Request) -> web.StreamResponse:
    summaries = await asyncio.to_thread(_archived, services(request))
    return render(request, "sessions_archive.html", title="Archive", sessions=summaries)


@dataclass
class Card:
    """A tool call and, once stored, its result: one collapsed card."""

    id: str
    name: str
    arguments: str
    result: str | None = None


@dataclass
class Entry:
    """One message of a transcript as the page shows it: a tool result is not an entry of
    its own but the `result` of its call's card."""

    seq: int
    role: str
    content: str
    timestamp: str
    consolidated: bool
    speaker: str = ""  # who spoke, in a group
    html: str = ""  # an assistant message's Markdown, rendered (markdown.py)
    cards: list[Card] = field(default_factory=list)
    delivery: str = ""  # "sent", "failed" or "" (not a delivered reply, or not recorded)
    error: str = ""


def transcript(session: Session) -> tuple[list[Entry], list[dict[str, Any]]]:
    """The messages, marked, and every other record as plain data (oldest first)."""
    deliveries = {record.seq: record for record in session.records_of(Delivery)}
    ranges = [(r.from_seq, r.to_seq) for r in session.records_of(Consolidation)]
    facts = session.state.chat
    group = (facts is not None and not facts.private) or _recorded(session) == "group"
    entries: list[Entry] = []
    cards: dict[str, Card] = {}
    for message in session.messages:
        seq = message.seq
        if message.role == "tool" and (card := cards.get(message.tool_call_id or "")):
            card.result = message.content
            continue
        delivered = deliveries.get(seq)
        covered = seq <= session.last_consolidated or any(a <= seq <= b for a, b in ranges)
        entry = Entry(
            seq=seq,
            role=message.role,
            content=message.content,
            timestamp=message.timestamp,
            consolidated=covered,
            delivery=delivered.status if delivered else "",
            error=(delivered.error or "") if delivered else "",
        )
        if message.role == "user" and group:
            entry.speaker, entry.content = speaker(message.content)
        elif message.role == "assistant":
            entry.html = to_html(message.content) if message.content else ""
            for call in message.tool_calls:
                cards[call.id] = card = _call(call)
                entry.cards.append(card)
        elif message.role == "tool":  # a result whose call is not in view
            entry.cards.append(Card("", message.name or "tool", "", message.content))
            entry.content = ""
        entries.append(entry)
    others = [
        record.model_dump(exclude_none=True)
        for record in session.records
        if not isinstance(record, Delivery)
    ]
    return entries, others


def _call(call: ToolCall) -> Card:
    arguments = call.function.arguments
    try:
        arguments = json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except ValueError:
        pass
    return Card(call.id, call.function.name, arguments)


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
    svc = services(request)
    store = svc.sessions

    def load() -> tuple[Session, Summary, list[str]]:
        path = _confined(folder, name)
        session = _load(path, key)
        names = Directory.read(svc.config)
        summary = summarise(session, path.stat().st_size, names, path.name if archived else "")
        if not archived:
            ReadMarks(svc.config.data_dir, svc.runtime.writer).mark(session.key, summary.last_seq)
        # The transcripts /new set aside for this session, newest first.
        stem = store.path_for(session.key).stem
        earlier = [p.name for p in store.list_archived() if p.name.startswith(f"{stem}.")]
        return session, summary, sorted(earlier, reverse=True)

    session, summary, earlier = await asyncio.to_thread(load)
    entries, records = transcript(session)
    return render(
        request,
        "transcript.html",
        title=summary.title,
        summary=summary,
        entries=entries,
        records=records,
        archived=archived,
        earlier=earlier,
    )
