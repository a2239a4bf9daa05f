"""The one place that talks to a model: two paths underneath, our retry policy on top.

A chat completion to an OpenAI-compatible endpoint goes out as a plain POST on aiohttp
(agent/llm_direct.py); everything else goes through litellm (agent/llm_litellm.py), which
is imported on first use or in the background, never at module import. `agent.direct_http
= false` sends everything through litellm. Both paths describe their failures the same
way and agent/llm_failures.py alone decides what each means, so retries, fallbacks and the
one-line messages are the same whichever path served a call. Failures leave this module as
`ModelUnavailable` (or `ContextOverflow`, `ModelMisconfigured`); the API key never appears
in them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from clawgate.agent import llm_direct
from clawgate.agent.llm_direct import DirectPath, Endpoint
from clawgate.agent.llm_failures import (
    ContextOverflow,
    Failure,
    ModelMisconfigured,
    NextModel,
    Scrubber,
    classify,
    refusal,
    unavailable,
)
from clawgate.agent.llm_litellm import LitellmPath
from clawgate.agent.llm_stream import OnDelta, Relay, StreamCut, TextDelta
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import AgentConfig
from clawgate.kernel.errors import ModelUnavailable
from clawgate.kernel.retry import Backoff, RetriesExhausted, Retry, retrying

__all__ = [
    "GENERIC_FAILURE",
    "ContextOverflow",
    "LLMClient",
    "LLMResponse",
    "ModelMisconfigured",
    "OnDelta",
    "TextDelta",
    "ToolCall",
    "failure_reply",
]

log = logging.getLogger(__name__)

# 1, 2, 4 ... s between attempts; a server's Retry-After is honoured up to the same cap.
BACKOFF = Backoff(first=1.0, factor=2.0, cap=30.0)
# A refused or unresolvable api_base is tried this often before it is called a setting error.
_UNREACHABLE_ATTEMPTS = 2
# A stream that stops without an error and without finishing, as a path would describe it.
_CUT = Failure("connection", None, "the stream was cut off mid-answer", "APIConnectionError")

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


# Provider text can name hosts, keys or request details: a shared chat never reads it.
GENERIC_FAILURE = (
    "Sorry, something went wrong talking to the model; the owner can see details in the logs."
)


def failure_reply(exc: ModelUnavailable, trust: Trust = Trust.OWNER) -> str:
    """What a person reads when a turn found no model: for the owner the cause and whether
    waiting helps; for everyone else one line that names nothing."""
    if not trust.is_owner:
        return GENERIC_FAILURE
    cause = str(exc).rstrip(" .")
    if isinstance(exc, ModelMisconfigured):
        return f"Sorry, I couldn't reach the model: {cause}. Your message is saved."
    return (
        f"Sorry, I couldn't reach the model: {cause}. Your message is saved; try again in a moment."
    )


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
        self._api_key = config.api_key.get_secret_value() if config.api_key else None
        self._scrub = Scrubber(self._api_key)
        self._litellm = LitellmPath()
        self._direct = DirectPath(config.request_timeout)
        self._endpoints: dict[str, Endpoint | None] = {}

    def _lib(self) -> Any:
        return self._litellm.lib()

    def _endpoint(self, model: str) -> Endpoint | None:
        """The direct endpoint serving `model`, None for litellm; decided once per name."""
        if not self._config.direct_http:
            return None
        if model not in self._endpoints:
            self._endpoints[model] = llm_direct.endpoint(
                model, self._config.api_base, self._api_key
            )
        return self._endpoints[model]

    def _needs_litellm(self) -> bool:
        """Some configured call goes through litellm (a model off the direct path, speech)."""
        models = [self._config.model, *self._config.fallback_models]
        return bool(self._config.transcription_model) or any(
            self._endpoint(name) is None for name in models if name
        )

    @property
    def ready(self) -> bool:
        """What the configured models need is loaded: a call now pays no import."""
        if self._needs_litellm() and not self._litellm.ready:
            return False
        return self._direct.ready or not self._config.direct_http

    @property
    def litellm_loaded(self) -> bool:
        return self._litellm.ready

    async def warm_up(self) -> None:
        """Load what the configured models need in a thread, so the first reply after a start
        does not wait for it: aiohttp for the direct path, litellm only if a model needs it
        (it costs seconds and ~190 MB, and an import cannot be cancelled at shutdown).

        A daemon calls this once its channels are up; a failure is only logged, since the
        first model call would meet (and report) it again.
        """
        if self._config.direct_http:
            await self._direct.warm_up()
        if self._needs_litellm():
            await self._litellm.warm_up()

    async def aclose(self) -> None:
        """Close the direct path's connections (litellm keeps its own)."""
        await self._direct.aclose()

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        model: str | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        max_tokens: int | None = None,
        on_delta: OnDelta | None = None,
    ) -> LLMResponse:
        """One completion from `model` (default: the configured one), then each fallback.

        With `on_delta` the answer is streamed (`stream: true`, usage in the last chunk) and
        each piece of its text goes to `on_delta` as it arrives; the response returned is
        the same as without. Failures are classified, retried and passed to the fallbacks
        exactly as without streaming, also after text was sent: a person would rather see
        an answer start over than a half one end in an error. The first delta of such a
        new attempt has `restart` set, telling the listener to drop what it received.
        A stream that goes quiet for `request_timeout` counts as timed out; one that keeps
        sending may take longer.

        Raises ContextOverflow when the conversation does not fit, ModelUnavailable when
        no model answered or the provider refused the request.
        """
        body: dict[str, Any] = {
            "messages": messages,
            "temperature": self._config.temperature,
            "max_tokens": max_tokens or self._config.max_tokens,
        }
        if tools:
            body["tools"] = tools
        if tool_choice is not None:
            body["tool_choice"] = tool_choice
        relay = None
        if on_delta is not None:
            relay = Relay(on_delta, self._config.request_timeout)
            body["stream_options"] = {"include_usage": True}

        models = [model or self._config.model, *self._config.fallback_models]
        failures: list[NextModel] = []
        for name in models:
            target = self._endpoint(name)
            try:
                if target is not None and target.takes(messages):
                    attempt: Callable[[], Awaitable[Any]] = partial(
                        self._direct.complete, target, body
                    )
                    if relay is not None:
                        attempt = partial(_streamed, relay, self._direct.stream, target, body)
                    raw: Any = await self._with_retries(name, attempt, llm_direct.failure, relay)
                else:
                    params = {"model": name, **body, **self._litellm_params()}
                    attempt = partial(self._litellm.call, "acompletion", **params)
                    if relay is not None:
                        attempt = partial(_streamed, relay, self._litellm.stream, **params)
                    raw = await self._with_retries(name, attempt, self._litellm.failure, relay)
            except NextModel as exc:
                failures.append(exc)
                continue
            return _to_response(raw, name)
        raise unavailable(failures, self._scrub)

    async def check_model(self, model: str) -> str | None:
        """None when `model` can serve this gateway, else one line saying why not.

        A name litellm knows is taken without a call when no api_base is set; otherwise one
        one-token request (no retries, no fallbacks) asks the configured endpoint.
        """
        if not self._config.api_base and self._endpoint(model) is None:
            try:
                self._lib().get_model_info(model)
                return None
            except Exception:
                pass  # not in litellm's list: a provider may still serve it, so ask
        probe = self._config.model_copy(
            update={"model": model, "fallback_models": [], "max_retries": 0}
        )
        client = LLMClient(probe, sleep=self._sleep)
        try:
            await client.chat([{"role": "user", "content": "ping"}], max_tokens=1)
            return None
        except ModelMisconfigured as refused:
            if "agent.model" in str(refused):
                # The hint names the config key; here the name came from /model.
                return f"The model provider does not know the model {model}."
            return str(refused)
        except ModelUnavailable as failed:
            return f"Could not check the model {model}: {str(failed).rstrip('. ')}."
        finally:
            await client.aclose()

    def _litellm_params(self) -> dict[str, Any]:
        return {
            "api_base": self._config.api_base,
            "api_key": self._api_key,
            "timeout": self._config.request_timeout,
            # Retries are ours; the OpenAI SDK underneath would otherwise add two of its own.
            "num_retries": 0,
            "max_retries": 0,
        }

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
        params = self._litellm_params()
        del params["num_retries"]

        async def attempt() -> Any:
            return await self._litellm.call(function, model=model, **params, **arguments)

        try:
            return await self._with_retries(model, attempt, self._litellm.failure)
        except NextModel as exc:
            raise unavailable([exc], self._scrub) from None

    @property
    def _attempts(self) -> int:
        return 1 + self._config.max_retries

    async def _with_retries(
        self,
        model: str,
        attempt: Callable[[], Awaitable[T]],
        describe: Callable[[Exception], Failure],
        relay: Relay | None = None,
    ) -> T:
        """Run `attempt` up to 1 + max_retries times; raise NextModel when they all fail."""
        started = time.monotonic()
        unreachable = 0

        async def once() -> T:
            nonlocal started, unreachable
            started = time.monotonic()
            if relay is not None:
                relay.new_attempt()
            try:
                # The path's own timeout bounds each read; this bounds the whole attempt
                # (a stream pushes it back with every chunk).
                async with asyncio.timeout(self._config.request_timeout) as deadline:
                    if relay is not None:
                        relay.deadline = deadline
                    return await attempt()
            except TimeoutError:
                raise Retry("timed out") from None
            except Exception as exc:
                failure = _CUT if isinstance(exc, StreamCut) else describe(exc)
                retry = classify(model, failure, self._scrub)
                if retry is None:
                    raise  # not a provider failure: a bug, keep its traceback
                reason = refusal(exc) if self._config.api_base else None
                if reason is None:
                    raise retry from None
                unreachable += 1
                if unreachable < _UNREACHABLE_ATTEMPTS:
                    raise retry from None
                raise NextModel(
                    model,
                    f"could not connect ({reason})",
                    unreachable,
                    f"Could not connect to agent.api_base {self._config.api_base} ({reason}); "
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


async def _streamed(relay: Relay, stream: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """One streamed attempt on either path: its chunks played through `relay`."""
    return await relay.collect(stream(*args, **kwargs))


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
