"""What a failed model call means, whichever path made it: retry, next model, or stop.

Every model path first describes a failure as one `Failure` (its `Model.failure`: litellm's
exception types, the direct path's HTTP statuses, a FunctionModel's scripted status);
`classify` alone decides what follows from it (agent/llm/wrappers.py acts on that), so the
paths cannot drift apart in what they retry or how they name a wrong setting.

    Failure ──classify──> Retry            transient: the retry loop tries again
                      ├─> NextModel        this model cannot answer; a fallback might
                      └─> ModelUnavailable the call ends (ContextOverflow, ModelMisconfigured)
"""

from __future__ import annotations

import email.utils
import logging
import re
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

from clawgate.kernel.errors import (
    ContextOverflow,
    ModelMisconfigured,
    ModelUnavailable,
    tries,
)
from clawgate.kernel.retry import Retry
from clawgate.kernel.secrets import Redactor

log = logging.getLogger("clawgate.agent.llm")

_CONTEXT_MARKERS = ("context length", "context_length_exceeded", "context window")
# litellm raises these (often as HTTP 500 or 400) before any request leaves the machine.
_KEY_MARKERS = ("missing credentials", "api key", "api_key", "apikey")
_MODEL_MARKERS = ("model not found", "llm provider not provided", "does not exist")
_KEY_HINT = "agent.api_key in the config or the CLAWGATE_AGENT__API_KEY environment variable"
# A provider (or litellm, before sending) refusing one parameter of the request: OpenAI's
# "Unsupported value: 'temperature' does not support 0.7", litellm's "o3-mini doesn't support
# temperature=0.7. Only temperature=1 is supported".
_REFUSED = re.compile(
    r"unsupported (value|parameter|param)|not supported|(does not|doesn't|don't|do not) support"
)
_PARAMETER = re.compile(r"\b(temperature|max_completion_tokens|max_tokens|tool_choice|tools)\b")
# What the owner changes when a model refuses a parameter, by the parameter it refused.
_PARAMETER_FIX = {
    "temperature": "remove agent.temperature (or CLAWGATE_AGENT__TEMPERATURE) so the model "
    "uses its own, or set a value it accepts",
    "max_tokens": "set agent.max_tokens to a value it accepts",
    "max_completion_tokens": "set agent.max_tokens to a value it accepts",
    "tool_choice": "the assistant needs tool calls, so choose another model",
    "tools": "the assistant needs tool calls, so choose another model",
}

# What kind of provider failure this is, as far as the path can tell without reading words.
Kind = Literal[
    "context",  # the provider named a context-window overflow
    "bad_request",  # HTTP 400
    "unprocessable",  # HTTP 422
    "auth",  # HTTP 401, or no key at all
    "forbidden",  # HTTP 403
    "not_found",  # HTTP 404
    "rate_limit",  # HTTP 429
    "timeout",
    "connection",  # refused, reset, or cut off mid-body
    "api",  # any other provider failure (5xx, unreadable body)
    "other",  # not known as a provider failure: unless its words say otherwise, a bug
]


@dataclass(frozen=True)
class Failure:
    """One failed call as a path saw it; `detail` is the provider's own words, unscrubbed."""

    kind: Kind
    status: int | None
    detail: str
    type_name: str  # what the failure is called in messages and logs
    retry_after: float | None = None


class NextModel(Exception):
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
        after = f" after {tries(self.attempts)}" if self.attempts else ""
        return f"{self.model}: {self.reason}{after}"


class Scrubber:
    """Takes secrets out of every text that leaves the model layer: the API key in any letter
    case and anything token-shaped (the kernel's one `Redactor`)."""

    def __init__(self, api_key: str | None) -> None:
        self._redact = Redactor([api_key] if api_key else [])

    def __call__(self, text: str) -> str:
        return self._redact(text)

    def detail(self, raw: str) -> str:
        """The provider's words on one short line, key removed before the cut."""
        text = self(" ".join(raw.split()))
        # Scrub before cutting: a key split by the cut would no longer match.
        return text if len(text) <= 200 else text[:199] + "…"

    def fail(self, kind: type[ModelUnavailable], message: str, type_name: str) -> NoReturn:
        log.warning("%s (%s)", self(message), type_name)
        # `from None`: the provider's exception text may echo request details, key included.
        raise kind(self(message)) from None


def classify(
    model: str, failure: Failure, scrub: Scrubber, key_env: str | None = None
) -> Retry | None:
    """Return a retryable failure, or raise what ends this call (or this model). `key_env`
    (agent.api_key_env) is the place a key message names, when the owner chose one.

    None: the failure is no provider's (kind "other"); the caller re-raises it as a bug.
    """
    kind, status = failure.kind, failure.status
    detail = scrub.detail(failure.detail)
    if kind == "context" or (
        kind == "bad_request" and any(marker in detail.lower() for marker in _CONTEXT_MARKERS)
    ):
        scrub.fail(
            ContextOverflow,
            f"The conversation is too long for the context window of {model}: send /compact "
            "or /new, or set agent.context_window_tokens to the model's real window.",
            failure.type_name,
        )
    # A redacted secret reads "[REDACTED]"; it must not pass for a complaint about keys.
    lowered = detail.lower().replace("[redacted]", "")
    if kind in ("bad_request", "unprocessable") and (parameter := _refused_parameter(lowered)):
        # A setting, not an outage: waiting will not help, another model may accept it.
        log.warning("%s refused the request's %s: %s", model, parameter, detail)
        raise NextModel(
            model,
            f"refused the request's {parameter}",
            None,
            f"The model {model} does not accept the request's {parameter}: "
            f"{_PARAMETER_FIX[parameter]}.",
        )
    if (
        kind == "auth"
        or status == 401
        or (kind != "rate_limit" and any(marker in lowered for marker in _KEY_MARKERS))
    ):
        scrub.fail(ModelMisconfigured, _key_message(model, lowered, key_env), failure.type_name)
    if kind == "forbidden" or status == 403:
        scrub.fail(
            ModelMisconfigured,
            f"The model provider refused access to {model}: check that the key in "
            f"{key_env or 'agent.api_key (CLAWGATE_AGENT__API_KEY)'} may use it, or choose "
            "another agent.model.",
            failure.type_name,
        )
    if kind == "rate_limit":
        return Retry("rate limited (HTTP 429)", failure.retry_after)
    if kind == "timeout":
        return Retry("timed out")
    if kind == "connection":
        return Retry("could not connect")
    if (
        kind == "not_found"
        or status == 404
        or (kind == "bad_request" and any(marker in lowered for marker in _MODEL_MARKERS))
    ):
        raise NextModel(
            model,
            f"not found ({detail})" if detail else "not found",
            None,
            _model_message(model, lowered),
        )
    if isinstance(status, int) and status >= 500:
        # litellm reports a refused connection as a 500 "Connection error."
        reason = "could not connect" if "connection error" in detail.lower() else None
        return Retry(reason or f"server error (HTTP {status})", failure.retry_after)
    if kind in ("bad_request", "unprocessable"):
        suffix = f": {detail}" if detail else ""
        scrub.fail(
            ModelUnavailable,
            f"The model provider rejected the request to {model}{suffix}",
            failure.type_name,
        )
    if kind == "other":
        return None
    scrub.fail(
        ModelUnavailable,
        f"The model {model} failed: {failure.type_name}{f': {detail}' if detail else ''}",
        failure.type_name,
    )


def unavailable(failures: list[NextModel], scrub: Scrubber) -> ModelUnavailable:
    """The one exception a call raises once every model it tried has failed."""
    hints = [f.hint for f in failures if f.hint]
    if len(hints) == len(failures):
        kind: type[ModelUnavailable] = ModelMisconfigured
        message = hints[0] if len(failures) == 1 else f"{_summary(failures)}. {hints[0]}"
    else:
        kind, message = ModelUnavailable, _summary(failures)
    return kind(scrub(message))


def refusal(exc: BaseException) -> str | None:
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


def retry_after(headers: Mapping[str, Any] | None) -> float | None:
    """The delay a response's Retry-After (or retry-after-ms) header asks for, if any."""
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


def _refused_parameter(detail: str) -> str | None:
    """The parameter a refusal names (the first one, in the provider's words), if any."""
    if not _REFUSED.search(detail):
        return None
    found = _PARAMETER.search(detail)
    return found.group(1) if found else None


def _key_message(model: str, detail: str, key_env: str | None) -> str:
    missing = "missing" in detail or "no key" in detail
    if key_env and missing:
        return (
            f"No API key is set for {model}: agent.api_key_env names {key_env}, which is not "
            f"set in this environment: export {key_env}=... where clawgate runs."
        )
    if key_env:
        return f"The model provider rejected the API key for {model}: check the key in {key_env}."
    if missing:
        return f"No API key is set for {model}: set {_KEY_HINT}."
    return f"The model provider rejected the API key for {model}: check {_KEY_HINT}."


def _model_message(model: str, detail: str) -> str:
    if "provider not provided" in detail:
        return (
            f"The model name {model} does not say which provider serves it: set agent.model "
            "with a provider prefix, e.g. openai/gpt-4o-mini."
        )
    return f"The model provider does not know the model {model}: check agent.model."


def _summary(failures: list[NextModel]) -> str:
    if len(failures) > 1:
        return "No model answered: " + "; ".join(f.describe() for f in failures)
    only = failures[0]
    if only.attempts is None:
        return f"The model {only.model} is not available: {only.reason}"
    return f"The model {only.model} did not answer after {tries(only.attempts)}: {only.reason}"
