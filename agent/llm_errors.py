"""What a model failure means and what a person reads about it.

`classify` sorts a litellm exception into "retry", "try the next model" or "give up";
`failure_reply` turns what is left into the chat's line. Provider text is redacted here
(`Redactor`: the API key in any letter case, token-shaped values) before it reaches a log,
a record or a reply, and only an owner ever reads it: other chats get `GENERIC_FAILURE`.
"""

from __future__ import annotations

import email.utils
import socket
import time
from types import ModuleType
from typing import NoReturn

from clawgate.kernel.bus import Trust
from clawgate.kernel.errors import ModelUnavailable
from clawgate.kernel.retry import Retry
from clawgate.kernel.secrets import Redactor

_CONTEXT_MARKERS = ("context length", "context_length_exceeded", "context window")
# litellm raises these (often as HTTP 500 or 400) before any request leaves the machine.
_KEY_MARKERS = ("missing credentials", "api key", "api_key", "apikey")
_MODEL_MARKERS = ("model not found", "llm provider not provided", "does not exist")
_KEY_HINT = "agent.api_key in the config or the CLAWGATE_AGENT__API_KEY environment variable"
# Provider text can name hosts, keys or request details: a shared chat never reads it.
GENERIC_FAILURE = (
    "Sorry, something went wrong talking to the model; the owner can see details in the logs."
)


class ContextOverflow(ModelUnavailable):
    """The provider says the request exceeds the model's context window; retrying cannot help."""


class ModelMisconfigured(ModelUnavailable):
    """A setting is wrong (key, model name, api_base): waiting and retrying cannot help."""


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
        tries = f" after {self.attempts} attempts" if self.attempts else ""
        return f"{self.model}: {self.reason}{tries}"


def unavailable(failures: list[NextModel], redact: Redactor) -> ModelUnavailable:
    """The one exception for a call where no model answered."""
    hints = [f.hint for f in failures if f.hint]
    if len(hints) == len(failures):
        kind: type[ModelUnavailable] = ModelMisconfigured
        message = hints[0] if len(failures) == 1 else f"{_summary(failures)}. {hints[0]}"
    else:
        kind, message = ModelUnavailable, _summary(failures)
    return kind(redact(message))


def provider_detail(exc: Exception, redact: Redactor) -> str:
    """The provider's own words, without litellm's layered prefixes, on one short line."""
    message = str(getattr(exc, "message", "") or exc)
    _, sep, tail = message.rpartition("Exception - ")
    text = redact(" ".join((tail if sep else message).split()))
    # Redact before cutting: a key split by the cut would no longer match.
    return text if len(text) <= 200 else text[:199] + "…"


def classify(litellm: ModuleType, model: str, exc: Exception, redact: Redactor) -> Retry:
    """Return a retryable failure, or raise what ends this call (`ModelUnavailable`) or this
    model (`NextModel`). Anything that is not a provider failure is re-raised: a bug."""
    status = getattr(exc, "status_code", None)
    detail = provider_detail(exc, redact)
    lowered = detail.lower()
    if isinstance(exc, litellm.ContextWindowExceededError) or (
        isinstance(exc, litellm.BadRequestError)
        and any(marker in lowered for marker in _CONTEXT_MARKERS)
    ):
        _fail(
            ContextOverflow,
            f"The conversation is too long for the context window of {model}: send /compact "
            "or /new, or set agent.context_window_tokens to the model's real window.",
            redact,
        )
    # A redacted key reads "[redacted]"; it must not pass for a complaint about keys.
    lowered = lowered.replace("[redacted]", "")
    if (
        isinstance(exc, litellm.AuthenticationError)
        or status == 401
        or (
            not isinstance(exc, litellm.RateLimitError)
            and any(marker in lowered for marker in _KEY_MARKERS)
        )
    ):
        _fail(ModelMisconfigured, _key_message(model, lowered), redact)
    if isinstance(exc, litellm.PermissionDeniedError) or status == 403:
        _fail(
            ModelMisconfigured,
            f"The model provider refused access to {model}: check that agent.api_key "
            "(CLAWGATE_AGENT__API_KEY) may use it, or choose another agent.model.",
            redact,
        )
    if isinstance(exc, litellm.RateLimitError):
        return Retry("rate limited (HTTP 429)", retry_after(exc))
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
        raise NextModel(
            model,
            f"not found ({detail})" if detail else "not found",
            None,
            _model_message(model, lowered),
        )
    if isinstance(status, int) and status >= 500:
        # litellm reports a refused connection as a 500 "Connection error."
        reason = "could not connect" if "connection error" in lowered else None
        return Retry(reason or f"server error (HTTP {status})", retry_after(exc))
    if isinstance(exc, litellm.BadRequestError | litellm.UnprocessableEntityError):
        suffix = f": {detail}" if detail else ""
        _fail(
            ModelUnavailable, f"The model provider rejected the request to {model}{suffix}", redact
        )
    if isinstance(exc, litellm.APIError | litellm.OpenAIError):
        _fail(
            ModelUnavailable,
            f"The model {model} failed: {type(exc).__name__}{f': {detail}' if detail else ''}",
            redact,
        )
    raise exc  # not a provider failure: a bug, keep its traceback


def _fail(kind: type[ModelUnavailable], message: str, redact: Redactor) -> NoReturn:
    # `from None`: the provider's exception text may echo request details, key included.
    raise kind(redact(message)) from None


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


def _summary(failures: list[NextModel]) -> str:
    if len(failures) > 1:
        return "No model answered: " + "; ".join(f.describe() for f in failures)
    only = failures[0]
    if only.attempts is None:
        return f"The model {only.model} is not available: {only.reason}"
    return f"The model {only.model} did not answer after {only.attempts} attempts: {only.reason}"


def retry_after(exc: Exception) -> float | None:
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
