"""The litellm path: every provider litellm knows, imported on first use.

litellm is imported on the first call, never at module import: it costs seconds and
~190 MB, and commands that never call a model (`clawgate --help`) must not pay for it.
`LitellmModel` is one model name on this path: chat completions (whole or streamed),
embeddings and speech to text, each read from litellm's response objects into the
protocol's types here, and each failure described by litellm's exception type.

litellm runs its success logging after every call (building a logging payload, scheduling
handlers); it has no public switch to skip that when no callback is registered, so this
path leaves it on: a callback a user registers sees every call.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import platform
import warnings
from collections.abc import AsyncIterator
from types import ModuleType
from typing import Any

from clawgate.agent.llm.canned import canned_chat_completions
from clawgate.agent.llm.failures import Failure, Kind, retry_after
from clawgate.agent.llm.protocol import (
    USAGE_KEYS,
    Chunk,
    LLMResponse,
    ModelRequest,
    ToolCallPiece,
    tool_call,
    usage_from,
)

log = logging.getLogger("clawgate.agent.llm")

# litellm's exception types by kind, most specific first: its context error is a
# BadRequestError too.
_KINDS: tuple[tuple[str, Kind], ...] = (
    ("ContextWindowExceededError", "context"),
    ("BadRequestError", "bad_request"),
    ("UnprocessableEntityError", "unprocessable"),
    ("AuthenticationError", "auth"),
    ("PermissionDeniedError", "forbidden"),
    ("RateLimitError", "rate_limit"),
    ("Timeout", "timeout"),
    ("APIConnectionError", "connection"),
    ("NotFoundError", "not_found"),
    ("APIError", "api"),
    ("OpenAIError", "api"),
)


def import_litellm() -> ModuleType:
    # Without this litellm fetches its cost map over the network at import time.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # Its own types trip pydantic's warnings at its first calls (TypedDicts with ReadOnly
    # items, fields read from an instance): lines on the gateway's stderr about litellm's
    # code that an owner can do nothing about.
    warnings.filterwarnings("ignore", r".* using the `ReadOnly` qualifier", UserWarning)
    warnings.filterwarnings(
        "ignore", r"Accessing the 'model_(computed_)?fields' attribute", module=r"litellm\."
    )
    import litellm

    litellm.suppress_debug_info = True
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
        logging.getLogger(name).setLevel(logging.WARNING)
    return litellm


class LitellmLib:
    """litellm, loaded once: on demand, or in the background by `warm_up`."""

    def __init__(self) -> None:
        self._litellm: ModuleType | None = None
        self._importing: asyncio.Future[ModuleType] | None = None
        self._called = False  # a real call began
        self._warmed = False

    def get(self) -> ModuleType:
        if self._litellm is None:
            self._litellm = import_litellm()
        return self._litellm

    async def load(self, *, call: bool = True) -> ModuleType:
        """litellm for a call, imported in a thread. A call that comes while the warm-up's
        import runs waits for that import: importing on the loop instead would block it
        (every chat, the dashboard) on the import lock until the thread's import ended.
        Once a real call has begun, the warm-up makes no mocked call: that call pays the
        one-off work, and a second first call beside it would only slow it down."""
        if call:
            self._called = True
        if self._litellm is None:
            if self._importing is None:
                self._importing = asyncio.ensure_future(asyncio.to_thread(import_litellm))
            importing = self._importing
            try:
                self._litellm = await asyncio.shield(importing)
            except BaseException:
                if importing.done() and self._importing is importing:
                    self._importing = None  # failed: the next call tries again
                raise
        return self._litellm

    @property
    def ready(self) -> bool:
        return self._litellm is not None

    async def warm_up(self, model: str | None = None) -> None:
        """Import litellm in a thread; then, for a chat `model`, one mocked call (no request
        leaves the process) and one real call to a canned answer on 127.0.0.1 (canned.py):
        litellm's first call does ~0.3 s of one-off work (lazy imports, its logging worker,
        the provider's tables, the SDK's response models), which a first reply would
        otherwise pay. They run on the loop, as litellm's calls do, and not once a real call
        has begun: that call pays the one-off work, and a first call beside it would only
        slow it down."""
        try:
            litellm = await self.load(call=False)
            # The OpenAI SDK, which litellm calls for OpenAI-compatible providers, names the
            # platform in its headers: the first platform.platform() forks this process to
            # run `uname -p` (its answer is kept for the process).
            await asyncio.to_thread(platform.platform)
            if not model or self._warmed:
                return
            self._warmed = True
            if not self._called:
                await litellm.acompletion(
                    model=model,
                    messages=[{"role": "user", "content": "warm-up"}],
                    mock_response="ok",
                    api_key="warm-up",
                )
            if not self._called:
                # A stop lets it end (milliseconds): cancelled inside litellm, the call would
                # leave one of litellm's coroutines never awaited.
                call = asyncio.ensure_future(_call_canned(litellm))
                try:
                    await asyncio.shield(call)
                except asyncio.CancelledError:
                    if not (await asyncio.wait({call}, timeout=2))[0]:
                        call.cancel()
                    raise
        except Exception:
            log.exception("loading litellm in the background failed")


async def _call_canned(litellm: ModuleType) -> None:
    """One real call to the canned answer, through a client of our own that is closed
    after it (one litellm made would stay in its cache with a socket to a closed server)."""
    import openai  # litellm's own dependency, already imported by it

    async with canned_chat_completions() as base:
        client = openai.AsyncOpenAI(base_url=base, api_key="warm-up", max_retries=0, timeout=10)
        try:
            await litellm.acompletion(
                model="openai/warm-up",
                messages=[{"role": "user", "content": "warm-up"}],
                client=client,
            )
        finally:
            await client.close()


class LitellmModel:
    """One model name on the litellm path (the protocol in agent/llm/protocol.py)."""

    def __init__(
        self,
        name: str,
        lib: LitellmLib,
        *,
        api_base: str | None,
        api_key: str | None,
        timeout: float,
    ) -> None:
        self._name = name
        self._lib = lib
        # Retries are ours; the OpenAI SDK underneath would otherwise add two of its own.
        self._params: dict[str, Any] = {
            "model": name,
            "api_base": api_base,
            "api_key": api_key,
            "timeout": timeout,
            "max_retries": 0,
        }

    @property
    def name(self) -> str:
        return self._name

    async def complete(self, request: ModelRequest) -> LLMResponse:
        litellm = await self._lib.load()
        response = await litellm.acompletion(**request.params(), **self._params, num_retries=0)
        return _response(response, self._name)

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        """`acompletion(stream=True, ...)`, each of litellm's chunks read as it arrives."""
        litellm = await self._lib.load()
        response = await litellm.acompletion(
            **request.params(),
            **self._params,
            num_retries=0,
            stream=True,
            stream_options={"include_usage": True},
        )
        try:
            async for chunk in response:
                yield _chunk(chunk)
        finally:
            # A stream left early (/stop, a timeout) closes its connection now.
            aclose = getattr(response, "aclose", None)
            if aclose is not None:
                await aclose()

    async def embed(self, texts: list[str]) -> tuple[list[list[float]], dict[str, int]]:
        """One vector per text, in order, and the usage the provider reported."""
        response = await (await self._lib.load()).aembedding(input=texts, **self._params)
        items = sorted(response.data, key=lambda item: _get(item, "index") or 0)
        return [list(_get(item, "embedding")) for item in items], _usage(response)

    async def transcribe(self, filename: str, data: bytes) -> tuple[str, dict[str, int]]:
        """Speech to text (e.g. `openai/whisper-1`), and the usage the provider reported."""
        response = await (await self._lib.load()).atranscription(
            file=(filename, data), **self._params
        )
        return str(getattr(response, "text", None) or "").strip(), _usage(response)

    def failure(self, exc: Exception) -> Failure:
        """`exc` as a Failure: what kind of provider failure litellm's type says it is."""
        litellm = self._lib.get()
        kind: Kind = next(
            (k for name, k in _KINDS if isinstance(exc, getattr(litellm, name))), "other"
        )
        message = str(getattr(exc, "message", "") or exc)
        _, sep, tail = message.rpartition("Exception - ")
        headers = getattr(exc, "litellm_response_headers", None)
        if headers is None:
            headers = getattr(getattr(exc, "response", None), "headers", None)
        return Failure(
            kind=kind,
            status=getattr(exc, "status_code", None),
            detail=tail if sep else message,
            type_name=type(exc).__name__,
            retry_after=retry_after(headers),
        )


def _get(item: Any, name: str) -> Any:
    """An embedding item's field. litellm's `EmbeddingResponse.data` is an untyped list:
    dicts from an OpenAI-compatible server, objects from some other providers."""
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def _usage(response: Any) -> dict[str, int]:
    usage = getattr(response, "usage", None)
    if isinstance(usage, dict):  # some responses (transcriptions) keep it a plain dict
        return usage_from(usage)
    counts = {key: int(getattr(usage, key, 0) or 0) for key in USAGE_KEYS}
    cached = getattr(getattr(usage, "prompt_tokens_details", None), "cached_tokens", None)
    if isinstance(cached, int) and cached:
        counts["cached_tokens"] = cached
    return counts


def _response(response: Any, model: str) -> LLMResponse:
    """litellm's ModelResponse (choice 0) as the protocol's response."""
    usage = _usage(response)
    if not response.choices:
        return LLMResponse(None, [], "", usage, model)
    choice = response.choices[0]
    message = choice.message
    calls = [
        tool_call(call.id, call.function.name, call.function.arguments)
        for call in message.tool_calls or []
    ]
    return LLMResponse(message.content, calls, choice.finish_reason or "", usage, model)


def _chunk(chunk: Any) -> Chunk:
    """One of litellm's ModelResponseStream chunks; choices other than 0 are dropped."""
    text, pieces, reason = "", [], None
    for choice in chunk.choices or []:
        if (choice.index or 0) != 0:
            continue
        reason = choice.finish_reason or reason
        delta = choice.delta
        if delta is None:
            continue
        if isinstance(delta.content, str):
            text += delta.content
        for call in delta.tool_calls or []:
            function = call.function
            arguments = function.arguments if function is not None else None
            whole = arguments is not None and not isinstance(arguments, str)
            pieces.append(
                ToolCallPiece(
                    call.index if isinstance(call.index, int) else None,
                    call.id or None,
                    (function.name or None) if function is not None else None,
                    json.dumps(arguments) if whole else arguments,
                    whole,
                )
            )
    usage = _usage(chunk) if getattr(chunk, "usage", None) else None
    return Chunk(text, tuple(pieces), str(reason) if reason else None, usage)
