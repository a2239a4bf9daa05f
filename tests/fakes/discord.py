"""A fake Discord (REST v10 + gateway) on 127.0.0.1 that discord.py talks to for real.

    async with FakeDiscord() as fake:
        guild = fake.add_guild("Home")
        general = fake.add_text_channel(guild, "general")
        ...
        await fake.user_says(general, "hi", author_id=ANN, username="ann", mentions_bot=True)
        reply = await fake.next_message(general)

It keeps the rules discord.py and the real API rely on: JSON bodies with a Content-Type of
exactly `application/json`, the 2000-character content limit and the empty-message error,
429 bodies and headers shaped like Discord's, `enforce_nonce` de-duplication, history pages
after/before an id, and a gateway that identifies, resumes (replaying what the client
missed) and answers heartbeats. It runs in the test's event loop.

Sharding as Discord does it: IDENTIFY may name a `shard` [id, count] (none: [0, 1]); each
session then hears only its shard's guilds (`shard_of`: `(guild_id >> 22) % count`) in
READY and GUILD_CREATE and of every guild event, and the DMs when its id is 0. A new
IDENTIFY of a shard replaces that shard's session. `GET /gateway/bot` recommends
`recommended_shards`.
"""

from __future__ import annotations

import asyncio
import json
import math
import mimetypes
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from tests.fakes.server import LoopbackServer

DISCORD_EPOCH_MS = 1_420_070_400_000
MAX_CONTENT = 2000
NONCE_WINDOW_SECONDS = 300.0
HEARTBEAT_INTERVAL_MS = 41_250


@dataclass(frozen=True)
class SentMessage:
    """A message the bot created (once per nonce, as Discord de-duplicates)."""

    id: str
    channel_id: str
    content: str
    files: tuple[tuple[str, bytes], ...] = ()
    reference: str | None = None  # the message id it replies to
    nonce: str | None = None
    components: tuple[dict[str, Any], ...] = ()  # action rows (buttons), as sent


@dataclass
class _Failure:
    status: int | None  # None: the request takes effect but its response never comes
    body: dict[str, Any] | None
    retry_after: float | None


def shard_of(guild_id: str | int, count: int) -> int:
    """The shard that hears a guild's events (Discord's rule)."""
    return (int(guild_id) >> 22) % count


@dataclass
class _Session:
    id: str
    shard: tuple[int, int] = (0, 1)
    seq: int = 0
    frames: list[dict[str, Any]] = field(default_factory=list)
    ws: web.WebSocketResponse | None = None


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    # Bytes plus an explicit header: aiohttp's json_response would add "; charset=utf-8",
    # and discord.py only parses a body whose Content-Type is exactly application/json.
    return web.Response(
        body=json.dumps(data).encode(),
        status=status,
        headers={"Content-Type": "application/json", **(headers or {})},
    )


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


class FakeDiscord(LoopbackServer):
    def __init__(
        self,
        *,
        token: str = "fake-discord-token",
        bot_name: str = "Claw",
        clock_offset: float = 0,
        recommended_shards: int = 1,
    ) -> None:
        self.token = token
        self.recommended_shards = recommended_shards
        # Seconds added to the fake's clock: what is created meanwhile is dated then (a
        # snowflake carries its time), e.g. history older than the catch-up's age bound. Ids
        # only grow, as Discord's do: a world dated in the past starts with a negative offset
        # and moves it towards 0.
        self.clock_offset = clock_offset
        self._last_id = 0
        self.bot = self._user(str(self.new_id()), bot_name.lower(), bot_name)
        self.bot["bot"] = True
        self.app_id = str(self.new_id())
        self.guilds: dict[str, dict[str, Any]] = {}
        self.channels: dict[str, dict[str, Any]] = {}
        self.history: dict[str, list[dict[str, Any]]] = {}
        self.sent: list[SentMessage] = []
        # The bot's own reactions by (channel_id, message_id); channels that refuse them.
        self.reactions: dict[tuple[str, str], set[str]] = {}
        self.reactions_refused: set[str] = set()
        # When each message the bot sent was posted (time.monotonic), by id.
        self.posted_at: dict[str, float] = {}
        # Every edit that took, in order: channel_id, id, content.
        self.edits: list[dict[str, Any]] = []
        self.typing: Counter[str] = Counter()
        self.requests: list[str] = []  # "METHOD /path" of every REST call
        # Interaction callbacks the bot made: (interaction id, callback type).
        self.interaction_callbacks: list[tuple[str, int]] = []
        self.identifies = 0
        # The shard [id, count] of every IDENTIFY, in order.
        self.identified: list[tuple[int, int]] = []
        self.resumes = 0
        self._dm_by_user: dict[str, str] = {}
        self._files: dict[str, bytes] = {}
        self._failures: dict[str, deque[_Failure]] = {}
        self._outbox: dict[str, asyncio.Queue[SentMessage]] = {}
        self._nonces: dict[tuple[str, str], tuple[float, dict[str, Any]]] = {}
        self._sessions: dict[str, _Session] = {}
        self._changed = asyncio.Condition()
        super().__init__()

    # -- lifecycle -------------------------------------------------------------------------

    client_max_size = 64 * 1024 * 1024

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        return f"{self.base}/api/v10"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    def add_routes(self, app: web.Application) -> None:
        api = "/api/v10"
        app.router.add_get(f"{api}/users/@me", self._me)
        app.router.add_get(f"{api}/oauth2/applications/@me", self._application)
        app.router.add_get(f"{api}/gateway", self._gateway_info)
        app.router.add_get(f"{api}/gateway/bot", self._gateway_info)
        app.router.add_post(f"{api}/users/@me/channels", self._create_dm)
        app.router.add_get(f"{api}/channels/{{channel_id}}", self._get_channel)
        app.router.add_get(f"{api}/channels/{{channel_id}}/messages", self._get_messages)
        app.router.add_post(f"{api}/channels/{{channel_id}}/messages", self._post_message)
        reaction = f"{api}/channels/{{channel_id}}/messages/{{message_id}}/reactions/{{emoji}}/@me"
        app.router.add_put(reaction, self._react)
        app.router.add_delete(reaction, self._react)
        app.router.add_patch(
            f"{api}/channels/{{channel_id}}/messages/{{message_id}}", self._patch_message
        )
        app.router.add_post(f"{api}/channels/{{channel_id}}/typing", self._typing)
        app.router.add_get("/attachments/{file_id}/{filename}", self._attachment)
        app.router.add_get("/gateway", self._gateway)
        app.router.add_post(
            f"{api}/interactions/{{interaction_id}}/{{token}}/callback", self._interaction_callback
        )

    async def before_stop(self) -> None:
        for session in list(self._sessions.values()):
            if session.ws is not None:
                await session.ws.close(code=1001)

    # -- the world the test sets up --------------------------------------------------------

    def new_id(self) -> int:
        """A snowflake: increasing, and dated now, as discord.py derives created_at from it."""
        now_ms = int((time.time() + self.clock_offset) * 1000) - DISCORD_EPOCH_MS
        self._last_id = max(self._last_id + 1, now_ms << 22)
        return self._last_id

    def add_guild(self, name: str = "Test guild", *, shard: tuple[int, int] | None = None) -> str:
        """A guild; with `shard` ([id, count]), one whose id falls on that shard."""
        guild_id = str(self.new_id())
        if shard is not None and shard_of(guild_id, shard[1]) != shard[0]:
            shard_id, count = shard
            # The shard is read from the id's time part: move it on by whole milliseconds.
            ms = (int(guild_id) >> 22) + (shard_id - shard_of(guild_id, count)) % count
            self._last_id = ms << 22
            guild_id = str(self._last_id)
        self.guilds[guild_id] = {"id": guild_id, "name": name, "channels": [], "threads": []}
        return guild_id

    def add_text_channel(self, guild_id: str, name: str = "general") -> str:
        channel_id = str(self.new_id())
        guild = self.guilds[guild_id]
        payload = {
            "id": channel_id,
            "type": 0,
            "guild_id": guild_id,
            "name": name,
            "position": len(guild["channels"]),
            "permission_overwrites": [],
            "nsfw": False,
            "parent_id": None,
            "last_message_id": None,
        }
        guild["channels"].append(payload)
        self.channels[channel_id] = payload
        return channel_id

    def add_thread(self, parent_id: str, name: str = "thread") -> str:
        parent = self.channels[parent_id]
        thread_id = str(self.new_id())
        payload = {
            "id": thread_id,
            "type": 11,
            "guild_id": parent["guild_id"],
            "parent_id": parent_id,
            "owner_id": self.bot["id"],
            "name": name,
            "message_count": 0,
            "member_count": 1,
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": 1440,
                "archive_timestamp": _iso(int(time.time() * 1000)),
                "locked": False,
            },
            "last_message_id": None,
        }
        self.guilds[parent["guild_id"]]["threads"].append(payload)
        self.channels[thread_id] = payload
        return thread_id

    def dm_channel(self, user_id: str, username: str = "someone") -> str:
        """The DM channel between the bot and this user (created on first use)."""
        user_id = str(user_id)
        if user_id not in self._dm_by_user:
            channel_id = str(self.new_id())
            self.channels[channel_id] = {
                "id": channel_id,
                "type": 1,
                "recipients": [self._user(user_id, username)],
                "last_message_id": None,
            }
            self._dm_by_user[user_id] = channel_id
        return self._dm_by_user[user_id]

    async def user_says(
        self,
        channel_id: str,
        content: str,
        *,
        author_id: str,
        username: str,
        display_name: str | None = None,
        guild_id: str | None = None,
        mentions_bot: bool = False,
        attachments: dict[str, bytes] | None = None,
        reply_to: str | None = None,
    ) -> dict[str, Any]:
        """A person posts: stored in the channel's history and dispatched as MESSAGE_CREATE
        (buffered for a resume while the client is disconnected)."""
        channel_id = str(channel_id)
        channel = self.channels.get(channel_id)
        if channel is None:
            raise KeyError(f"unknown channel {channel_id}; use add_text_channel or dm_channel")
        guild_id = guild_id or channel.get("guild_id")
        author = self._user(str(author_id), username, display_name)
        mentions: list[dict[str, Any]] = []
        if mentions_bot:
            content = f"<@{self.bot['id']}> {content}"
            mentions.append(dict(self.bot))
        message = self._message(channel_id, author, content, guild_id=guild_id)
        message["mentions"] = mentions
        if guild_id:
            message["member"] = self._member()
            for mention in mentions:
                mention["member"] = self._member()
        for filename, data in (attachments or {}).items():
            file_id = str(self.new_id())
            self._files[file_id] = data
            url = f"{self.base}/attachments/{file_id}/{filename}"
            message["attachments"].append(
                {
                    "id": file_id,
                    "filename": filename,
                    "size": len(data),
                    "url": url,
                    "proxy_url": url,
                    "content_type": mimetypes.guess_type(filename)[0] or "application/octet-stream",
                }
            )
        if reply_to is not None:
            original = self._find(channel_id, str(reply_to))
            message["type"] = 19
            message["message_reference"] = {
                "type": 0,
                "message_id": str(reply_to),
                "channel_id": channel_id,
                **({"guild_id": guild_id} if guild_id else {}),
            }
            message["referenced_message"] = original
        self._store(channel_id, message)
        await self._dispatch("MESSAGE_CREATE", message, guild_id=guild_id)
        return message

    async def press(self, sent: SentMessage, label: str, *, user_id: str, username: str) -> str:
        """A person presses the button `label` under a message the bot sent: dispatched as
        INTERACTION_CREATE (a message component); returns the interaction's id."""
        buttons = [b for row in sent.components for b in row.get("components", ())]
        (button,) = [b for b in buttons if b.get("label") == label]
        channel = self.channels[sent.channel_id]
        guild_id = channel.get("guild_id")
        user = self._user(str(user_id), username)
        interaction: dict[str, Any] = {
            "id": str(self.new_id()),
            "application_id": self.app_id,
            "type": 3,
            "token": f"token-{self.new_id()}",
            "version": 1,
            "channel_id": sent.channel_id,
            "channel": {"id": sent.channel_id, "type": channel.get("type", 0)},
            "message": self._find(sent.channel_id, sent.id),
            "data": {"custom_id": button["custom_id"], "component_type": 2},
            "locale": "en-US",
            "app_permissions": "0",
            "entitlements": [],
            "authorizing_integration_owners": {},
            "attachment_size_limit": 8388608,
        }
        if guild_id:
            interaction["guild_id"] = guild_id
            interaction["member"] = {**self._member(), "user": user, "permissions": "0"}
        else:
            interaction["user"] = user
        await self._dispatch("INTERACTION_CREATE", interaction, guild_id=guild_id)
        return str(interaction["id"])

    def fail_next(
        self,
        route: str,
        status: int,
        body: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        """The next request to `route` ("POST /channels/<id>/messages") fails with `status`."""
        self._failures.setdefault(route, deque()).append(_Failure(status, body, retry_after))

    def lose_response_next(self, route: str) -> None:
        """The next request to `route` takes effect, but its response never arrives."""
        self._failures.setdefault(route, deque()).append(_Failure(None, None, None))

    async def disconnect(self, code: int = 4000) -> None:
        """Close every gateway socket; 4000 (unknown error) lets the client resume."""
        for session in list(self._sessions.values()):
            if session.ws is not None:
                ws, session.ws = session.ws, None
                await ws.close(code=code)

    def connected_shards(self) -> set[tuple[int, int]]:
        """The shards ([id, count]) whose session has a socket open now."""
        return {s.shard for s in self._sessions.values() if s.ws is not None and not s.ws.closed}

    # -- what the test reads ---------------------------------------------------------------

    def delete_message(self, channel_id: str, message_id: str) -> None:
        """The user deletes a message the bot sent."""
        history = self.history[str(channel_id)]
        history[:] = [m for m in history if m["id"] != str(message_id)]

    def content_of(self, channel_id: str, message_id: str) -> str:
        """What a message shows now (its last edit)."""
        message = self._find(str(channel_id), str(message_id))
        assert message is not None, f"no message {message_id} in {channel_id}"
        return str(message["content"])

    def sent_to(self, channel_id: str) -> list[SentMessage]:
        return [m for m in self.sent if m.channel_id == str(channel_id)]

    async def next_message(self, channel_id: str, timeout: float = 10) -> SentMessage:
        """The next message the bot sends to this channel."""
        async with asyncio.timeout(timeout):  # not wait_for: see FakeTelegram.next_message
            return await self._queue(str(channel_id)).get()

    def count(self, route: str) -> int:
        return self.requests.count(route)

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 10) -> None:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(predicate)

    # -- payloads --------------------------------------------------------------------------

    def _user(self, user_id: str, username: str, display: str | None = None) -> dict[str, Any]:
        return {
            "id": user_id,
            "username": username,
            "discriminator": "0",
            "global_name": display,
            "avatar": None,
        }

    def _member(self) -> dict[str, Any]:
        return {
            "roles": [],
            "joined_at": _iso(int(time.time() * 1000)),
            "nick": None,
            "deaf": False,
            "mute": False,
            "flags": 0,
        }

    def _message(
        self, channel_id: str, author: dict[str, Any], content: str, *, guild_id: str | None
    ) -> dict[str, Any]:
        message_id = self.new_id()
        message = {
            "id": str(message_id),
            "channel_id": channel_id,
            "author": author,
            "content": content,
            "timestamp": _iso((message_id >> 22) + DISCORD_EPOCH_MS),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 0,
            "flags": 0,
        }
        if guild_id:
            message["guild_id"] = guild_id
        return message

    def _store(self, channel_id: str, message: dict[str, Any]) -> None:
        self.history.setdefault(channel_id, []).append(message)
        self.channels[channel_id]["last_message_id"] = message["id"]

    def _find(self, channel_id: str, message_id: str) -> dict[str, Any] | None:
        for message in self.history.get(channel_id, []):
            if message["id"] == message_id:
                return message
        return None

    def _queue(self, channel_id: str) -> asyncio.Queue[SentMessage]:
        return self._outbox.setdefault(channel_id, asyncio.Queue())

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # -- REST ------------------------------------------------------------------------------

    async def _guard(self, request: web.Request) -> web.Response | None:
        """Record the call; answer for it when it is unauthorised or scripted to fail."""
        path = request.path.removeprefix("/api/v10")
        route = f"{request.method} {path}"
        self.requests.append(route)
        await self._notify()
        if request.headers.get("Authorization") != f"Bot {self.token}":
            return _json({"message": "401: Unauthorized", "code": 0}, status=401)
        queued = self._failures.get(route)
        if not queued or queued[0].status is None:
            return None
        failure = queued.popleft()
        return _failure_response(failure)

    def _take_lost_response(self, request: web.Request) -> bool:
        route = f"{request.method} {request.path.removeprefix('/api/v10')}"
        queued = self._failures.get(route)
        if queued and queued[0].status is None:
            queued.popleft()
            return True
        return False

    async def _me(self, request: web.Request) -> web.Response:
        return await self._guard(request) or _json(self.bot)

    async def _application(self, request: web.Request) -> web.Response:
        return await self._guard(request) or _json(
            {
                "id": self.app_id,
                "name": self.bot["username"],
                "description": "",
                "icon": None,
                "bot_public": True,
                "bot_require_code_grant": False,
                "owner": self._user(str(self.new_id()), "owner"),
                "verify_key": "0" * 64,
                "flags": 0,
            }
        )

    async def _gateway_info(self, request: web.Request) -> web.Response:
        limits = {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
        return await self._guard(request) or _json(
            {
                "url": self.gateway_url,
                "shards": self.recommended_shards,
                "session_start_limit": limits,
            }
        )

    async def _create_dm(self, request: web.Request) -> web.Response:
        if (refused := await self._guard(request)) is not None:
            return refused
        body = await request.json()
        channel_id = self.dm_channel(str(body["recipient_id"]))
        return _json(self.channels[channel_id])

    async def _get_channel(self, request: web.Request) -> web.Response:
        if (refused := await self._guard(request)) is not None:
            return refused
        channel = self.channels.get(request.match_info["channel_id"])
        if channel is None:
            return _json({"message": "Unknown Channel", "code": 10003}, status=404)
        return _json(channel)

    async def _get_messages(self, request: web.Request) -> web.Response:
        if (refused := await self._guard(request)) is not None:
            return refused
        channel_id = request.match_info["channel_id"]
        if channel_id not in self.channels:
            return _json({"message": "Unknown Channel", "code": 10003}, status=404)
        limit = max(1, min(100, int(request.query.get("limit", "50"))))
        messages = sorted(self.history.get(channel_id, []), key=lambda m: int(m["id"]))
        if "after" in request.query:
            after = int(request.query["after"])
            # Discord answers the `limit` messages right after the id, newest first.
            page = [m for m in messages if int(m["id"]) > after][:limit]
        elif "before" in request.query:
            before = int(request.query["before"])
            page = [m for m in messages if int(m["id"]) < before][-limit:]
        else:
            page = messages[-limit:]
        return _json(list(reversed(page)))

    async def _typing(self, request: web.Request) -> web.Response:
        if (refused := await self._guard(request)) is not None:
            return refused
        self.typing[request.match_info["channel_id"]] += 1
        await self._notify()
        return web.Response(status=204)

    async def _attachment(self, request: web.Request) -> web.Response:
        data = self._files.get(request.match_info["file_id"])
        if data is None:
            return web.Response(status=404)
        return web.Response(body=data, content_type="application/octet-stream")

    async def _post_message(self, request: web.Request) -> web.Response:
        if (refused := await self._guard(request)) is not None:
            return refused
        channel_id = request.match_info["channel_id"]
        if channel_id not in self.channels:
            return _json({"message": "Unknown Channel", "code": 10003}, status=404)
        payload, files = await _read_message_body(request)
        content = payload.get("content") or ""
        if len(content) > MAX_CONTENT:
            return _json(
                {
                    "message": "Invalid Form Body",
                    "code": 50035,
                    "errors": {
                        "content": {
                            "_errors": [
                                {
                                    "code": "BASE_TYPE_MAX_LENGTH",
                                    "message": f"Must be {MAX_CONTENT} or fewer in length.",
                                }
                            ]
                        }
                    },
                },
                status=400,
            )
        if not content and not files and not payload.get("embeds"):
            return _json({"message": "Cannot send an empty message", "code": 50006}, status=400)
        nonce = payload.get("nonce")
        nonce = None if nonce is None else str(nonce)
        now = time.monotonic()
        if nonce is not None and payload.get("enforce_nonce"):
            seen = self._nonces.get((channel_id, nonce))
            if seen is not None and now - seen[0] < NONCE_WINDOW_SECONDS:
                return _json(seen[1])
        reference = (payload.get("message_reference") or {}).get("message_id")
        message = self._message(
            channel_id, dict(self.bot), content, guild_id=self.channels[channel_id].get("guild_id")
        )
        if nonce is not None:
            message["nonce"] = nonce
            self._nonces[(channel_id, nonce)] = (now, message)
        for name, _ in files:
            url = f"{self.base}/attachments/{message['id']}/{name}"
            message["attachments"].append(
                {
                    "id": str(self.new_id()),
                    "filename": name,
                    "size": 0,
                    "url": url,
                    "proxy_url": url,
                }
            )
        if reference is not None:
            message["type"] = 19
            message["message_reference"] = {"message_id": str(reference), "channel_id": channel_id}
        components = tuple(payload.get("components") or ())
        if components:
            message["components"] = list(components)
        self._store(channel_id, message)
        sent = SentMessage(
            message["id"],
            channel_id,
            content,
            tuple(files),
            reference and str(reference),
            nonce,
            components,
        )
        self.sent.append(sent)
        self.posted_at[message["id"]] = time.monotonic()
        self._queue(channel_id).put_nowait(sent)
        await self._notify()
        if self._take_lost_response(request):
            # The message exists; the client just never hears so.
            with_stop = asyncio.ensure_future(self._stopping.wait())
            await asyncio.wait({with_stop}, timeout=60)
            with_stop.cancel()
            return web.Response(status=503)
        return _json(message)

    async def _interaction_callback(self, request: web.Request) -> web.Response:
        body = await request.json()
        interaction_id = request.match_info["interaction_id"]
        self.interaction_callbacks.append((interaction_id, body["type"]))
        await self._notify()
        # discord.py asks with_response=true: the interaction callback response object.
        return _json({"interaction": {"id": interaction_id, "type": 3}})

    async def _react(self, request: web.Request) -> web.Response:
        if (refused := await self._guard(request)) is not None:
            return refused
        channel_id = request.match_info["channel_id"]
        if channel_id in self.reactions_refused:
            return _json({"message": "Missing Permissions", "code": 50013}, status=403)
        if self._find(channel_id, request.match_info["message_id"]) is None:
            return _json({"message": "Unknown Message", "code": 10008}, status=404)
        mine = self.reactions.setdefault((channel_id, request.match_info["message_id"]), set())
        if request.method == "PUT":
            mine.add(request.match_info["emoji"])
        else:
            mine.discard(request.match_info["emoji"])
        await self._notify()
        return web.Response(status=204)

    async def _patch_message(self, request: web.Request) -> web.Response:
        if (refused := await self._guard(request)) is not None:
            return refused
        channel_id = request.match_info["channel_id"]
        message = self._find(channel_id, request.match_info["message_id"])
        if message is None:
            return _json({"message": "Unknown Message", "code": 10008}, status=404)
        content = (await request.json()).get("content") or ""
        if len(content) > MAX_CONTENT or not content:
            return _json({"message": "Invalid Form Body", "code": 50035}, status=400)
        message["content"] = content
        message["edited_timestamp"] = _iso(int(time.time() * 1000))
        self.edits.append({"channel_id": channel_id, "id": message["id"], "content": content})
        await self._notify()
        return _json(message)

    # -- gateway ---------------------------------------------------------------------------

    async def _dispatch(
        self, event: str, data: dict[str, Any], *, guild_id: str | None = None
    ) -> None:
        """To the session of the guild's shard, or of shard 0 for what has no guild (DMs)."""
        for session in list(self._sessions.values()):
            shard_id, count = session.shard
            if shard_id == (shard_of(guild_id, count) if guild_id else 0):
                await self._send(session, event, data)

    async def _send(self, session: _Session, event: str, data: dict[str, Any]) -> None:
        session.seq += 1
        frame = {"op": 0, "t": event, "s": session.seq, "d": data}
        session.frames.append(frame)
        if session.ws is not None and not session.ws.closed:
            await session.ws.send_str(json.dumps(frame))

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        hello = {"op": 10, "d": {"heartbeat_interval": HEARTBEAT_INTERVAL_MS}, "s": None, "t": None}
        await ws.send_str(json.dumps(hello))
        try:
            async for msg in ws:
                if msg.type is not web.WSMsgType.TEXT:
                    continue
                frame = json.loads(msg.data)
                op, data = frame.get("op"), frame.get("d")
                if op == 1:
                    await ws.send_str(json.dumps({"op": 11, "d": None, "s": None, "t": None}))
                elif op == 2:
                    await self._identify(ws, data)
                elif op == 6:
                    await self._resume(ws, data)
        finally:
            for session in self._sessions.values():
                if session.ws is ws:
                    session.ws = None
        return ws

    async def _identify(self, ws: web.WebSocketResponse, data: dict[str, Any]) -> None:
        if data.get("token") != self.token:
            await ws.close(code=4004, message=b"Authentication failed.")
            return
        shard_id, count = data.get("shard") or (0, 1)
        if not 0 <= shard_id < count:
            await ws.close(code=4010, message=b"Invalid shard.")
            return
        self.identifies += 1
        self.identified.append((shard_id, count))
        # A new session: whatever the shard's old one buffered is gone, as on Discord.
        for old in [k for k, s in self._sessions.items() if s.shard == (shard_id, count)]:
            del self._sessions[old]
        session = _Session(uuid.uuid4().hex, shard=(shard_id, count), ws=ws)
        self._sessions[session.id] = session
        guilds = [g for g in self.guilds.values() if shard_of(g["id"], count) == shard_id]
        await self._send(
            session,
            "READY",
            {
                "v": 10,
                "user": self.bot,
                "guilds": [{"id": g["id"], "unavailable": True} for g in guilds],
                "session_id": session.id,
                "resume_gateway_url": self.gateway_url,
                "application": {"id": self.app_id, "flags": 0},
                "private_channels": [],
                "relationships": [],
                "shard": [shard_id, count],
            },
        )
        for guild in guilds:
            await self._send(
                session,
                "GUILD_CREATE",
                {
                    **guild,
                    "unavailable": False,
                    "member_count": 2,
                    "large": False,
                    "roles": [],
                    "emojis": [],
                    "stickers": [],
                    "features": [],
                    "members": [],
                    "voice_states": [],
                    "presences": [],
                },
            )
        await self._notify()

    async def _resume(self, ws: web.WebSocketResponse, data: dict[str, Any]) -> None:
        session = self._sessions.get(str(data.get("session_id")))
        if session is None or data.get("token") != self.token:
            await ws.send_str(json.dumps({"op": 9, "d": False, "s": None, "t": None}))
            return
        self.resumes += 1
        session.ws = ws
        missed = [f for f in session.frames if f["s"] > (data.get("seq") or 0)]
        for frame in missed:
            await ws.send_str(json.dumps(frame))
        await self._send(session, "RESUMED", {})
        await self._notify()


def _failure_response(failure: _Failure) -> web.Response:
    assert failure.status is not None
    if failure.status == 429:
        retry_after = 1.0 if failure.retry_after is None else failure.retry_after
        body = failure.body or {
            "message": "You are being rate limited.",
            "retry_after": retry_after,
            "global": False,
        }
        headers = {
            "Retry-After": str(math.ceil(retry_after)),
            "X-RateLimit-Limit": "5",
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset-After": f"{retry_after:.3f}",
            "X-RateLimit-Bucket": "fake-bucket",
            "X-RateLimit-Scope": "user",
            # discord.py treats a 429 without Via as a Cloudflare ban, not a rate limit.
            "Via": "1.1 google",
        }
        return _json(body, status=429, headers=headers)
    body = failure.body or {"message": f"{failure.status}: fake failure", "code": 0}
    return _json(body, status=failure.status)


async def _read_message_body(
    request: web.Request,
) -> tuple[dict[str, Any], list[tuple[str, bytes]]]:
    if request.content_type == "application/json":
        return await request.json(), []
    payload: dict[str, Any] = {}
    files: list[tuple[str, bytes]] = []
    reader = await request.multipart()
    async for part in reader:
        if part.name == "payload_json":
            payload = json.loads(await part.text())
        elif part.filename is not None:
            files.append((part.filename, bytes(await part.read())))
    return payload, files
