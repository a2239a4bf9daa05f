"""Background consolidation: fold old session messages into HISTORY.md (and MEMORY.md).

The reply never waits for this. For one transcript at a time (single-flight per Session),
take the unconsolidated messages except the newest `memory_window // 2`, fix the cut-off
seq before calling the model, and advance `last_consolidated` to exactly that seq only
after HISTORY.md, the day's log and MEMORY.md are written. Any failure advances nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from clawgate.agent.llm import LLMClient, LLMResponse
from clawgate.agent.memory.store import MemoryStore
from clawgate.agent.session import Archived, Consolidation, Session, SessionStore
from clawgate.kernel.bus import Trust
from clawgate.kernel.errors import ModelUnavailable

log = logging.getLogger(__name__)

SAVE_MEMORY_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "save_memory",
        "description": "Save the consolidated memory of the conversation excerpt.",
        "parameters": {
            "type": "object",
            "properties": {
                "history_entry": {
                    "type": "string",
                    "description": "A paragraph summarising what happened and was decided, with "
                    "names, dates and numbers, so a later grep finds it.",
                },
                "memory_update": {
                    "type": "string",
                    "description": "The complete new MEMORY.md: the current one with durable new "
                    "facts merged in. Return it unchanged if nothing new is worth keeping.",
                },
            },
            "required": ["history_entry"],
        },
    },
}

OWNER_INSTRUCTIONS = (
    "You maintain the long-term memory of a personal assistant. Read the current MEMORY.md "
    "and the conversation excerpt, then call save_memory once: history_entry summarises the "
    "excerpt; memory_update is the full MEMORY.md with durable facts (preferences, people, "
    "projects, decisions) merged in. Keep every existing fact that is still true."
)
SHARED_INSTRUCTIONS = (
    "You keep the event log of a shared chat. Read the conversation excerpt, then call "
    "save_memory once with history_entry: a paragraph summarising what happened and was "
    "decided, with names, dates and numbers. Do not return memory_update."
)

TOOL_RESULT_CAP = 500
MAX_ENTRY_CHARS = 8_000
MAX_RAW_ARCHIVE_CHARS = 12_000
FAILURES_BEFORE_RAW = 3
_ERRORISH = re.compile(
    r"^\s*(error|exception|traceback|i'?m sorry|sorry,|i cannot|i can't|as an ai)\b", re.I
)


class ConsolidationRefused(Exception):
    """The model's answer was unusable; nothing was written."""


@dataclass
class _Failures:
    count: int = 0
    retry_at: float = 0.0


@dataclass(frozen=True)
class Outcome:
    ok: bool
    from_seq: int | None = None
    to_seq: int | None = None
    mode: str = ""  # "llm" or "raw"
    reason: str = ""


def format_messages(messages: list[dict[str, Any]]) -> str:
    """`[timestamp] ROLE [tools: a, b]: content`, one per line; empty contents skipped."""
    lines = []
    for message in messages:
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        text = text.strip()
        if message.get("role") == "tool" and len(text) > TOOL_RESULT_CAP:
            text = text[:TOOL_RESULT_CAP] + " [...]"
        calls = [c.get("function", {}).get("name", "?") for c in message.get("tool_calls") or []]
        tools = f" [tools: {', '.join(calls)}]" if calls else ""
        if not text and not tools:
            continue
        role = str(message.get("role", "?")).upper()
        lines.append(f"[{message.get('timestamp', '')}] {role}{tools}: {text}")
    return "\n".join(lines)


def choose_chunk(
    messages: list[dict[str, Any]], keep: int, *, archive_all: bool
) -> list[dict[str, Any]]:
    """The messages to consolidate: all but the newest `keep`, with the cut moved forward so
    a tool call is never separated from its results."""
    if archive_all:
        return list(messages)
    end = len(messages) - keep
    if end <= 0:
        return []
    while end < len(messages) and messages[end].get("role") == "tool":
        end += 1
    return messages[:end]


def _json_object_in(text: str) -> dict[str, Any] | None:
    decoder = json.JSONDecoder()
    for start in (m.start() for m in re.finditer(r"\{", text)):
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(value, dict) and "history_entry" in value:
            return value
    return None


def extract_arguments(response: LLMResponse) -> dict[str, Any]:
    """save_memory's arguments from a tool call, or from a JSON object in plain text."""
    raw: Any = None
    for call in response.tool_calls:
        if call.name == "save_memory":
            raw = call.arguments
            break
    if raw is None and response.tool_calls:
        raw = response.tool_calls[0].arguments
    if raw is None:
        found = _json_object_in(response.content or "")
        if found is None:
            raise ConsolidationRefused("the answer had no save_memory call and no JSON object")
        return found
    value: Any = raw
    for _ in range(2):  # a JSON string that itself holds JSON (double-encoded)
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                found = _json_object_in(value)
                if found is None:
                    raise ConsolidationRefused("save_memory arguments are not JSON") from None
                value = found
    if not isinstance(value, dict):
        raise ConsolidationRefused("save_memory arguments are not an object")
    return value


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _content_lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip() and not line.startswith("<!--"))


def validate(
    arguments: dict[str, Any], current_memory: str, *, owner: bool
) -> tuple[str, str | None]:
    """(history_entry, new MEMORY.md or None to keep it). Raises ConsolidationRefused."""
    entry = (_as_text(arguments.get("history_entry")) or "").strip()
    if not entry:
        raise ConsolidationRefused("empty history_entry")
    if _ERRORISH.match(entry):
        raise ConsolidationRefused(f"history_entry looks like an error: {entry[:80]!r}")
    if len(entry) > MAX_ENTRY_CHARS:
        raise ConsolidationRefused(f"history_entry too long ({len(entry)} characters)")
    if not owner:
        return entry, None
    update = _as_text(arguments.get("memory_update"))
    if update is None or not update.strip() or update.strip() == current_memory.strip():
        return entry, None
    limit = max(4 * len(current_memory), 20_000)
    if len(update) > limit:
        raise ConsolidationRefused(f"memory_update too long ({len(update)} characters)")
    before, after = _content_lines(current_memory), _content_lines(update)
    if before >= 4 and after < before / 2:
        raise ConsolidationRefused(
            f"memory_update would drop {before - after} of {before} lines of MEMORY.md"
        )
    return entry, update


def _slug(text: str) -> str:
    words = re.findall(r"[A-Za-z0-9]+", text.lower())[:6]
    return "-".join(words) or "session"


@dataclass
class Consolidator:
    """Owns every consolidation and archive task; the runtime awaits or cancels them."""

    store: MemoryStore
    sessions: SessionStore
    llm: LLMClient
    memory_window: int
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    backoff: tuple[float, ...] = (30.0, 120.0)
    _tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    _running: dict[int, asyncio.Task[Any]] = field(default_factory=dict)
    _locks: dict[int, asyncio.Lock] = field(default_factory=dict)
    _failures: dict[int, _Failures] = field(default_factory=dict)

    # Scheduling ---------------------------------------------------------------

    def due(self, session: Session) -> bool:
        return len(session.unconsolidated()) >= self.memory_window

    def maybe_schedule(self, session: Session) -> asyncio.Task[Any] | None:
        """After a turn: start a background consolidation if one is due and none runs."""
        key = id(session)
        if not self.due(session) or key in self._running:
            return None
        failures = self._failures.get(key)
        if failures and self.clock() < failures.retry_at:
            return None
        return self._spawn(key, self._consolidate_with_retry_state(session))

    def schedule_archive(self, session: Session) -> asyncio.Task[Any]:
        """After /new: consolidate everything left in the archived transcript, then mark it."""
        return self._spawn(None, self.archive(session))

    def _spawn(self, key: int | None, work: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        if key is not None:
            self._running[key] = task
        task.add_done_callback(lambda t: self._done(key, t))
        return task

    def _done(self, key: int | None, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if key is not None and self._running.get(key) is task:
            del self._running[key]
        if not task.cancelled() and task.exception() is not None:
            log.error("memory task failed", exc_info=task.exception())

    @property
    def busy(self) -> bool:
        return bool(self._tasks)

    async def drain(self, timeout: float) -> bool:
        """Wait (bounded) for running consolidations and archives; False if some remain."""
        if not self._tasks:
            return True
        _, pending = await asyncio.wait(set(self._tasks), timeout=timeout)
        return not pending

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # Work ---------------------------------------------------------------------

    def _lock(self, session: Session) -> asyncio.Lock:
        return self._locks.setdefault(id(session), asyncio.Lock())

    async def _consolidate_with_retry_state(self, session: Session) -> Outcome:
        key = id(session)
        outcome = await self.consolidate(session)
        if outcome.ok:
            self._failures.pop(key, None)
            return outcome
        failures = self._failures.setdefault(key, _Failures())
        failures.count += 1
        if failures.count >= FAILURES_BEFORE_RAW:
            self._failures.pop(key, None)
            return await self.consolidate(session, raw=True)
        delay = self.backoff[min(failures.count - 1, len(self.backoff) - 1)]
        failures.retry_at = self.clock() + delay
        log.warning(
            "%s: consolidation failed (%s); retry in %.0f s", session.key, outcome.reason, delay
        )
        return outcome

    async def consolidate(
        self, session: Session, *, archive_all: bool = False, raw: bool = False
    ) -> Outcome:
        """One attempt. Writes nothing unless the whole result is good."""
        async with self._lock(session):
            keep = self.memory_window // 2
            chunk = choose_chunk(session.unconsolidated(), keep, archive_all=archive_all)
            if not chunk:
                return Outcome(ok=True, reason="nothing to consolidate")
            first, cut = int(chunk[0]["seq"]), int(chunk[-1]["seq"])  # fixed before the model
            owner = _is_owner(session)
            if raw:
                entry, update = _raw_entry(chunk), None
            else:
                try:
                    entry, update = await self._ask_model(session, chunk, owner)
                except (ConsolidationRefused, ModelUnavailable) as exc:
                    log.warning("%s: consolidation refused: %s", session.key, exc)
                    return Outcome(ok=False, reason=str(exc))
            try:
                await asyncio.to_thread(self.store.append_history, entry, session.key)
                if update is not None:
                    await asyncio.to_thread(self.store.replace_memory, update)
                # One record: the covered range and the new last_consolidated land together.
                self.sessions.append(
                    session, Consolidation(from_seq=first, to_seq=cut, mode="raw" if raw else "llm")
                )
                await self.sessions.sync(session)
            except OSError as exc:
                log.error("%s: could not write memory: %s", session.key, exc)
                return Outcome(ok=False, reason=str(exc))
            log.info("%s: consolidated seq %d-%d", session.key, first, cut)
            return Outcome(
                ok=True, from_seq=first, to_seq=cut, mode="raw" if raw else "llm", reason=entry
            )

    async def _ask_model(
        self, session: Session, chunk: list[dict[str, Any]], owner: bool
    ) -> tuple[str, str | None]:
        current = await asyncio.to_thread(self.store.read_memory) if owner else ""
        parts = []
        if owner:
            parts.append(f"## Current MEMORY.md\n\n{current or '(empty)'}")
        parts.append(f"## Conversation excerpt ({session.key})\n\n{format_messages(chunk)}")
        messages = [
            {"role": "system", "content": OWNER_INSTRUCTIONS if owner else SHARED_INSTRUCTIONS},
            {"role": "user", "content": "\n\n".join(parts)},
        ]
        forced = {"type": "function", "function": {"name": "save_memory"}}
        try:
            response = await self.llm.chat(messages, tools=[SAVE_MEMORY_TOOL], tool_choice=forced)
        except ModelUnavailable as exc:
            if "tool_choice" not in str(exc).lower() and "tool choice" not in str(exc).lower():
                raise
            # Some providers refuse a forced tool choice; the prompt asks for the call anyway.
            response = await self.llm.chat(messages, tools=[SAVE_MEMORY_TOOL])
        if response.finish_reason == "length":
            raise ConsolidationRefused("the answer was cut off (finish_reason length)")
        return validate(extract_arguments(response), current, owner=owner)

    async def archive(self, session: Session) -> Outcome:
        """Consolidate the whole archived transcript (retrying with backoff, raw after three
        failures), leave a dated note for owners, then record that the archive landed."""
        failures = 0
        while True:
            outcome = await self.consolidate(
                session, archive_all=True, raw=failures >= FAILURES_BEFORE_RAW
            )
            if outcome.ok:
                break
            failures += 1
            await self.sleep(self.backoff[min(failures - 1, len(self.backoff) - 1)])
        owner = _is_owner(session)
        if owner and outcome.from_seq is not None and outcome.mode == "llm":
            day = self.store.now().date().isoformat()
            note = (
                f"# {day}: {outcome.reason[:80]}\n\n{outcome.reason}\n\n"
                f"Session {session.key}, messages {outcome.from_seq}-{outcome.to_seq}, "
                f"transcript sessions/archive/{session.path.name}\n"
            )
            await asyncio.to_thread(self.store.write_note, f"{day}-{_slug(outcome.reason)}", note)
        self.sessions.append(session, Archived())
        await self.sessions.sync(session)
        return outcome


def _is_owner(session: Session) -> bool:
    # A transcript that never recorded its trust is treated as shared: MEMORY.md is only ever
    # shown to or rewritten from a conversation known to be the owner's. Scheduled runs
    # (cron:*, heartbeat:*) borrow their target chat's trust but never rewrite MEMORY.md.
    if session.key.startswith(("cron:", "heartbeat:")):
        return False
    return session.state.get("trust") == Trust.OWNER.value


def _raw_entry(chunk: list[dict[str, Any]]) -> str:
    text = format_messages(chunk)
    if len(text) > MAX_RAW_ARCHIVE_CHARS:
        half = MAX_RAW_ARCHIVE_CHARS // 2
        text = f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"
    return (
        f"Raw archive of messages {chunk[0]['seq']}-{chunk[-1]['seq']} "
        f"(consolidation failed {FAILURES_BEFORE_RAW} times):\n{text}"
    )
