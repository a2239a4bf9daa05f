"""Which session, trust and purpose a model call is for, without threading them through
every signature between the caller and `LLMClient`: a context variable the caller sets
around its calls (`tagged`), read by the client when it meters and checks a call. Tasks
started inside a tagged block inherit the tag; a block inside another changes only the
fields it names."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Literal

from clawgate.kernel.bus import Trust

Purpose = Literal[
    "chat",
    "consolidation",
    "flush",
    "compaction",
    "heartbeat",
    "cron",
    "embedding",
    "transcription",
    "check",
    "other",
]
SCHEDULED: frozenset[str] = frozenset({"heartbeat", "cron"})


@dataclass(frozen=True)
class CallTag:
    # "other" by default: a call nobody tagged shows up as such in the ledger.
    purpose: Purpose = "other"
    session_key: str | None = None
    trust: Trust | None = None


UNTAGGED = CallTag()
_current: ContextVar[CallTag] = ContextVar("spend_call_tag", default=UNTAGGED)


def current() -> CallTag:
    return _current.get()


@contextmanager
def tagged(
    purpose: Purpose | None = None,
    *,
    session_key: str | None = None,
    trust: Trust | None = None,
) -> Iterator[CallTag]:
    """Calls inside the block carry these fields (the others stay as the outer tag had them)."""
    tag = _current.get()
    changes: dict[str, object] = {}
    if purpose is not None:
        changes["purpose"] = purpose
    if session_key is not None:
        changes["session_key"] = session_key
    if trust is not None:
        changes["trust"] = trust
    token = _current.set(replace(tag, **changes))  # type: ignore[arg-type]
    try:
        yield _current.get()
    finally:
        _current.reset(token)


def purpose_of_channel(channel: str) -> Purpose:
    """A turn's purpose from its session's channel: scheduled sessions are `cron:<id>` and
    `heartbeat:main`, everything else a chat."""
    if channel == "cron":
        return "cron"
    if channel == "heartbeat":
        return "heartbeat"
    return "chat"
