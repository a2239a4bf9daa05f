"""The one place that talks to a model: litellm underneath, our retry policy on top.

litellm is imported on the first call, never at module import: it costs seconds and
~190 MB, and commands that never call a model (`clawgate --help`) must not pay for it.
Failures leave this module as `ModelUnavailable` (or `ContextOverflow`) with a one-line
message a person can read; the API key never appears in them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from clawgate.agent.llm_errors import ContextOverflow as ContextOverflow
from clawgate.agent.llm_errors import ModelMisconfigured as ModelMisconfigured
from clawgate.agent.llm_errors import NextModel, classify, refusal, unavailable
from clawgate.agent.llm_errors import failure_reply as failure_reply
from clawgate.kernel.config import AgentConfig
from clawgate.kernel.errors import ModelUnavailable
from clawgate.kernel.retry import Backoff, RetriesExhausted, Retry, retrying
from clawgate.kernel.secrets import Redactor

log = logging.getLogger(__name__)

# 1, 2, 4 ... s between attempts; a server's Retry-After is honoured up to the same cap.
BACKOFF = Backoff(first=1.0, factor=2.0, cap=30.0)
# A refused or unresolvable api_base is tried this often before it is called a setting error.
_UNREACHABLE_ATTEMPTS = 2
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

T = TypeVar("T")


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the model produced it; the tool registry validates it


@dataclass(frozen=True)
class LLMResponse:
    content: str | None
    tool_calls: list[ToolCall]
    finish_reason: str
    usage: dict[str, int]
    model: str


def _import_litellm() -> ModuleType:
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


class LLMClient:
    """Chat completions and embeddings for one `AgentConfig`, with retries and fallbacks."""

    def __init__(
        self,
        config: AgentConfig,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._config = config
        self._sleep = sleep
        self._litellm: ModuleType | None = None
        self._api_key = config.api_key.get_secret_value() if config.api_key else None
        self._redact = Redactor([self._api_key] if self._api_key else [])

    def _lib(self) -> ModuleType:
        if self._litellm is None:
            self._litellm = _import_litellm()
        return self._litellm

    @property
    def ready(self) -> bool:
        """litellm is loaded: a call now pays no import."""
        return self._litellm is not None

    async def warm_up(self) -> None:
        """Load litellm in a thread, so the first reply after a start does not wait for it.

        A daemon calls this once its channels are up; a failure is only logged, since the
        first model call would meet (and report) it again.
        """
        if self._litellm is not None:
            return
        try:
            self._litellm = await asyncio.to_thread(_import_litellm)
        except Exception:
            log.exception("loading litellm in the background failed")

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        model: str | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> LLMResponse:
        """One completion from `model` (default: the configured one), then each fallback.

        Raises ContextOverflow when the conversation does not fit, ModelUnavailable when
        no model answered or the provider refused the request.
        """
        litellm = self._lib()
        params: dict[str, Any] = {
            "messages": messages,
            "api_base": self._config.api_base,
            "api_key": self._api_key,
            "temperature": self._config.temperature,
            "max_tokens": max_tokens or self._config.max_tokens,
            "timeout": self._config.request_timeout,
            # Retries are ours; the OpenAI SDK underneath would otherwise add two of its own.
            "num_retries": 0,
            "max_retries": 0,
        }
        if tools:
            params["tools"] = tools
        if tool_choice is not None:
            params["tool_choice"] = tool_choice

        models = [model or self._config.model, *self._config.fallback_models]
        failures: list[NextModel] = []
        for name in models:

            async def attempt(name: str = name) -> Any:
                with _unlogged(litellm):
                    return await litellm.acompletion(model=name, **params)

            try:
                response = await self._with_retries(name, attempt)
            except NextModel as exc:
                failures.append(exc)
                continue
            return _to_response(response, name)
        raise unavailable(failures, self._redact)

    async def check_model(self, model: str) -> str | None:
        """None when `model` can serve this gateway, else one line saying why not.

        A name litellm knows is taken without a call when no api_base is set; otherwise
        one one-token request (no retries, no fallbacks) asks the configured endpoint.
        """
        litellm = self._lib()
        if not self._config.api_base:
            try:
                litellm.get_model_info(model)
                return None
            except Exception:
                pass  # not in litellm's list: a provider may still serve it, so ask
        try:
            async with asyncio.timeout(self._config.request_timeout):
                with _unlogged(litellm):
                    await litellm.acompletion(
                        model=model,
                        messages=[{"role": "user", "content": "ping"}],
                        max_tokens=1,
                        api_base=self._config.api_base,
                        api_key=self._api_key,
                        timeout=self._config.request_timeout,
                        num_retries=0,
                        max_retries=0,
                    )
            return None
        except TimeoutError:
            return f"Could not check the model {model}: it did not answer in time."
        except Exception as exc:
            try:
                retry = classify(litellm, model, exc, self._redact)
            except NextModel:
                # Not the hint's "check agent.model": here the name came from /model.
                return f"The model provider does not know the model {model}."
            except ModelUnavailable as failed:
                return str(failed)
            return f"Could not check the model {model}: {retry.reason}."

    async def embed(self, texts: list[str], *, model: str) -> list[list[float]]:
        """One vector per text, in order; same retry policy as chat, no fallbacks."""
        if not texts:
            return []
        response = await self._call("aembedding", model, input=texts)
        items = sorted(response.data, key=lambda item: _field(item, "index") or 0)
        return [list(_field(item, "embedding")) for item in items]

    async def transcribe(self, path: Path, *, model: str) -> str:
        """Speech to text through litellm (e.g. `openai/whisper-1`); same retry policy."""
        data = await asyncio.to_thread(path.read_bytes)
        response = await self._call("atranscription", model, file=(path.name, data))
        return str(_field(response, "text") or "").strip()

    async def _call(self, function: str, model: str, **arguments: Any) -> Any:
        """One litellm endpoint call for one model, with our retries and no fallbacks."""
        call = getattr(self._lib(), function)

        async def attempt() -> Any:
            with _unlogged(self._lib()):
                return await call(
                    model=model,
                    api_base=self._config.api_base,
                    api_key=self._api_key,
                    timeout=self._config.request_timeout,
                    max_retries=0,
                    **arguments,
                )

        try:
            return await self._with_retries(model, attempt)
        except NextModel as exc:
            raise unavailable([exc], self._redact) from None

    @property
    def _attempts(self) -> int:
        return 1 + self._config.max_retries

    async def _with_retries(self, model: str, attempt: Callable[[], Awaitable[T]]) -> T:
        """Run `attempt` up to 1 + max_retries times; raise NextModel when they all fail."""
        started = time.monotonic()
        unreachable = 0

        async def once() -> T:
            nonlocal started, unreachable
            started = time.monotonic()
            try:
                # litellm's timeout bounds each read; this bounds the whole attempt.
                async with asyncio.timeout(self._config.request_timeout):
                    return await attempt()
            except TimeoutError:
                raise Retry("timed out") from None
            except Exception as exc:
                try:
                    retry = classify(self._lib(), model, exc, self._redact)
                except ModelUnavailable as failed:
                    log.warning("%s (%s)", failed, type(exc).__name__)
                    raise
                refused = refusal(exc) if self._config.api_base else None
                if refused is None:
                    raise retry from None
                unreachable += 1
                if unreachable < _UNREACHABLE_ATTEMPTS:
                    raise retry from None
                raise NextModel(
                    model,
                    f"could not connect ({refused})",
                    unreachable,
                    f"Could not connect to agent.api_base {self._config.api_base} ({refused}); "
                    "check agent.api_base.",
                ) from None

        def log_retry(number: int, failure: Retry, delay: float) -> None:
            log.warning(
                "model %s attempt %d/%d failed after %.1f s: %s; retrying in %.1f s",
                model,
                number,
                self._attempts,
                time.monotonic() - started,
                failure.reason,
                delay,
            )

        try:
            return await retrying(
                once,
                attempts=self._attempts,
                backoff=BACKOFF,
                sleep=self._sleep,
                on_retry=log_retry,
            )
        except RetriesExhausted as exhausted:
            reason = exhausted.last.reason
            log.warning("model %s failed %d times: %s", model, self._attempts, reason)
            raise NextModel(model, reason, self._attempts) from None


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def _to_response(response: Any, model: str) -> LLMResponse:
    usage_obj = _field(response, "usage")
    usage = {
        key: int(_field(usage_obj, key) or 0) if usage_obj is not None else 0
        for key in ("prompt_tokens", "completion_tokens", "total_tokens")
    }
    choices = _field(response, "choices") or []
    if not choices:
        return LLMResponse(None, [], "", usage, model)
    choice = choices[0]
    message = _field(choice, "message")
    calls = []
    for raw in (_field(message, "tool_calls") or []) if message is not None else []:
        function = _field(raw, "function")
        arguments = _field(function, "arguments")
        if arguments is None:
            arguments = "{}"
        elif not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        calls.append(
            ToolCall(
                id=_field(raw, "id") or f"call_{uuid.uuid4().hex[:12]}",
                name=_field(function, "name") or "",
                arguments=arguments,
            )
        )
    content = _field(message, "content") if message is not None else None
    return LLMResponse(content, calls, _field(choice, "finish_reason") or "", usage, model)
