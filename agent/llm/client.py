"""`LLMClient`: the model layer as the rest of the agent sees it, composed from parts.

    chat ─> Fallback ─> Retrying ─> Model (a path: direct, litellm, or a FunctionModel)

agent/llm/routing.py decides which path serves each model name; each path speaks the
protocol of agent/llm/protocol.py and describes its own failures, agent/llm/failures.py
alone decides what they mean, and agent/llm/wrappers.py retries one model and falls back
to the next. So retries, fallbacks and the one-line messages are the same whichever path
served a call. It is also the one place every call passes: with a `Ledger` each call that
returned is recorded (agent/spend/), with a `Budget` each chat and transcription is checked
first, both for the session and purpose the caller tagged (agent/spend/scope.py). Failures leave this module as `ModelUnavailable` (or `ContextOverflow`,
`ModelMisconfigured`); the API key never appears in them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from clawgate.agent.llm.direct import DirectTransport
from clawgate.agent.llm.failures import ModelMisconfigured, NextModel, Scrubber, unavailable
from clawgate.agent.llm.litellm_path import LitellmLib
from clawgate.agent.llm.protocol import LLMResponse, Model, ModelRequest
from clawgate.agent.llm.routing import Router
from clawgate.agent.llm.stream import OnDelta, Relay
from clawgate.agent.llm.wrappers import Fallback, Retrying, RetryPolicy
from clawgate.agent.spend.budget import Budget
from clawgate.agent.spend.ledger import Ledger
from clawgate.agent.spend.scope import current, tagged
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import AgentConfig
from clawgate.kernel.errors import ModelUnavailable

T = TypeVar("T")
log = logging.getLogger(__name__)

# Provider text can name hosts, keys or request details: a shared chat never reads it.
GENERIC_FAILURE = (
    "Sorry, something went wrong talking to the model; the owner can see details in the logs."
)


def failure_reply(exc: ModelUnavailable, trust: Trust = Trust.OWNER) -> str:
    """What a person reads when a turn found no model: for the owner the cause and whether
    waiting helps; for everyone else one line that names nothing. The message stays in the
    transcript but no turn answers it later, so it must be sent again."""
    if not trust.is_owner:
        return GENERIC_FAILURE
    cause = str(exc).rstrip(" .")
    if isinstance(exc, ModelMisconfigured):
        return (
            f"Sorry, I couldn't reach the model: {cause}. Your message was not answered: "
            "send it again once that is fixed."
        )
    return (
        f"Sorry, I couldn't reach the model: {cause}. Your message was not answered: "
        "send it again in a moment."
    )


class LLMClient:
    """Chat completions, embeddings and speech for one `AgentConfig`, with retries and
    fallbacks. `models` serve the names they carry in-process (a FunctionModel), before
    any path is asked."""

    def __init__(
        self,
        config: AgentConfig,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        models: Sequence[Model] = (),
        ledger: Ledger | None = None,
        budget: Budget | None = None,
    ) -> None:
        self._config = config
        self._sleep = sleep
        self._in_process = tuple(models)
        self._ledger = ledger
        self._budget = budget
        api_key = config.api_key.get_secret_value() if config.api_key else None
        self._scrub = Scrubber(api_key)
        self._litellm = LitellmLib()
        self._direct = DirectTransport(config.request_timeout)
        self._router = Router(config, self._direct, self._litellm, self._in_process)
        self._policy = RetryPolicy(
            attempts=1 + config.max_retries,
            timeout=config.request_timeout,
            api_base=config.api_base,
            scrub=self._scrub,
            key_env=config.api_key_env,
            sleep=sleep,
        )

    @property
    def ready(self) -> bool:
        """What the configured models need is loaded: a call now pays no import."""
        if self._router.needs_litellm() and not self._litellm.ready:
            return False
        return self._direct.ready or not self._config.direct_http

    @property
    def litellm_loaded(self) -> bool:
        return self._litellm.ready

    async def warm_up(self) -> None:
        """Load what the configured models need in a thread, so the first reply after a start
        does not wait for it: aiohttp for the direct path (and its TLS trust store if an
        endpoint is https), litellm only if a model needs it (it costs seconds and ~190 MB,
        and an import cannot be cancelled at shutdown), then its first call's one-off work.

        A daemon calls this once its channels are up; a failure is only logged, since the
        first model call would meet (and report) it again.
        """
        if self._config.direct_http:
            await self._direct.warm_up(tls=self._router.direct_tls())
        if self._router.needs_litellm():
            await self._litellm.warm_up(self._router.litellm_chat_model())

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
        request = ModelRequest(
            messages=messages,
            temperature=self._config.temperature,
            max_tokens=max_tokens or self._config.max_tokens,
            tools=tools,
            tool_choice=tool_choice,
        )
        relay = Relay(on_delta, self._config.request_timeout) if on_delta is not None else None
        names = [model or self._config.model, *self._config.fallback_models]
        if self._budget is not None:
            await self._budget.check(current(), names[0])
        models = [Retrying(self._router.model(name, request), self._policy) for name in names]
        response = await Fallback(models, self._scrub).complete(request, relay)
        await self._meter(response.model, response.usage)
        return response

    async def _meter(self, model: str, usage: dict[str, int]) -> None:
        """The call's ledger record and the budget's 80 % warning. A record the disk refuses
        is logged, not raised: the answer was paid for and is worth more than its line."""
        if self._ledger is None:
            return
        try:
            await self._ledger.record(current(), model, usage)
        except OSError as exc:
            log.error("cannot write the usage ledger: %s", exc)
        if self._budget is not None:
            await self._budget.after_call(model)

    async def check_model(self, model: str) -> str | None:
        """None when `model` can serve this gateway, else one line saying why not.

        A name litellm knows is taken without a call when no api_base is set; otherwise one
        one-token request (no retries, no fallbacks) asks the configured endpoint.
        """
        in_process = any(m.name == model for m in self._in_process)
        if not in_process and not self._config.api_base and self._router.endpoint(model) is None:
            try:
                self._litellm.get().get_model_info(model)
                return None
            except Exception:
                pass  # not in litellm's list: a provider may still serve it, so ask
        probe = self._config.model_copy(
            update={"model": model, "fallback_models": [], "max_retries": 0}
        )
        client = LLMClient(probe, sleep=self._sleep, models=self._in_process, ledger=self._ledger)
        try:
            with tagged("check"):
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

    async def embed(self, texts: list[str], *, model: str) -> list[list[float]]:
        """One vector per text, in order; same retry policy as chat, no fallbacks."""
        if not texts:
            return []
        path = self._router.litellm(model)
        vectors, usage = await self._once(Retrying(path, self._policy), lambda: path.embed(texts))
        with tagged("embedding"):
            await self._meter(model, usage)
        return vectors

    async def transcribe(self, path: Path, *, model: str) -> str:
        """Speech to text through litellm (e.g. `openai/whisper-1`); same retry policy."""
        with tagged("transcription"):
            if self._budget is not None:
                await self._budget.check(current(), model)
            data = await asyncio.to_thread(path.read_bytes)
            speech = self._router.litellm(model)
            retrying = Retrying(speech, self._policy)
            text, usage = await self._once(retrying, lambda: speech.transcribe(path.name, data))
            await self._meter(model, usage)
        return text

    async def _once(self, model: Retrying, attempt: Callable[[], Awaitable[T]]) -> T:
        """One litellm call for one model, with our retries and no fallbacks."""
        try:
            return await model.call(attempt)
        except NextModel as exc:
            raise unavailable([exc], self._scrub) from None
