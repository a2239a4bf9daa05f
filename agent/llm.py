"""The one place that talks to a model: litellm underneath, our retry policy on top.

litellm is imported on the first call, never at module import: it costs seconds and
~190 MB, and commands that never call a model (`clawgate --help`) must not pay for it.
Failures leave this module as `ModelUnavailable` (or `ContextOverflow`) with a one-line
message a person can read; the API key never appears in them.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn, TypeVar

from clawgate.kernel.config import AgentConfig
from clawgate.kernel.errors import ModelUnavailable
from clawgate.kernel.retry import Backoff, RetriesExhausted, Retry, retrying

log = logging.getLogger(__name__)

# 1, 2, 4 ... s between attempts; a server's Retry-After is honoured up to the same cap.
BACKOFF = Backoff(first=1.0, factor=2.0, cap=30.0)
_CONTEXT_MARKERS = ("context length", "context_length_exceeded", "context window")
# litellm raises these (often as HTTP 500 or 400) before any request leaves the machine.
_KEY_MARKERS = ("missing credentials", "api key", "api_key", "apikey")
_MODEL_MARKERS = ("model not found", "llm provider not provided", "does not exist")
_KEY_HINT = "agent.api_key in the config or the CLAWGATE_AGENT__API_KEY environment variable"
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


class ContextOverflow(ModelUnavailable):
    """The provider says the request exceeds the model's context window; retrying cannot help."""


class ModelMisconfigured(ModelUnavailable):
    """A setting is wrong (key, model name, api_base): waiting and retrying cannot help."""


def failure_reply(exc: ModelUnavailable) -> str:
    """What a person reads when a turn found no model: the cause, and whether waiting helps."""
    cause = str(exc).rstrip(" .")
    if isinstance(exc, ModelMisconfigured):
        return f"Sorry, I couldn't reach the model: {cause}. Your message is saved."
    return (
        f"Sorry, I couldn't reach the model: {cause}. Your message is saved; try again in a moment."
    )


class _NextModel(Exception):
    """This model gave no answer, but a fallback might; `attempts` is None if not retried."""

    def __init__(
        self, model: str, reason: str, attempts: int | None, hint: str | None = None
    ) -> None:
        super().__init__(reason)
        self.model = model
        self.reason = reason
        self.attempts = attempts
        self.hint = hint  # set when a setting is at fault: the sentence that says which

    def describe(self) -> str:
        tries = f" after {self.attempts} attempts" if self.attempts else ""
        return f"{self.model}: {self.reason}{tries}"


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
        failures: list[_NextModel] = []
        for name in models:

            async def attempt(name: str = name) -> Any:
                with _unlogged(litellm):
                    return await litellm.acompletion(model=name, **params)

            try:
                response = await self._with_retries(name, attempt)
            except _NextModel as exc:
                failures.append(exc)
                continue
            return _to_response(response, name)
        raise self._unavailable(failures)

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
        except _NextModel as exc:
            raise self._unavailable([exc]) from None

    def _unavailable(self, failures: list[_NextModel]) -> ModelUnavailable:
        hints = [f.hint for f in failures if f.hint]
        if len(hints) == len(failures):
            kind: type[ModelUnavailable] = ModelMisconfigured
            message = hints[0] if len(failures) == 1 else f"{_summary(failures)}. {hints[0]}"
        else:
            kind, message = ModelUnavailable, _summary(failures)
        return kind(self._scrub(message))

    @property
    def _attempts(self) -> int:
        return 1 + self._config.max_retries

    async def _with_retries(self, model: str, attempt: Callable[[], Awaitable[T]]) -> T:
        """Run `attempt` up to 1 + max_retries times; raise _NextModel when they all fail."""
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
                retry = self._classify(model, exc)
                refusal = _refusal(exc) if self._config.api_base else None
                if refusal is None:
                    raise retry from None
                unreachable += 1
                if unreachable < _UNREACHABLE_ATTEMPTS:
                    raise retry from None
                raise _NextModel(
                    model,
                    f"could not connect ({refusal})",
                    unreachable,
                    f"Could not connect to agent.api_base {self._config.api_base} ({refusal}); "
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
            raise _NextModel(model, reason, self._attempts) from None

    def _classify(self, model: str, exc: Exception) -> Retry:
        """Return a retryable failure, or raise what ends this call (or this model)."""
        litellm = self._lib()
        status = getattr(exc, "status_code", None)
        detail = self._provider_detail(exc)
        if isinstance(exc, litellm.ContextWindowExceededError) or (
            isinstance(exc, litellm.BadRequestError)
            and any(marker in detail.lower() for marker in _CONTEXT_MARKERS)
        ):
            self._fail(
                ContextOverflow,
                f"The conversation is too long for the context window of {model}: send /compact "
                "or /new, or set agent.context_window_tokens to the model's real window.",
                exc,
            )
        # The scrubbed key reads "[api key]"; it must not pass for a complaint about keys.
        lowered = detail.lower().replace("[api key]", "")
        if (
            isinstance(exc, litellm.AuthenticationError)
            or status == 401
            or (
                not isinstance(exc, litellm.RateLimitError)
                and any(marker in lowered for marker in _KEY_MARKERS)
            )
        ):
            self._fail(ModelMisconfigured, _key_message(model, lowered), exc)
        if isinstance(exc, litellm.PermissionDeniedError) or status == 403:
            self._fail(
                ModelMisconfigured,
                f"The model provider refused access to {model}: check that agent.api_key "
                "(CLAWGATE_AGENT__API_KEY) may use it, or choose another agent.model.",
                exc,
            )
        if isinstance(exc, litellm.RateLimitError):
            return Retry("rate limited (HTTP 429)", _retry_after(exc))
        if isinstance(exc, litellm.Timeout):
            return Retry("timed out")
        if isinstance(exc, litellm.APIConnectionError):
            return Retry("could not connect")
        if (
            isinstance(exc, litellm.NotFoundError)
            or status == 404
            or (
                isinstance(exc, litellm.BadRequestError)
                and any(marker in lowered for marker in _MODEL_MARKERS)
            )
        ):
            raise _NextModel(
                model,
                f"not found ({detail})" if detail else "not found",
                None,
                _model_message(model, lowered),
            )
        if isinstance(status, int) and status >= 500:
            # litellm reports a refused connection as a 500 "Connection error."
            reason = "could not connect" if "connection error" in detail.lower() else None
            return Retry(reason or f"server error (HTTP {status})", _retry_after(exc))
        if isinstance(exc, litellm.BadRequestError | litellm.UnprocessableEntityError):
            suffix = f": {detail}" if detail else ""
            self._fail(
                ModelUnavailable, f"The model provider rejected the request to {model}{suffix}", exc
            )
        if isinstance(exc, litellm.APIError | litellm.OpenAIError):
            self._fail(
                ModelUnavailable,
                f"The model {model} failed: {type(exc).__name__}{f': {detail}' if detail else ''}",
                exc,
            )
        raise exc  # not a provider failure: a bug, keep its traceback

    def _fail(self, kind: type[ModelUnavailable], message: str, exc: Exception) -> NoReturn:
        log.warning("%s (%s)", self._scrub(message), type(exc).__name__)
        # `from None`: the provider's exception text may echo request details, key included.
        raise kind(self._scrub(message)) from None

    def _provider_detail(self, exc: Exception) -> str:
        """The provider's own words, without litellm's layered prefixes, on one short line."""
        message = str(getattr(exc, "message", "") or exc)
        _, sep, tail = message.rpartition("Exception - ")
        text = self._scrub(" ".join((tail if sep else message).split()))
        # Scrub before cutting: a key split by the cut would no longer match.
        return text if len(text) <= 200 else text[:199] + "…"

    def _scrub(self, text: str) -> str:
        if self._api_key:
            text = text.replace(self._api_key, "[api key]")
        return text


def _key_message(model: str, detail: str) -> str:
    if "missing" in detail or "no key" in detail:
        return f"No API key is set for {model}: set {_KEY_HINT}."
    return f"The model provider rejected the API key for {model}: check {_KEY_HINT}."


def _model_message(model: str, detail: str) -> str:
    if "provider not provided" in detail:
        return (
            f"The model name {model} does not say which provider serves it: set agent.model "
            "with a provider prefix, e.g. openai/gpt-4o-mini."
        )
    return f"The model provider does not know the model {model}: check agent.model."


def _refusal(exc: BaseException) -> str | None:
    """'connection refused' or 'host not found' when the failure is one, else None."""
    seen: BaseException | None = exc
    for _ in range(10):  # the chain is short; the bound guards against a cycle
        if seen is None:
            return None
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused"
        if isinstance(seen, socket.gaierror):
            return "host not found"
        seen = seen.__cause__ or seen.__context__
    return None


def _summary(failures: list[_NextModel]) -> str:
    if len(failures) > 1:
        return "No model answered: " + "; ".join(f.describe() for f in failures)
    only = failures[0]
    if only.attempts is None:
        return f"The model {only.model} is not available: {only.reason}"
    return f"The model {only.model} did not answer after {only.attempts} attempts: {only.reason}"


def _retry_after(exc: Exception) -> float | None:
    headers = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
    if not headers:
        return None
    try:
        if (millis := headers.get("retry-after-ms")) is not None:
            return float(millis) / 1000
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return float(value)
        except ValueError:
            moment = email.utils.parsedate_to_datetime(value)
            return moment.timestamp() - time.time()
    except (TypeError, ValueError):
        return None


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
