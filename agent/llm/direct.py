"""The direct path: chat completions POSTed to an OpenAI-compatible endpoint over aiohttp.

litellm spends ~3 ms of CPU per call building, validating and logging what is, for an
OpenAI-compatible server, one JSON POST (bench/model_call.py). This path sends that POST
itself on one persistent `aiohttp.ClientSession`, for the providers whose API is exactly
OpenAI's chat completions. Everything else, and any request litellm would rewrite
(OpenAI's reasoning models, images for DeepSeek), stays on the litellm path.

aiohttp rather than httpx: its C parser costs about a third of httpx's client CPU per call,
and at zero model latency that layer was half the gateway's turn. The session keeps httpx's
conduct where the two differ by default: no redirects followed, keep-alive 5 s, certifi's
CA bundle unless SSL_CERT_FILE/SSL_CERT_DIR is set, HTTP(S)_PROXY, ALL_PROXY and NO_PROXY
read once per session (an http:// or https:// proxy; socks:// neither client supports
here, httpx lacking its socksio extra), and no retry, no backoff, when a request meets a
kept-alive connection the server has just closed (see `DirectTransport._post`).

`DirectModel` is one model name on this path: it parses OpenAI's JSON into the protocol's
types (agent/llm/protocol.py) itself. Which names come here: agent/llm/routing.py.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import json
import logging
import ssl
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from clawgate.agent.llm.failures import Failure, Kind, retry_after
from clawgate.agent.llm.protocol import (
    Chunk,
    LLMResponse,
    ModelRequest,
    ToolCallPiece,
    tool_call,
    usage_from,
)
from clawgate.kernel.net import env_proxy, tls_context

if TYPE_CHECKING:
    import aiohttp

log = logging.getLogger("clawgate.agent.llm")


# litellm's names for the same failures, so messages and logs read alike on both paths.
_BY_STATUS: dict[int, tuple[Kind, str]] = {
    400: ("bad_request", "BadRequestError"),
    401: ("auth", "AuthenticationError"),
    403: ("forbidden", "PermissionDeniedError"),
    404: ("not_found", "NotFoundError"),
    408: ("timeout", "Timeout"),
    422: ("unprocessable", "UnprocessableEntityError"),
    429: ("rate_limit", "RateLimitError"),
    500: ("api", "InternalServerError"),
    503: ("api", "ServiceUnavailableError"),
}
# Connections to all endpoints together, and how long an idle one is kept: httpx's defaults,
# which the path had before. 5 s also stays under uvicorn's (vLLM's) idle close.
_CONNECTIONS = 100
_KEEPALIVE = 5.0


@dataclass(frozen=True)
class Endpoint:
    """Where one configured model name is served, and how to authenticate there."""

    url: str
    model: str  # the name the server knows, provider prefix removed
    headers: dict[str, str]
    missing_key: bool
    text_only: bool
    api: str = "openai"  # the wire format (see routing.py)

    def takes(self, messages: list[dict[str, Any]]) -> bool:
        """This request can go direct (a text-only endpoint gets no content lists)."""
        return not self.text_only or not any(
            isinstance(message.get("content"), list) for message in messages
        )


class HTTPFailure(Exception):
    """A response that is no completion: the Failure it amounts to."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.detail)
        self.failure = failure


class DirectTransport:
    """One persistent aiohttp session, shared by every direct model of a client; re-made
    only if the event loop it belongs to changed."""

    def __init__(self, timeout: float) -> None:
        self._timeout = timeout
        self._client: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._proxies: dict[str, str | None] = {}  # by endpoint URL, for this session
        self._tls: ssl.SSLContext | None = None

    @property
    def ready(self) -> bool:
        return self._client is not None or "aiohttp" in sys.modules

    async def warm_up(self, tls: bool) -> None:
        """aiohttp imported, and with `tls` (an https endpoint) its trust store read."""
        try:
            if not self.ready:
                await asyncio.to_thread(importlib.import_module, "aiohttp")
            if tls and self._tls is None:
                self._tls = await asyncio.to_thread(tls_context)
        except Exception:
            log.exception("loading aiohttp in the background failed")

    def _tls_for(self, url: str) -> ssl.SSLContext | bool:
        # Reading the CA bundle costs ~20 ms: only a request that uses TLS pays it, once.
        if not url.startswith("https:"):
            return True
        if self._tls is None:
            self._tls = tls_context()
        return self._tls

    def _session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            import aiohttp

            # A session is bound to the loop its connections were opened in; one left behind
            # by a finished loop is dropped with that loop's sockets.
            self._client = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=_CONNECTIONS, keepalive_timeout=_KEEPALIVE),
                # Per connect and per read, no total: the retry loop bounds each attempt,
                # and pushes a stream's bound back with every chunk.
                timeout=aiohttp.ClientTimeout(
                    total=None, connect=self._timeout, sock_read=self._timeout
                ),
            )
            self._loop = loop
            self._proxies = {}
        return self._client

    async def _post(
        self, target: Endpoint, body: bytes, suffix: str = ""
    ) -> aiohttp.ClientResponse:
        """Send the request; the response once its head arrived.

        A server may close an idle keep-alive connection just as it is taken for the next
        request, which then meets the close before any answer. httpx looked at a pooled
        socket before reusing it; aiohttp does not (nor resends a POST), so this resends
        once, at once, on a fresh connection: a disconnect before the response's head.
        """
        import aiohttp

        session = self._session()
        if target.url not in self._proxies:
            self._proxies[target.url] = env_proxy(target.url)
        url = target.url + suffix
        resent = False
        while True:
            try:
                return await session.post(
                    url,
                    data=body,
                    headers=target.headers,
                    allow_redirects=False,
                    proxy=self._proxies[target.url],
                    ssl=self._tls_for(url),
                )
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
                if resent or isinstance(exc, aiohttp.ClientConnectorError):
                    raise
                log.debug("connection to %s closed before an answer; resending", target.url)
                resent = True

    async def send(
        self, target: Endpoint, build: Callable[[], dict[str, Any]], suffix: str = ""
    ) -> aiohttp.ClientResponse:
        """POST the JSON body `build()` makes in a provider's own format (a native path:
        anthropic.py, gemini.py) to the endpoint's URL + `suffix`; the response once its
        head arrived."""
        return await self._post(target, _built(target, build), suffix)

    async def complete(self, target: Endpoint, params: dict[str, Any]) -> dict[str, Any]:
        """POST one chat completion; the parsed body, or HTTPFailure."""
        async with await self._post(target, _request_body(target, params)) as response:
            content = await response.read()
        if response.status >= 300:
            raise HTTPFailure(status_failure(response.status, content, response.headers))
        return parsed_body(content)

    async def stream(self, target: Endpoint, params: dict[str, Any]) -> AsyncIterator[Chunk]:
        """POST one chat completion with `"stream": true`; yield each SSE event as a chunk
        as it arrives (a server that answers with a plain body yields it as one chunk). An
        error status is an HTTPFailure, as for `complete`; so is an error event mid-stream."""
        body = _request_body(target, {**params, "stream": True})
        async with await self._post(target, body) as response:
            if response.status >= 300:
                content = await response.read()
                raise HTTPFailure(status_failure(response.status, content, response.headers))
            if "text/event-stream" not in response.headers.get("content-type", ""):
                yield whole_chunk(parsed_body(await response.read()))
                return
            async for line in sse_lines(response.content):
                if not line.startswith(b"data:"):
                    continue  # comments, event names, keep-alives
                data = line[5:].strip()
                if data == b"[DONE]":
                    return
                event = parsed_body(data)
                if event.get("error"):
                    raise HTTPFailure(_stream_error(event["error"]))
                yield parse_chunk(event)

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None and self._loop is asyncio.get_running_loop():
            await client.close()


class EndpointModel:
    """What every direct-path model holds: its name, its endpoint and the shared transport."""

    def __init__(self, name: str, target: Endpoint, transport: DirectTransport) -> None:
        self._name = name
        self._target = target
        self._transport = transport

    @property
    def name(self) -> str:
        return self._name


class DirectModel(EndpointModel):
    """One model name on the direct path (the protocol in agent/llm/protocol.py)."""

    async def complete(self, request: ModelRequest) -> LLMResponse:
        body = await self._transport.complete(self._target, request.params())
        return parse_response(body, self._name)

    def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        params = {**request.params(), "stream_options": {"include_usage": True}}
        return self._transport.stream(self._target, params)

    def failure(self, exc: Exception) -> Failure:
        return failure(exc)


def parse_response(body: dict[str, Any], model: str) -> LLMResponse:
    """A chat-completions body (choice 0) as the protocol's response."""
    usage = usage_from(body.get("usage"))
    choices = body.get("choices") or []
    if not choices:
        return LLMResponse(None, [], "", usage, model)
    choice = choices[0]
    message = choice.get("message") or {}
    calls = [
        tool_call(raw.get("id"), function.get("name"), function.get("arguments"))
        for raw in message.get("tool_calls") or []
        for function in (raw.get("function") or {},)
    ]
    return LLMResponse(
        message.get("content"), calls, choice.get("finish_reason") or "", usage, model
    )


def parse_chunk(event: dict[str, Any]) -> Chunk:
    """One SSE event of a streamed completion as a chunk; choices other than 0 are dropped."""
    text, pieces, reason = "", [], None
    for choice in event.get("choices") or []:
        if (choice.get("index") or 0) != 0:
            continue
        reason = choice.get("finish_reason") or reason
        delta = choice.get("delta")
        if delta is None:
            continue
        content = delta.get("content")
        if isinstance(content, str):
            text += content
        pieces += [_piece(call) for call in delta.get("tool_calls") or []]
    usage = event.get("usage")
    return Chunk(
        text, tuple(pieces), str(reason) if reason else None, usage_from(usage) if usage else None
    )


def whole_chunk(completion: dict[str, Any]) -> Chunk:
    """A whole completion as one chunk, for a server that answered a streamed request
    without streaming."""
    response = parse_response(completion, "")
    pieces = tuple(
        ToolCallPiece(i, call.id, call.name, call.arguments, whole=True)
        for i, call in enumerate(response.tool_calls)
    )
    usage = response.usage if completion.get("usage") else None
    return Chunk(response.content or "", pieces, response.finish_reason or "stop", usage)


def _piece(call: dict[str, Any]) -> ToolCallPiece:
    index = call.get("index")
    function = call.get("function") or {}
    arguments = function.get("arguments")
    whole = arguments is not None and not isinstance(arguments, str)
    return ToolCallPiece(
        index if isinstance(index, int) else None,
        str(call["id"]) if call.get("id") else None,
        str(function["name"]) if function.get("name") else None,
        json.dumps(arguments) if whole else arguments,
        whole,
    )


async def sse_lines(content: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """The body's lines, ended by LF, CRLF or CR as SSE allows. Split here rather than by
    aiohttp's readline, which refuses a line over twice its read buffer (512 KiB by default),
    and a provider may send a tool call's arguments whole in one event."""
    pending = b""
    async for data in content.iter_any():
        lines = (pending + data).splitlines(keepends=True)
        # The last piece may be cut mid-line, or be the CR of a CRLF split across reads.
        pending = lines.pop() if not lines[-1].endswith(b"\n") else b""
        for line in lines:
            yield line.rstrip(b"\r\n")
    if pending:
        yield pending.rstrip(b"\r\n")


def _request_body(target: Endpoint, params: dict[str, Any]) -> bytes:
    return _encoded(target, {"model": target.model, **params})


def _built(target: Endpoint, build: Callable[[], dict[str, Any]]) -> bytes:
    """`build()` encoded with the cyclic collector paused. A native body holds new dicts
    and lists for every message (tens of thousands for a long history), none in a cycle
    and all freed by the time this returns; made with the collector on, they would set
    off full collections over the whole heap, several times the cost of the request."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _encoded(target, build())
    finally:
        if enabled:
            gc.enable()


def _encoded(target: Endpoint, payload: dict[str, Any]) -> bytes:
    if target.missing_key:
        # As litellm does: nothing is sent without the key the provider requires.
        raise HTTPFailure(Failure("auth", None, "missing credentials", "AuthenticationError"))
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()


def parsed_body(content: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(content)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        # litellm calls an unreadable body a provider error (HTTP 500): so do we.
        raise HTTPFailure(Failure("api", 500, "unreadable response body", "APIError"))
    return parsed


def _stream_error(error: Any) -> Failure:
    """An error event inside a stream that had started (OpenAI sends `{"error": {...}}`)."""
    if isinstance(error, dict):
        status = error.get("code") if isinstance(error.get("code"), int) else None
        return status_failure(status or 500, json.dumps({"error": error}).encode(), {})
    return Failure("api", 500, str(error), "APIError")


def failure(exc: Exception) -> Failure:
    """What an exception raised by `DirectTransport.complete` or `.stream` amounts to."""
    import aiohttp

    if isinstance(exc, HTTPFailure):
        return exc.failure
    if isinstance(exc, TimeoutError):  # aiohttp's connect and read timeouts are these
        return Failure("timeout", None, str(exc) or "timed out", "Timeout")
    if isinstance(exc, aiohttp.ClientError | OSError):
        # Refused, reset, cut off mid-body, a malformed response, a URL without http(s)://:
        # all a transport failure to httpx too. aiohttp's messages can be empty.
        return Failure("connection", None, str(exc) or type(exc).__name__, "APIConnectionError")
    return Failure("other", None, str(exc), type(exc).__name__)


def status_failure(status: int, content: bytes, headers: Any) -> Failure:
    """An HTTP error response (OpenAI's `{"error": {...}}` body) as a Failure."""
    kind, name = _BY_STATUS.get(status, ("api", "APIError"))
    detail = content.decode("utf-8", "replace")
    code = None
    try:
        error = json.loads(content).get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict):
        detail = str(error.get("message") or detail)
        code = error.get("code")
    elif isinstance(error, str):
        detail = error
    if code == "context_length_exceeded":
        kind, name = "context", "ContextWindowExceededError"
    return Failure(kind, status, detail, name, retry_after(headers))
