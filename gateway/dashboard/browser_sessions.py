"""The dashboard's browser sessions, kept by the server, and the pace of failed logins.

A session cookie is a random value that names an entry here; nothing in it is trusted on
its own, so ending the entry ends the session wherever the cookie went. An entry ends when
- the owner logs out (that cookie);
- the dashboard token changes (`clawgate dashboard --rotate`): every entry made under the
  old token, noticed on the next request or by the sweep within SWEEP_SECONDS;
- it was not used for `dashboard.session_idle_minutes`, or is older than SESSION_SECONDS.
Whoever holds something open for a session (the web chat's event stream) registers with
`watch` and is called back when it ends. Entries live in the gateway's memory: a restart of
the gateway logs every browser out, which is the safe side.

`LoginThrottle` slows guessing: after a failed login, the next attempt of the same client
waits a little longer (FAILED_LOGIN_DELAY per recent failure, at most MAX_LOGIN_DELAY), in
turn, on the event loop's clock (an `asyncio.sleep`, never blocking the loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

SESSION_SECONDS = 7 * 24 * 3600
SWEEP_SECONDS = 1.0
FAILED_LOGIN_DELAY = 0.5
MAX_LOGIN_DELAY = 5.0
# A client's failures are forgotten this long after its last one.
FAILURE_MEMORY_SECONDS = 900.0

Watcher = Callable[[], None]


@dataclass
class _Session:
    token: str  # the dashboard token it was made under
    created: float
    seen: float
    watchers: list[Watcher] = field(default_factory=list)


class BrowserSessions:
    """Live sessions by the digest of their cookie. Used on the event loop only."""

    def __init__(self, *, idle_seconds: float, clock: Callable[[], float] = time.time) -> None:
        self.idle_seconds = idle_seconds
        self._clock = clock
        self._live: dict[str, _Session] = {}

    def open(self, token: str) -> str:
        """A new session under `token`; its cookie value."""
        cookie = secrets.token_urlsafe(32)
        now = self._clock()
        self._live[_digest(cookie)] = _Session(token, now, now)
        return cookie

    def check(self, cookie: str | None, token: str | None) -> bool:
        """True when `cookie` names a live session of the current token; the use counts as
        activity. A session found stale here ends now."""
        if not cookie:
            return False
        key = _digest(cookie)
        session = self._live.get(key)
        if session is None:
            return False
        reason = self._stale(session, token, self._clock())
        if reason is not None:
            self._end(key, reason)
            return False
        session.seen = self._clock()
        return True

    def end(self, cookie: str | None, reason: str = "logged out") -> None:
        if cookie:
            self._end(_digest(cookie), reason)

    def sweep(self, token: str | None) -> None:
        """End every session the token no longer covers or that sat idle too long."""
        now = self._clock()
        for key, session in list(self._live.items()):
            reason = self._stale(session, token, now)
            if reason is not None:
                self._end(key, reason)

    @contextlib.contextmanager
    def watch(self, cookie: str | None, on_end: Watcher) -> Iterator[None]:
        """Call `on_end` when the session ends while the block runs (at once if it is not
        live)."""
        session = self._live.get(_digest(cookie)) if cookie else None
        if session is None:
            on_end()
            yield
            return
        session.watchers.append(on_end)
        try:
            yield
        finally:
            with contextlib.suppress(ValueError):
                session.watchers.remove(on_end)

    def _stale(self, session: _Session, token: str | None, now: float) -> str | None:
        if token is None or session.token != token:
            return "the dashboard token changed"
        if now - session.seen >= self.idle_seconds:
            return "idle"
        if now - session.created >= SESSION_SECONDS:
            return "expired"
        return None

    def _end(self, key: str, reason: str) -> None:
        session = self._live.pop(key, None)
        if session is None:
            return
        log.info("dashboard: a browser session ended (%s)", reason)
        for watcher in session.watchers:
            watcher()
        session.watchers.clear()


@dataclass
class _Failures:
    count: int
    last: float
    next_turn: float


class LoginThrottle:
    """Paces login attempts per client (its address) after failures."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._clients: dict[str, _Failures] = {}

    async def wait_turn(self, client: str) -> None:
        """Wait until this client may try again; attempts of one client take turns, so
        sending many at once gains nothing."""
        now = self._clock()
        failures = self._clients.get(client)
        if failures is None:
            return
        if now - failures.last >= FAILURE_MEMORY_SECONDS:
            del self._clients[client]
            return
        start = max(now, failures.next_turn)
        failures.next_turn = start + _delay(failures.count)
        if start > now:
            await self._sleep(start - now)

    def failed(self, client: str, what: str) -> None:
        now = self._clock()
        self._forget_before(now - FAILURE_MEMORY_SECONDS)
        failures = self._clients.setdefault(client, _Failures(0, now, now))
        failures.count += 1
        failures.last = now
        failures.next_turn = max(failures.next_turn, now + _delay(failures.count))
        log.warning(
            "dashboard: failed login from %s (%s; %d in a row)", client, what, failures.count
        )

    def succeeded(self, client: str) -> None:
        self._clients.pop(client, None)

    def _forget_before(self, cutoff: float) -> None:
        for client in [c for c, f in self._clients.items() if f.last <= cutoff]:
            del self._clients[client]


def _delay(failures: int) -> float:
    return min(FAILED_LOGIN_DELAY * failures, MAX_LOGIN_DELAY)


def _digest(cookie: str) -> str:
    return hashlib.sha256(cookie.encode("utf-8")).hexdigest()
