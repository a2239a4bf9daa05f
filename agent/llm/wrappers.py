"""Retries and fallbacks, as small classes around the model protocol.

    Fallback([Retrying(model, policy) for model in (primary, *fallbacks)], scrub)

`Retrying` holds one `Model` and runs each call up to 1 + agent.max_retries times
(kernel.retry's loop and backoff), each attempt bounded by agent.request_timeout; the
model's own `failure` describes what went wrong and agent/llm/failures.py decides whether
that is worth another attempt, another model, or the end of the call. `Fallback` holds
the retrying models in order and moves to the next when one gives up (`NextModel`).

Their unit is a whole answer, streamed or not: a stream that fails midway is retried as
a whole, its listener told to start over (`Relay`), so a wrapper's `complete` takes the
call's relay, if any, beside the request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from clawgate.agent.llm.failures import (
    Failure,
    NextModel,
    Scrubber,
    classify,
    refusal,
    unavailable,
)
from clawgate.agent.llm.protocol import LLMResponse, Model, ModelRequest
from clawgate.agent.llm.stream import Relay, StreamCut
from clawgate.kernel.retry import Backoff, RetriesExhausted, Retry, retrying

log = logging.getLogger("clawgate.agent.llm")

# 1, 2, 4 ... s between attempts; a server's Retry-After is honoured up to the same cap.
BACKOFF = Backoff(first=1.0, factor=2.0, cap=30.0)
# A refused or unresolvable api_base is tried this often before it is called a setting error.
_UNREACHABLE_ATTEMPTS = 2
# A stream that stops without an error and without finishing, as a path would describe it.
_CUT = Failure("connection", None, "the stream was cut off mid-answer", "APIConnectionError")

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How one client retries: from its `AgentConfig`, plus the clock it is given."""

    attempts: int  # 1 + agent.max_retries
    timeout: float  # agent.request_timeout, per attempt (a stream's pushed back per chunk)
    api_base: str | None  # named in the message when it cannot be reached
    scrub: Scrubber
    key_env: str | None = None  # agent.api_key_env: named in the message when a key is missing
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep


class Retrying:
    """One model, each call retried by `policy`; raises NextModel when the model gave up."""

    def __init__(self, inner: Model, policy: RetryPolicy) -> None:
        self.inner = inner
        self._policy = policy

    async def complete(self, request: ModelRequest, relay: Relay | None = None) -> LLMResponse:
        """The answer; streamed through `relay` when one is given."""
        if relay is None:
            return await self.call(lambda: self.inner.complete(request))
        return await self.call(
            lambda: relay.collect(self.inner.stream(request), self.inner.name), relay
        )

    async def call(self, attempt: Callable[[], Awaitable[T]], relay: Relay | None = None) -> T:
        """Run `attempt` (a call to the inner model) under the policy."""
        policy, model = self._policy, self.inner.name
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
                async with asyncio.timeout(policy.timeout) as deadline:
                    if relay is not None:
                        relay.deadline = deadline
                    return await attempt()
            except TimeoutError:
                raise Retry("timed out") from None
            except Exception as exc:
                failure = _CUT if isinstance(exc, StreamCut) else self.inner.failure(exc)
                retry = classify(model, failure, policy.scrub, policy.key_env)
                if retry is None:
                    raise  # not a provider failure: a bug, keep its traceback
                reason = refusal(exc) if policy.api_base else None
                if reason is None:
                    raise retry from None
                unreachable += 1
                if unreachable < _UNREACHABLE_ATTEMPTS:
                    raise retry from None
                raise NextModel(
                    model,
                    f"could not connect ({reason})",
                    unreachable,
                    f"Could not connect to agent.api_base {policy.api_base} ({reason}); "
                    "check agent.api_base.",
                ) from None

        def log_retry(number: int, failure: Retry, delay: float) -> None:
            log.warning(
                "model %s attempt %d/%d failed after %.1f s: %s; retrying in %.1f s",
                model,
                number,
                policy.attempts,
                time.monotonic() - started,
                failure.reason,
                delay,
            )

        try:
            return await retrying(
                once,
                attempts=policy.attempts,
                backoff=BACKOFF,
                sleep=policy.sleep,
                on_retry=log_retry,
            )
        except RetriesExhausted as exhausted:
            reason = exhausted.last.reason
            log.warning("model %s failed %d times: %s", model, policy.attempts, reason)
            raise NextModel(model, reason, policy.attempts) from None


class Fallback:
    """Models in order: the first answer wins; when all give up, one ModelUnavailable."""

    def __init__(self, models: Sequence[Retrying], scrub: Scrubber) -> None:
        self.models = models
        self._scrub = scrub

    async def complete(self, request: ModelRequest, relay: Relay | None = None) -> LLMResponse:
        failures: list[NextModel] = []
        for model in self.models:
            try:
                return await model.complete(request, relay)
            except NextModel as exc:
                failures.append(exc)
        raise unavailable(failures, self._scrub)
