"""A fake Telegram Bot API on 127.0.0.1 that python-telegram-bot talks to for real.

    fake.user_says(1001, "hello")
    reply = await fake.next_message(1001)

It enforces the rules a real bot trips over: offset confirmation in getUpdates, the 4096
UTF-16 limit and the empty-text error of sendMessage, Telegram's HTML subset, 429 bodies
with retry_after and 409 conflicts (injected), a method broken until mended, and raw updates
as malformed as a test likes. It runs in the test's event loop.
"""

from __future__ import annotations

import asyncio
import html
import itertools
import json
import re
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.fakes.server import LoopbackServer

TOKEN = "123456:TEST-token"
BOT_ID = 999000
BOT_USERNAME = "claw_test_bot"
CONFLICT_DESCRIPTION = (
    "Conflict: terminated by other getUpdates request; make sure that only one bot instance "
    "is running"
)

_ALLOWED_TAGS = {
    "b",
    "strong",
    "i",
    "em",
    "u",
    "ins",
    "s",
    "strike",
    "del",
    "span",
    "tg-spoiler",
    "a",
    "code",
    "pre",
    "blockquote",
    "tg-emoji",
}
_TAG = re.compile(
    r"<(/?)([A-Za-z][\w-]*)((?:\s+[\w-]+(?:=(?:\"[^\"]*\"|'[^']*'|[^\s>]+))?)*)\s*(/?)>"
)
_ENTITY = re.compile(r"&(lt|gt|amp|quot|#\d+|#x[0-9a-fA-F]+);")
_AUTO_ENTITY = re.compile(r"(?<![\w@])(@\w{3,}|/\w+(?:@\w+)?)")


class HTMLError(ValueError):
    pass


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def parse_html(source: str) -> str:
    """The text Telegram would show; HTMLError with Telegram's wording when it would refuse."""
    out: list[str] = []
    stack: list[str] = []
    i = 0
    while i < len(source):
        char = source[i]
        if char == "<":
            match = _TAG.match(source, i)
            offset = len(source[:i].encode())
            if match is None:
                raise HTMLError(f"Unsupported start tag at byte offset {offset}")
            closing, name = match.group(1), match.group(2).lower()
            if name not in _ALLOWED_TAGS:
                raise HTMLError(f'Unsupported start tag "{name}" at byte offset {offset}')
            if closing:
                if not stack:
                    raise HTMLError(f"Unexpected end tag at byte offset {offset}")
                expected = stack.pop()
                if expected != name:
                    raise HTMLError(
                        f'Unmatched end tag at byte offset {offset}, expected "</{expected}>", '
                        f'found "</{name}>"'
                    )
            else:
                if name == "a" and "href" not in match.group(3):
                    raise HTMLError(f"Can't find href in a tag at byte offset {offset}")
                stack.append(name)
            i = match.end()
        elif char == "&":
            match = _ENTITY.match(source, i)
            if match is None:
                offset = len(source[:i].encode())
                raise HTMLError(f"Unsupported HTML entity at byte offset {offset}")
            out.append(html.unescape(match.group(0)))
            i = match.end()
        elif char == ">":
            raise HTMLError("Unsupported character '>' outside of a tag")
        else:
            out.append(char)
            i += 1
    if stack:
        raise HTMLError(f'Can\'t find end tag corresponding to start tag "{stack[-1]}"')
    return "".join(out)


@dataclass
class _Failure:
    status: int
    description: str
    retry_after: float | None = None


# Part of the emoji a bot may react with (Telegram's list has neither ✅ nor ⚠️).
REACTION_EMOJI = frozenset("👍👎❤🔥🥰👏😁🤔🤯😱🤬😢🎉🤩🙏👌🕊🤡🥱👀🤝✍🤗🫡🎅🎄☃💅🤪🗿🆒💯")


@dataclass
class _Stall:
    seconds: float


class ApiError(Exception):
    def __init__(self, status: int, description: str, retry_after: float | None = None):
        super().__init__(description)
        self.status = status
        self.description = description
        self.retry_after = retry_after


class FakeTelegram(LoopbackServer):
    """`/bot<TOKEN>/<method>` and `/file/bot<TOKEN>/<path>` on 127.0.0.1."""

    def __init__(self, token: str = TOKEN) -> None:
        self.token = token
        self.bot_user = {
            "id": BOT_ID,
            "is_bot": True,
            "first_name": "Claw",
            "username": BOT_USERNAME,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }
        self.updates: list[dict[str, Any]] = []  # not yet confirmed
        self.handed_out: list[int] = []
        self.confirmed_offset = 0
        self.sent: list[dict[str, Any]] = []
        # Every edit that took, in order: chat_id, message_id, text, parse_mode, at.
        self.edits: list[dict[str, Any]] = []
        # What an edit's `at` is read from: a test on virtual time passes its clock.
        self.clock: Callable[[], float] = time.monotonic
        # The bot's reaction on each message, by (chat_id, message_id): its emoji, [] if taken
        # back; chats that refuse reactions (a group without the permission).
        self.reactions: dict[tuple[int, int], list[str]] = {}
        self.reactions_refused: set[int] = set()
        # When each message the bot sent was posted, by (chat_id, message_id), on `clock`.
        self.posted_at: dict[tuple[int, int], float] = {}
        self.actions: list[dict[str, Any]] = []
        self.commands: list[dict[str, Any]] = []
        self.answered_callbacks: list[str] = []  # answerCallbackQuery ids, in order
        self.calls: Counter[str] = Counter()
        self.files: dict[str, tuple[str, bytes]] = {}
        self._failures: dict[str, deque[_Failure | _Stall]] = {}
        self._broken: dict[str, _Failure] = {}
        self._messages: dict[int, dict[int, dict[str, Any]]] = {}
        self._outbox: dict[int, asyncio.Queue[dict[str, Any]]] = {}
        self._update_ids = itertools.count(1)
        self._message_ids: dict[int, itertools.count[int]] = {}
        self._file_ids = itertools.count(1)
        self._new_update = asyncio.Event()
        super().__init__()

    # -- lifecycle -------------------------------------------------------------------------

    client_max_size = 50 * 1024 * 1024
    shutdown_timeout = 0.5

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/bot"

    @property
    def base_file_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/file/bot"

    def add_routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/bot{token}/{method}", self._api)
        app.router.add_get("/file/bot{token}/{path:.+}", self._file)

    # -- test API: what users do -----------------------------------------------------------

    def user_says(
        self,
        chat_id: int,
        text: str = "",
        *,
        user_id: int | None = None,
        username: str | None = None,
        first_name: str = "Ann",
        last_name: str | None = None,
        chat_type: str = "private",
        thread_id: int | None = None,
        reply_to: int | None = None,
        entities: list[dict[str, Any]] | None = None,
        photo: bytes | None = None,
        document: tuple[str, bytes] | None = None,
        voice: bytes | None = None,
        edit_of: int | None = None,
    ) -> int:
        """Queue a user's message (or, with edit_of, an edit); returns its update_id."""
        user = {"id": user_id if user_id is not None else chat_id, "is_bot": False}
        user["first_name"] = first_name
        if last_name:
            user["last_name"] = last_name
        if username:
            user["username"] = username
        message: dict[str, Any] = {
            "message_id": edit_of if edit_of is not None else self._next_message_id(chat_id),
            "date": int(time.time()),
            "chat": self._chat(chat_id, chat_type, forum=thread_id is not None),
            "from": user,
        }
        if edit_of is not None:
            message["edit_date"] = int(time.time())
        if thread_id is not None:
            message["message_thread_id"] = thread_id
            message["is_topic_message"] = True
        if reply_to is not None:
            replied = self._messages.get(chat_id, {}).get(reply_to)
            if replied is None:
                raise KeyError(f"no message {reply_to} in chat {chat_id}")
            message["reply_to_message"] = replied
        has_media = photo is not None or document is not None or voice is not None
        text_key, entity_key = (
            ("caption", "caption_entities") if has_media else ("text", "entities")
        )
        if text:
            message[text_key] = text
            found = entities if entities is not None else _auto_entities(text)
            if found:
                message[entity_key] = found
        if photo is not None:
            small = self._add_file("photos/small.jpg", photo[:16] + b"-thumb")
            large = self._add_file(f"photos/file_{next(self._file_ids)}.jpg", photo)
            message["photo"] = [
                {**small, "width": 90, "height": 90},
                {**large, "width": 1280, "height": 960},
            ]
        if document is not None:
            name, data = document
            message["document"] = {**self._add_file(f"documents/{name}", data), "file_name": name}
        if voice is not None:
            message["voice"] = {**self._add_file("voice/file.oga", voice), "duration": 2}
        self._messages.setdefault(chat_id, {})[message["message_id"]] = message
        kind = "edited_message" if edit_of is not None else "message"
        return self._add_update({kind: message})

    def press(self, card: dict[str, Any], label: str, *, user_id: int | None = None) -> int:
        """A user taps the inline button `label` under `card` (a sent message's record);
        returns the update_id. `user_id`: who taps (default: the chat's own user)."""
        chat_id = card["chat_id"]
        buttons = [b for row in card["reply_markup"]["inline_keyboard"] for b in row]
        (button,) = [b for b in buttons if b["text"] == label]
        who = user_id if user_id is not None else chat_id
        query = {
            "id": str(next(self._file_ids)),
            "from": {"id": who, "is_bot": False, "first_name": f"User{who}"},
            "chat_instance": str(chat_id),
            "message": self._messages[chat_id][card["message_id"]],
            "data": button["callback_data"],
        }
        return self._add_update({"callback_query": query})

    def channel_post(self, chat_id: int, text: str) -> int:
        message = {
            "message_id": self._next_message_id(chat_id),
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "channel", "title": "News"},
            "text": text,
        }
        return self._add_update({"channel_post": message})

    # -- test API: injected trouble --------------------------------------------------------

    def fail_next(
        self, method: str, status: int, description: str, retry_after: float | None = None
    ) -> None:
        self._failures.setdefault(method, deque()).append(
            _Failure(status, description, retry_after)
        )

    def conflict(self) -> None:
        self.fail_next("getUpdates", 409, CONFLICT_DESCRIPTION)

    def raw_update(self, body: dict[str, Any]) -> int:
        """Queue an update exactly as given (after its update_id), e.g. one a client library
        cannot parse; returns its update_id."""
        return self._add_update(body)

    def delete_message(self, chat_id: int, message_id: int) -> None:
        """The user deletes a message the bot sent."""
        del self._messages[chat_id][message_id]

    def text_of(self, chat_id: int, message_id: int) -> str:
        """What a message the bot sent shows now (its last edit)."""
        return str(self._messages[chat_id][message_id].get("text", ""))

    def break_method(self, method: str, status: int, description: str) -> None:
        """Fail every `method` call with `status` until `mend(method)`."""
        self._broken[method] = _Failure(status, description)

    def mend(self, method: str) -> None:
        self._broken.pop(method, None)

    def stall_next(self, method: str, seconds: float) -> None:
        """Perform the next `method` call, then hold the response back for `seconds`."""
        self._failures.setdefault(method, deque()).append(_Stall(seconds))

    # -- test API: what the bot did --------------------------------------------------------

    async def next_message(self, chat_id: int, timeout: float = 10) -> dict[str, Any]:
        # Not asyncio.wait_for: on 3.11 it drops a cancellation that lands as a message
        # arrives, and a test's talking task then talks on after it was cancelled.
        async with asyncio.timeout(timeout):
            return await self._queue(chat_id).get()

    def messages_to(self, chat_id: int) -> list[dict[str, Any]]:
        return [m for m in self.sent if m["chat_id"] == chat_id]

    # -- internals -------------------------------------------------------------------------

    def _queue(self, chat_id: int) -> asyncio.Queue[dict[str, Any]]:
        return self._outbox.setdefault(chat_id, asyncio.Queue())

    def _next_message_id(self, chat_id: int) -> int:
        return next(self._message_ids.setdefault(chat_id, itertools.count(1)))

    def _chat(self, chat_id: int, chat_type: str, forum: bool = False) -> dict[str, Any]:
        if chat_type == "private":
            return {"id": chat_id, "type": "private", "first_name": "Ann"}
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type, "title": "Team"}
        if forum:
            chat["is_forum"] = True
        return chat

    def _add_file(self, path: str, data: bytes) -> dict[str, Any]:
        number = next(self._file_ids)
        file_id = f"file-{number}"
        self.files[file_id] = (path, data)
        return {"file_id": file_id, "file_unique_id": f"u{number}", "file_size": len(data)}

    def _add_update(self, body: dict[str, Any]) -> int:
        update_id = next(self._update_ids)
        self.updates.append({"update_id": update_id, **body})
        self._new_update.set()
        self._new_update = asyncio.Event()
        return update_id

    async def _api(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        self.calls[method] += 1
        if request.match_info["token"] != self.token:
            return _error(401, "Unauthorized")
        params = await _read_params(request)
        broken = self._broken.get(method)
        if broken is not None:
            return _error(broken.status, broken.description)
        stall: _Stall | None = None
        queued = self._failures.get(method)
        if queued:
            trouble = queued.popleft()
            if isinstance(trouble, _Failure):
                return _error(trouble.status, trouble.description, trouble.retry_after)
            stall = trouble
        handler = getattr(self, f"_m_{method}", None)
        if handler is None:
            return _error(404, "Not Found: method not found")
        try:
            result = await handler(params)
        except ApiError as exc:
            return _error(exc.status, exc.description, exc.retry_after)
        if stall is not None:
            await self._until_stopping(stall.seconds)
        return web.json_response({"ok": True, "result": result})

    async def _file(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return web.Response(status=401)
        path = request.match_info["path"]
        for stored_path, data in self.files.values():
            if stored_path == path:
                return web.Response(body=data)
        return web.Response(status=404)

    async def _until_stopping(self, seconds: float) -> bool:
        try:
            async with asyncio.timeout(seconds):
                await self._stopping.wait()
        except TimeoutError:
            return False
        return True

    # Bot API methods ------------------------------------------------------------------------

    async def _m_getMe(self, params: dict[str, Any]) -> Any:
        return self.bot_user

    async def _m_deleteWebhook(self, params: dict[str, Any]) -> Any:
        return True

    async def _m_setMyCommands(self, params: dict[str, Any]) -> Any:
        self.commands = _json(params.get("commands")) or []
        return True

    async def _m_sendChatAction(self, params: dict[str, Any]) -> Any:
        self.actions.append(
            {
                "chat_id": _json(params["chat_id"]),
                "action": params.get("action"),
                "message_thread_id": _json(params.get("message_thread_id")),
            }
        )
        return True

    async def _m_getUpdates(self, params: dict[str, Any]) -> Any:
        offset = _json(params.get("offset"))
        timeout = float(_json(params.get("timeout")) or 0)
        limit = int(_json(params.get("limit")) or 100)
        if offset is not None and offset > 0:
            # Confirming is for good: those updates are never handed out again.
            self.confirmed_offset = max(self.confirmed_offset, offset)
            self.updates = [u for u in self.updates if u["update_id"] >= offset]
        deadline = asyncio.get_running_loop().time() + timeout
        while not self.updates:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0 or self._stopping.is_set():
                break
            arrived = self._new_update
            waiters = {
                asyncio.ensure_future(arrived.wait()),
                asyncio.ensure_future(self._stopping.wait()),
            }
            _, pending = await asyncio.wait(
                waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
            )
            for task in pending:
                task.cancel()
        batch = self.updates[:limit]
        self.handed_out.extend(u["update_id"] for u in batch)
        return batch

    async def _m_sendMessage(self, params: dict[str, Any]) -> Any:
        chat_id = _json(params["chat_id"])
        raw = params.get("text", "")
        parse_mode = params.get("parse_mode")
        text = raw
        if parse_mode == "HTML":
            try:
                text = parse_html(raw)
            except HTMLError as exc:
                raise ApiError(400, f"Bad Request: can't parse entities: {exc}") from None
        if not text.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        if utf16_len(text) > 4096:
            raise ApiError(400, "Bad Request: message is too long")
        record = {"text": text, "raw": raw, "parse_mode": parse_mode}
        markup = _json(params.get("reply_markup"))
        if markup:
            record["reply_markup"] = markup
        return self._deliver(chat_id, params, record, {"reply_markup": markup} if markup else None)

    async def _m_answerCallbackQuery(self, params: dict[str, Any]) -> Any:
        self.answered_callbacks.append(str(params["callback_query_id"]))
        return True

    async def _m_editMessageText(self, params: dict[str, Any]) -> Any:
        chat_id = _json(params["chat_id"])
        message_id = _json(params["message_id"])
        stored = self._messages.get(chat_id, {}).get(message_id)
        if stored is None:
            raise ApiError(400, "Bad Request: message to edit not found")
        raw = params.get("text", "")
        parse_mode = params.get("parse_mode")
        text = raw
        if parse_mode == "HTML":
            try:
                text = parse_html(raw)
            except HTMLError as exc:
                raise ApiError(400, f"Bad Request: can't parse entities: {exc}") from None
        if not text.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        if utf16_len(text) > 4096:
            raise ApiError(400, "Bad Request: message is too long")
        if text == stored.get("text"):
            raise ApiError(
                400,
                "Bad Request: message is not modified: specified new message content and "
                "reply markup are exactly the same as a current content and reply markup "
                "of the message",
            )
        stored["text"] = text
        self.edits.append(
            {
                "chat_id": chat_id,
                "message_id": message_id,
                "text": text,
                "parse_mode": parse_mode,
                "at": self.clock(),
            }
        )
        return stored

    async def _m_setMessageReaction(self, params: dict[str, Any]) -> Any:
        chat_id = _json(params["chat_id"])
        if chat_id in self.reactions_refused:
            raise ApiError(400, "Bad Request: REACTIONS_UNAVAILABLE")
        reaction = _json(params.get("reaction")) or []
        emoji = []
        for kind in reaction:
            # Only emoji from Telegram's list: anything else (✅ arrives as a custom emoji).
            if kind.get("type") != "emoji" or kind.get("emoji") not in REACTION_EMOJI:
                raise ApiError(400, "Bad Request: REACTION_INVALID")
            emoji.append(kind["emoji"])
        self.reactions[chat_id, _json(params["message_id"])] = emoji
        return True

    async def _m_sendPhoto(self, params: dict[str, Any]) -> Any:
        return self._upload(params, "photo")

    async def _m_sendDocument(self, params: dict[str, Any]) -> Any:
        return self._upload(params, "document")

    async def _m_getFile(self, params: dict[str, Any]) -> Any:
        file_id = params.get("file_id", "")
        if file_id not in self.files:
            raise ApiError(400, "Bad Request: invalid file_id")
        path, data = self.files[file_id]
        return {
            "file_id": file_id,
            "file_unique_id": "u" + file_id,
            "file_size": len(data),
            "file_path": path,
        }

    def _upload(self, params: dict[str, Any], kind: str) -> Any:
        chat_id = _json(params["chat_id"])
        upload = params.get(kind)
        if not isinstance(upload, web.FileField):
            raise ApiError(400, f"Bad Request: there is no {kind} in the request")
        data = upload.file.read()
        record = {"kind": kind, "filename": upload.filename, "data": data}
        record["caption"] = params.get("caption")
        file = self._add_file(f"sent/{upload.filename}", data)
        extra = (
            {"photo": [{**file, "width": 100, "height": 100}]}
            if kind == "photo"
            else {"document": {**file, "file_name": upload.filename}}
        )
        return self._deliver(chat_id, params, record, extra)

    def _deliver(
        self,
        chat_id: int,
        params: dict[str, Any],
        record: dict[str, Any],
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        thread_id = _json(params.get("message_thread_id"))
        reply = _json(params.get("reply_parameters")) or {}
        message_id = self._next_message_id(chat_id)
        record = {
            "chat_id": chat_id,
            "message_id": message_id,
            "message_thread_id": thread_id,
            "reply_to_message_id": reply.get("message_id"),
            **record,
        }
        self.sent.append(record)
        self.posted_at[chat_id, message_id] = self.clock()
        self._queue(chat_id).put_nowait(record)
        message: dict[str, Any] = {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": self._chat(chat_id, "private" if chat_id > 0 else "supergroup"),
            "from": self.bot_user,
            **(extra or {}),
        }
        if "text" in record:
            message["text"] = record["text"]
        if thread_id is not None:
            message["message_thread_id"] = thread_id
            message["is_topic_message"] = True
        self._messages.setdefault(chat_id, {})[message_id] = message
        return message


async def _read_params(request: web.Request) -> dict[str, Any]:
    if request.method == "GET":
        return dict(request.query)
    content_type = request.content_type
    if content_type == "application/json":
        body = await request.json()
        return {k: v if isinstance(v, str) else json.dumps(v) for k, v in body.items()}
    form = await request.post()
    return dict(form.items())


def _json(value: Any) -> Any:
    """PTB sends non-string values JSON-encoded inside the form."""
    if value is None or not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _error(status: int, description: str, retry_after: float | None = None) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if retry_after is not None:
        body["parameters"] = {"retry_after": retry_after}
    return web.json_response(body, status=status)


def _auto_entities(text: str) -> list[dict[str, Any]]:
    """Telegram marks @mentions and /commands itself; offsets are in UTF-16 units."""
    entities = []
    for match in _AUTO_ENTITY.finditer(text):
        value = match.group(1)
        kind = "mention" if value.startswith("@") else "bot_command"
        if kind == "bot_command" and match.start() != 0:
            continue
        entities.append(
            {
                "type": kind,
                "offset": utf16_len(text[: match.start()]),
                "length": utf16_len(value),
            }
        )
    return entities
