"""The litellm path: every provider litellm knows, imported on first use.

litellm is imported on the first call, never at module import: it costs seconds and
~190 MB, and commands that never call a model (`clawgate --help`) must not pay for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from types import ModuleType
from typing import Any

from clawgate.agent.llm_failures import Failure, Kind, retry_after

log = logging.getLogger("clawgate.agent.llm")

# Where litellm keeps the loggers a user may register; all empty unless someone sets one.
_CALLBACK_LISTS = (
    "callbacks",
    "input_callback",
    "success_callback",
    "failure_callback",
    "_async_input_callback",
    "_async_success_callback",
    "_async_failure_callback",
)


def import_litellm() -> ModuleType:
    # Without this litellm fetches its cost map over the network at import time.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
        logging.getLogger(name).setLevel(logging.WARNING)
    return litellm


def _unlogged(litellm: ModuleType) -> contextlib.AbstractContextManager[None]:
    """Where no litellm callback is registered, run the call as litellm runs its own sub-calls.

    After every response litellm otherwise builds a logging payload and schedules success
    handlers that no one receives (~1 ms of CPU per call, bench/model_call.py). The switch is
    litellm's internal one, so any litellm without it, or with a callback set, logs as usual.
    """
    if any(getattr(litellm, name, None) for name in _CALLBACK_LISTS):
        return contextlib.nullcontext()
    try:
        from litellm._internal_context import internal_sub_call
    except ImportError:
        return contextlib.nullcontext()
    return internal_sub_call()


class LitellmPath:
    """Calls one litellm endpoint function; loads litellm once, on demand or in the background."""

    def __init__(self) -> None:
        self._litellm: ModuleType | None = None

    def lib(self) -> ModuleType:
        if self._litellm is None:
            self._litellm = import_litellm()
        return self._litellm

    @property
    def ready(self) -> bool:
        return self._litellm is not None

    async def warm_up(self) -> None:
        if self._litellm is not None:
            return
        try:
            self._litellm = await asyncio.to_thread(import_litellm)
        except Exception:
            log.exception("loading litellm in the background failed")

    async def call(self, function: str, **arguments: Any) -> Any:
        litellm = self.lib()
        with _unlogged(litellm):
            return await getattr(litellm, function)(**arguments)

    async def stream(self, **arguments: Any) -> AsyncIterator[Any]:
        """`acompletion(stream=True, ...)`, yielding litellm's chunks as they arrive."""
        litellm = self.lib()
        # Entered and left in the consumer's task: the caller closes this generator itself.
        with _unlogged(litellm):
            response = await litellm.acompletion(stream=True, **arguments)
            try:
                async for chunk in response:
                    yield chunk
            finally:
                # A stream left early (/stop, a timeout) closes its connection now.
                aclose = getattr(response, "aclose", None)
                if aclose is not None:
                    await aclose()

    def failure(self, exc: Exception) -> Failure:
        """`exc` as a Failure: what kind of provider failure litellm's type says it is."""
        litellm = self.lib()
        # Most specific first: litellm's context error is a BadRequestError too.
        kinds: tuple[tuple[str, Kind], ...] = (
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
        kind: Kind = next(
            (k for name, k in kinds if isinstance(exc, getattr(litellm, name))), "other"
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
