"""Background consolidation: fold old session messages into HISTORY.md (and MEMORY.md).

The reply never waits for this. For one session key at a time (single-flight, lock and
failure backoff all keyed by the session key, never by the Session object, which the cache
may drop and load again), take the unconsolidated messages except the newest
`memory_window // 2`, fix the cut-off seq before calling the model, and advance
`last_consolidated` to exactly that seq only after MEMORY.md, HISTORY.md and the day's log
are written (and fsynced). Each entry carries its range, so a retry after a crash records an
entry already written instead of writing it again (entries.py describes the unit of work).
Any failure - whatever the exception - advances nothing and counts towards the backoff and
the raw-archive fallback. The session stays pinned in the cache while its
consolidation or archive runs.

The model's answer is read and checked in answer.py.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from clawgate.agent.llm import LLMClient
from clawgate.agent.memory.answer import (
    OWNER_INSTRUCTIONS,
    SAVE_MEMORY_TOOL,
    SHARED_INSTRUCTIONS,
    extract_arguments,
    validate,
)
from clawgate.agent.memory.entries import STAMP_FORMAT, Entry, Span, parse_entries, unrecorded
from clawgate.agent.memory.merge import MemoryRewrite
from clawgate.agent.memory.provenance import read_all_notes, read_notes, record_entry
from clawgate.agent.memory.store import MemoryStore
from clawgate.agent.session import (
    Archived,
    Consolidation,
    Session,
    SessionStore,
    StoredMessage,
)
from clawgate.agent.spend.scope import tagged
from clawgate.agent.text import without_surrogates
from clawgate.kernel.bus import Trust
from clawgate.kernel.errors import ConsolidationRefused, ModelUnavailable, one_line
from clawgate.kernel.retry import Backoff, Retry, retrying

log = logging.getLogger(__name__)

TOOL_RESULT_CAP = 500
MAX_RAW_ARCHIVE_CHARS = 12_000
FAILURES_BEFORE_RAW = 3
# A failure record nobody retried for this long belongs to a session that went quiet.
STALE_FAILURE_SECONDS = 86_400.0


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


def format_messages(messages: Iterable[StoredMessage]) -> str:
    """`[timestamp] ROLE [tools: a, b]: content`, one per line; empty contents skipped."""
    lines = []
    for message in messages:
        text = message.content.strip()
        if message.role == "tool" and len(text) > TOOL_RESULT_CAP:
            text = text[:TOOL_RESULT_CAP] + " [...]"
        calls = [call.function.name for call in message.tool_calls]
        tools = f" [tools: {', '.join(calls)}]" if calls else ""
        if not text and not tools:
            continue
        lines.append(f"[{message.timestamp}] {message.role.upper()}{tools}: {text}")
    return "\n".join(lines)


def choose_chunk(
    messages: list[StoredMessage], keep: int, *, archive_all: bool
) -> list[StoredMessage]:
    """The messages to consolidate: all but the newest `keep`, with the cut moved forward so
    a tool call is never separated from its results."""
    if archive_all:
        return list(messages)
    end = len(messages) - keep
    if end <= 0:
        return []
    while end < len(messages) and messages[end].role == "tool":
        end += 1
    return messages[:end]


def _slug(text: str) -> str:
    words = re.findall(r"[A-Za-z0-9]+", text.lower())[:6]
    return "-".join(words) or "session"


@dataclass
class Consolidator:
    """Owns every consolidation and archive task; the runtime awaits or cancels them.

    Its state (the running task, the lock, the failure count) is keyed by session key: a
    session evicted from the cache and loaded again is the same session. Each map is pruned
    when its key goes idle."""

    store: MemoryStore
    sessions: SessionStore
    llm: LLMClient
    memory_window: int
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    backoff: tuple[float, ...] = (30.0, 120.0)
    _tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    # Archives sleeping out a retry's backoff: nothing of theirs is under way, so a stop
    # need not wait for them (the next start resumes each one).
    _backing_off: set[asyncio.Task[Any]] = field(default_factory=set)
    _began_backing_off: asyncio.Event = field(default_factory=asyncio.Event)
    _running: dict[str, asyncio.Task[Any]] = field(default_factory=dict)
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    _lock_users: dict[str, int] = field(default_factory=dict)
    _failures: dict[str, _Failures] = field(default_factory=dict)
    # After `recover()` ran, only these keys can hold an entry without its record (a failed
    # attempt, a recovery that failed): the others skip reading HISTORY.md before each
    # attempt, so the chunk is chosen without a thread hop in between.
    _recovered: bool = False
    _suspect: set[str] = field(default_factory=set)

    # Scheduling ---------------------------------------------------------------

    def due(self, session: Session) -> bool:
        return session.unconsolidated_count() >= self.memory_window

    def maybe_schedule(self, session: Session) -> asyncio.Task[Any] | None:
        """After a turn: start a background consolidation if one is due and none runs."""
        self._prune_failures()
        key = session.key
        if not self.due(session) or key in self._running:
            return None
        failures = self._failures.get(key)
        if failures and self.clock() < failures.retry_at:
            return None
        return self._spawn(key, session, self._consolidate_with_retry_state(session))

    def schedule_archive(self, session: Session) -> asyncio.Task[Any]:
        """After /new: consolidate everything left in the archived transcript, then mark it."""
        # The archive retries on its own; the key's fresh session starts with a clean slate.
        self._failures.pop(session.key, None)
        return self._spawn(None, session, self.archive(session))

    def _spawn(self, key: str | None, session: Session, work: Awaitable[Any]) -> asyncio.Task[Any]:
        # Pinned from now, not from when the task first runs: a cache eviction in between
        # would let the next message load a second object for the same file.
        pin = ExitStack()
        pin.enter_context(session.pinned())
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        if key is not None:
            self._running[key] = task
        task.add_done_callback(lambda t: self._done(key, t, pin))
        return task

    def _done(self, key: str | None, task: asyncio.Task[Any], pin: ExitStack) -> None:
        pin.close()
        self._tasks.discard(task)
        if key is not None and self._running.get(key) is task:
            del self._running[key]
        if not task.cancelled() and task.exception() is not None:
            log.error("memory task failed", exc_info=task.exception())

    def _prune_failures(self) -> None:
        stale = self.clock() - STALE_FAILURE_SECONDS
        for key in [k for k, f in self._failures.items() if f.retry_at < stale]:
            del self._failures[key]

    @property
    def busy(self) -> bool:
        return bool(self._tasks)

    @property
    def backing_off(self) -> int:
        """Archives waiting to try again."""
        return len(self._backing_off)

    async def drain(self, timeout: float) -> bool:
        """Wait (bounded) for the consolidations and archives at work; one sleeping out a
        retry's backoff is not waited for. False if some were still at work."""
        deadline = asyncio.get_running_loop().time() + timeout
        while working := self._tasks - self._backing_off:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return False
            self._began_backing_off.clear()
            backing_off = asyncio.ensure_future(self._began_backing_off.wait())
            try:
                await asyncio.wait(
                    {*working, backing_off}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                backing_off.cancel()
        return True

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # Work ---------------------------------------------------------------------

    @asynccontextmanager
    async def _holding(self, key: str) -> AsyncIterator[None]:
        """The key's lock, dropped from the map once nobody holds or waits for it."""
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._lock_users[key] = self._lock_users.get(key, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._lock_users[key] -= 1
            if not self._lock_users[key]:
                del self._lock_users[key], self._locks[key]

    async def _consolidate_with_retry_state(self, session: Session) -> Outcome:
        key = session.key
        outcome = await self.consolidate(session)
        if outcome.ok:
            self._failures.pop(key, None)
            return outcome
        failures = self._failures.setdefault(key, _Failures())
        failures.count += 1
        if failures.count >= FAILURES_BEFORE_RAW:
            outcome = await self.consolidate(session, raw=True)
            if outcome.ok:
                self._failures.pop(key, None)
                return outcome
        delay = self.backoff[min(failures.count - 1, len(self.backoff) - 1)]
        failures.retry_at = self.clock() + delay
        log.warning("%s: consolidation failed (%s); retry in %.0f s", key, outcome.reason, delay)
        return outcome

    async def consolidate(
        self, session: Session, *, archive_all: bool = False, raw: bool = False
    ) -> Outcome:
        """One attempt. Writes nothing unless the whole result is good; never raises (but
        for cancellation): any failure is an Outcome that is not ok."""
        with session.pinned():
            async with self._holding(session.key):
                try:
                    outcome = await self._attempt(session, archive_all=archive_all, raw=raw)
                    # Everything this attempt wrote has its record now.
                    self._suspect.discard(session.key)
                    return outcome
                except (ConsolidationRefused, ModelUnavailable) as exc:
                    log.warning("%s: consolidation refused: %s", session.key, exc)
                    return Outcome(ok=False, reason=str(exc))
                except OSError as exc:
                    log.error("%s: could not write memory: %s", session.key, one_line(exc))
                    self._suspect.add(session.key)
                    return Outcome(ok=False, reason=one_line(exc))
                except Exception as exc:
                    # A bug or an input nobody foresaw: it still counts as a failure, so
                    # backoff and the raw archive apply instead of a retry after every turn.
                    log.exception("%s: consolidation failed", session.key)
                    self._suspect.add(session.key)
                    return Outcome(ok=False, reason=f"{type(exc).__name__}: {one_line(exc)}")

    async def _attempt(self, session: Session, *, archive_all: bool, raw: bool) -> Outcome:
        adopted = None
        # An archive always looks: `recover()` reads only live transcripts.
        if archive_all or not self._recovered or session.key in self._suspect:
            self._suspect.add(session.key)
            adopted = await self._record_written(session)
        keep = self.memory_window // 2
        chunk = choose_chunk(session.unconsolidated(), keep, archive_all=archive_all)
        if not chunk:
            if adopted is not None and adopted.span is not None:
                span = adopted.span
                return Outcome(True, span.first, span.last, adopted.mode, adopted.text)
            return Outcome(ok=True, reason="nothing to consolidate")
        first, cut = chunk[0].seq, chunk[-1].seq  # fixed before the model
        owner = _is_owner(session, first, cut)
        if raw:
            entry, update = without_surrogates(_raw_entry(chunk)), None
        else:
            entry, update = await self._ask_model(session, chunk, owner)
        # MEMORY.md first: an entry on disk then means its range's memory side is done.
        if update is not None:
            await self.store.lock.run(self.store.rewrite_memory, update)
        span = Span(session.key, first, cut)
        await self.store.lock.run(
            record_entry, self.store, session.key, entry, chunk, owner=owner, span=span
        )
        # One record: the covered range and the new last_consolidated land together.
        self.sessions.append(
            session, Consolidation(from_seq=first, to_seq=cut, mode="raw" if raw else "llm")
        )
        await self.sessions.sync(session)
        log.info("%s: consolidated seq %d-%d", session.key, first, cut)
        return Outcome(
            ok=True, from_seq=first, to_seq=cut, mode="raw" if raw else "llm", reason=entry
        )

    async def _record_written(self, session: Session) -> Entry | None:
        """Record the entries a crash left without their record (entries.py): their missing
        day's-log line, then the record. The caller holds the key's lock. The last one, if any."""
        history = await asyncio.to_thread(self.store.read_history)
        # A non-owner chunk's entry is in the chat's own notes (provenance.py), which have no
        # day's-log copy: only the record is missing then.
        notes = await asyncio.to_thread(read_notes, self.store, session.key)
        last = None
        for entry in unrecorded(f"{history}\n\n{notes}", session):
            assert entry.span is not None
            if entry.span.marker in history:
                try:
                    when = datetime.strptime(entry.stamp, STAMP_FORMAT).replace(
                        tzinfo=self.store.zone
                    )
                except ValueError:  # a stamp edited into no date: the day's log of today then
                    when = None
                await self.store.lock.run(
                    self.store.append_history, entry.text, session.key, when, span=entry.span
                )
            span = entry.span
            self.sessions.append(
                session, Consolidation(from_seq=span.first, to_seq=span.last, mode=entry.mode)
            )
            await self.sessions.sync(session)
            log.info("%s: recorded the HISTORY.md entry %s a crash left", session.key, entry.span)
            last = entry
        return last

    async def recover(self) -> None:
        """At start: record what a crash between a live session's HISTORY.md entry and its
        record left (an archived transcript's resumed archive does the same)."""
        texts = [await asyncio.to_thread(self.store.read_history)]
        texts += [text for _, text in await asyncio.to_thread(read_all_notes, self.store.dir)]
        entries = [entry for text in texts for entry in parse_entries(text)]
        keys = {entry.span.key for entry in entries if entry.span is not None}
        for key, _path in await asyncio.to_thread(self.sessions.list_keys):
            if key not in keys:
                continue
            session = await self.sessions.get(key)
            try:
                with session.pinned():
                    async with self._holding(key):
                        await self._record_written(session)
            except Exception:
                # The session's next consolidation tries again; the start goes on.
                self._suspect.add(key)
                log.exception("%s: could not record the HISTORY.md entries a crash left", key)
        self._recovered = True

    async def _ask_model(
        self, session: Session, chunk: list[StoredMessage], owner: bool
    ) -> tuple[str, MemoryRewrite | None]:
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
        trust = Trust.OWNER if owner else session.state.trust or Trust.ALLOWED
        with tagged("consolidation", session_key=session.key, trust=trust):
            try:
                response = await self.llm.chat(
                    messages, tools=[SAVE_MEMORY_TOOL], tool_choice=forced
                )
            except ModelUnavailable as exc:
                text = str(exc).lower()
                if "tool_choice" not in text and "tool choice" not in text:
                    raise
                # Some providers refuse a forced tool choice; the prompt asks for the call anyway.
                response = await self.llm.chat(messages, tools=[SAVE_MEMORY_TOOL])
        if response.finish_reason == "length":
            raise ConsolidationRefused("the answer was cut off (finish_reason length)")
        entry, update = validate(extract_arguments(response), current, owner=owner)
        # The file may change while the model thinks: the store merges against what it saw.
        return entry, None if update is None else MemoryRewrite(current, update, session.key)

    async def archive(self, session: Session) -> Outcome:
        """Consolidate the whole archived transcript (retrying with backoff, raw after three
        failures - whatever failed), leave a dated note for owners, then record that the
        archive landed."""
        tries = 0

        async def attempt() -> Outcome:
            nonlocal tries
            tries += 1
            raw = tries > FAILURES_BEFORE_RAW
            outcome = await self.consolidate(session, archive_all=True, raw=raw)
            if outcome.ok:
                try:
                    await self._land_archive(session, outcome)
                    return outcome
                except Exception as exc:
                    log.exception("%s: could not record the archive", session.key)
                    outcome = Outcome(ok=False, reason=one_line(exc))
            raise Retry(outcome.reason)

        def on_retry(_: int, failure: Retry, delay: float) -> None:
            log.warning(
                "%s: archive failed (%s); retry in %.0f s", session.key, failure.reason, delay
            )

        with session.pinned():
            return await retrying(
                attempt,
                attempts=None,
                backoff=Backoff(schedule=self.backoff),
                sleep=self._back_off,
                on_retry=on_retry,
            )

    async def _back_off(self, seconds: float) -> None:
        task = asyncio.current_task()
        if task is None:  # not one of ours: a plain wait
            await self.sleep(seconds)
            return
        self._backing_off.add(task)
        self._began_backing_off.set()
        try:
            await self.sleep(seconds)
        finally:
            self._backing_off.discard(task)

    async def _land_archive(self, session: Session, outcome: Outcome) -> None:
        if (
            outcome.from_seq is not None
            and outcome.to_seq is not None
            and _is_owner(session, outcome.from_seq, outcome.to_seq)
            and outcome.mode == "llm"
        ):
            day = self.store.now().date().isoformat()
            note = (
                f"# {day}: {outcome.reason[:80]}\n\n{outcome.reason}\n\n"
                f"Session {session.key}, messages {outcome.from_seq}-{outcome.to_seq}, "
                f"transcript sessions/archive/{session.path.name}\n"
            )
            try:
                await self.store.lock.run(
                    self.store.write_note, f"{day}-{_slug(outcome.reason)}", note
                )
            except Exception:
                # The note is a convenience copy of the HISTORY.md entry that already landed.
                log.exception("%s: could not write the archive note", session.key)
        self.sessions.append(session, Archived())
        await self.sessions.sync(session)


def _is_owner(session: Session, first: int, last: int) -> bool:
    # Owner-consolidated only if every message first..last was handled at owner trust (not
    # the session's latest trust): MEMORY.md is only ever shown to or rewritten from a
    # conversation known to be the owner's. Scheduled runs (cron:*, heartbeat:*) borrow
    # their target chat's trust but never rewrite MEMORY.md.
    if session.key.startswith(("cron:", "heartbeat:")):
        return False
    return session.trusts_between(first, last) == {Trust.OWNER.value}


def _raw_entry(chunk: list[StoredMessage]) -> str:
    text = format_messages(chunk)
    if len(text) > MAX_RAW_ARCHIVE_CHARS:
        half = MAX_RAW_ARCHIVE_CHARS // 2
        text = f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"
    return (
        f"Raw archive of messages {chunk[0].seq}-{chunk[-1].seq} "
        f"(consolidation failed {FAILURES_BEFORE_RAW} times):\n{text}"
    )
