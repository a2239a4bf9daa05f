"""The chat page: the owner's conversations with the assistant, through the web channel.

    GET  /chat, /chat/{name}       the conversation `web:<name>` ("owner" by default): its
                                   transcript (tool calls as cards; exec approval cards
                                   still waiting in it at the end), the slash commands
    GET  /chat?c=NAME              opens (or starts) the conversation NAME
    POST /chat/{name}/send         `{"text": ...}` (JSON, answered 202 with the message id) or
                                   a form post (answered with a redirect back to the page)
    GET  /chat/{name}/events       Server-Sent Events: what the owner and other tabs sent,
                                   the reply's text as it streams, tool calls and results,
                                   the end of the turn, the reply itself; the stream ends
                                   when its session does (logout, rotation, idle)
    GET  /chat/{name}/transcript   the transcript as JSON (a page that lost its stream
                                   reloads it)

The Stop button sends `/stop` like any other text: the dispatcher cancels the running turn,
as it does for Telegram. Everything a page shows of the session comes from
`runtime.sessions`, the store the loop writes; nothing here writes a session file.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from aiohttp import web

from clawgate.agent.commands import HELP
from clawgate.agent.progress import MAX_SHOWN_CHARS
from clawgate.agent.session import StoredMessage
from clawgate.gateway.dashboard.approvals import buttons
from clawgate.gateway.dashboard.auth import COOKIE_NAME
from clawgate.gateway.dashboard.markdown import to_html
from clawgate.gateway.dashboard.render import render, services
from clawgate.gateway.dashboard.services import DashboardServices
from clawgate.gateway.dashboard.web_channel import (
    DEFAULT_CONVERSATION,
    MAX_TEXT_CHARS,
    WebChannel,
    valid_name,
)
from clawgate.kernel.errors import ChannelError

# Seconds between keep-alive comments on an idle event stream (proxies drop silent ones).
KEEPALIVE_SECONDS = 15.0
# The newest messages a page shows; older ones are in the Sessions page.
SHOWN_MESSAGES = 400


def routes(_services: DashboardServices) -> list[web.RouteDef]:
    return [
        web.get("/chat", chat_page),
        web.get("/chat/{name}", chat_page),
        web.post("/chat/{name}/send", send),
        web.get("/chat/{name}/events", events),
        web.get("/chat/{name}/transcript", transcript_json),
    ]


def commands() -> list[tuple[str, str]]:
    """(usage, what it does) for each slash command, from the agent's own help text."""
    found = []
    for line in HELP.splitlines():
        usage, sep, description = line.partition(" - ")
        if sep and usage.startswith("/"):
            found.append((usage.strip(), description.strip()))
    return found


def _channel(request: web.Request) -> WebChannel | None:
    manager = services(request).manager
    channel = manager.channels.get(WebChannel.name) if manager is not None else None
    return channel if isinstance(channel, WebChannel) else None


def _conversation(request: web.Request) -> str:
    name = request.match_info.get("name", DEFAULT_CONVERSATION)
    if not valid_name(name):
        raise web.HTTPNotFound(text="a conversation name is 1-64 letters, digits, - or _")
    return name


def _cut(text: str) -> str:
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 1] + "…"


def transcript(messages: list[StoredMessage]) -> list[dict[str, Any]]:
    """A session's messages as the page shows them: user text, assistant text with its
    Markdown rendered (markdown.py), and one card per tool call holding its arguments and,
    once stored, its result (both already redacted when they were written)."""
    items: list[dict[str, Any]] = []
    cards: dict[str, dict[str, Any]] = {}
    for message in messages:
        if message.role == "user":
            items.append({"kind": "user", "text": message.content})
        elif message.role == "assistant":
            if message.content:
                text = message.content
                items.append({"kind": "assistant", "text": text, "html": to_html(text)})
            for call in message.tool_calls:
                card = {
                    "kind": "tool",
                    "id": call.id,
                    "name": call.function.name,
                    "arguments": _cut(call.function.arguments),
                    "result": None,
                }
                cards[call.id] = card
                items.append(card)
        elif message.role == "tool" and (answered := cards.get(message.tool_call_id or "")):
            answered["result"] = _cut(message.content)
    return items


async def _transcript(request: web.Request, name: str) -> list[dict[str, Any]]:
    key = f"{WebChannel.name}:{name}"
    session = await services(request).sessions.get(key)
    return transcript(session.messages[-SHOWN_MESSAGES:]) + _waiting_cards(request, key)


def _waiting_cards(request: web.Request, key: str) -> list[dict[str, Any]]:
    """The exec approval cards this conversation's turn waits on: the live event that drew
    them is gone once the page is reloaded, the question is not."""
    approvals = services(request).runtime.approvals
    return [
        {
            "kind": "approval",
            "text": text,
            "choices": [{"id": choice, "label": label} for choice, label in buttons(card)],
        }
        for card, text in approvals.pending_in(key)
    ]


async def _conversations(request: web.Request) -> list[str]:
    keys = await asyncio.to_thread(services(request).sessions.list_keys)
    prefix = f"{WebChannel.name}:"
    names = {key[len(prefix) :] for key, _ in keys if key.startswith(prefix)}
    return sorted(name for name in names | {DEFAULT_CONVERSATION} if valid_name(name))


async def chat_page(request: web.Request) -> web.StreamResponse:
    if "c" in request.query:
        wanted = request.query["c"].strip()
        if valid_name(wanted):
            raise web.HTTPSeeOther(f"/chat/{wanted}")
    name = _conversation(request)
    conversations = await _conversations(request)
    if name not in conversations:
        conversations.append(name)
    return render(
        request,
        "chat.html",
        title="Chat",
        conversation=name,
        conversations=conversations,
        items=await _transcript(request, name),
        commands=commands(),
        running=_channel(request) is not None,
        max_chars=MAX_TEXT_CHARS,
    )


async def transcript_json(request: web.Request) -> web.StreamResponse:
    return web.json_response({"items": await _transcript(request, _conversation(request))})


async def send(request: web.Request) -> web.StreamResponse:
    name = _conversation(request)
    is_form = request.content_type != "application/json"
    if is_form:
        given: Any = (await request.post()).get("text", "")
    else:
        try:
            body = await request.json()
        except ValueError:
            raise web.HTTPBadRequest(text="the body is not JSON") from None
        given = body.get("text") if isinstance(body, dict) else None
    if not isinstance(given, str):
        raise web.HTTPBadRequest(text='send {"text": "..."}')
    text = given
    if not text.strip():
        raise web.HTTPBadRequest(text="nothing to send")
    if len(text) > MAX_TEXT_CHARS:
        raise web.HTTPRequestEntityTooLarge(MAX_TEXT_CHARS, len(text))
    channel = _channel(request)
    if channel is None:
        raise web.HTTPServiceUnavailable(text="the web chat is not running in this gateway")
    try:
        message_id = await channel.say(name, text, services(request).agent_name)
    except ChannelError as exc:
        raise web.HTTPServiceUnavailable(text=str(exc)) from None
    if is_form:
        raise web.HTTPSeeOther(f"/chat/{name}")
    return web.json_response({"id": message_id}, status=202)


async def events(request: web.Request) -> web.StreamResponse:
    name = _conversation(request)
    channel = _channel(request)
    if channel is None:
        raise web.HTTPServiceUnavailable(text="the web chat is not running in this gateway")
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "X-Accel-Buffering": "no"}
    )
    await response.prepare(request)
    cookie = request.cookies.get(COOKIE_NAME)
    auth = services(request).auth
    async with channel.events(name, services(request).agent_name) as queue:
        ended = auth.on_session_end(cookie, lambda: channel.end_stream(queue))
        with ended, contextlib.suppress(ConnectionError):
            # The browser reconnects after 2 s if the stream drops.
            await response.write(b"retry: 2000\n\n")
            while True:
                try:
                    event = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
                except TimeoutError:
                    await response.write(b": keep-alive\n\n")
                    continue
                if event is None:
                    break
                await response.write(f"data: {json.dumps(event)}\n\n".encode())
    return response
