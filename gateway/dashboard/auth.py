"""Who may use the dashboard: the owner, who holds the token in `<data_dir>/dashboard.token`.

    dashboard.token         the secret (0600), made by `clawgate onboard`, replaced by
                            `clawgate dashboard --rotate` (which logs every browser out)
    dashboard-logins.json   sha-256 digests of one-time login codes with their expiry,
                            written by `clawgate dashboard`, consumed by the daemon
    dashboard-login/        the 0600 page that takes a browser to its login link
                            (login_link.py), replaced by each `clawgate dashboard`

The token never travels in a URL: `clawgate dashboard` prints a short-lived, single-use code
instead, which the daemon exchanges for a session cookie. The cookie names a session the
server keeps (browser_sessions.py): logging out, rotating the token and an idle timeout end
it, and with it its open event streams. The CSRF token is an HMAC of the cookie keyed by the
token. The daemon re-reads the token file when it changes on disk.

The site host: on loopback the dashboard answers only under `clawgate-<hmac>.localhost`, a
name derived from the token (`site_host`), which browsers resolve to loopback themselves.
A cookie is scoped by host name but not by port, so a cookie set for 127.0.0.1 or a fixed
name would reach any process listening on another loopback port the browser visits (or is
redirected to). A name derived from the token is known to no one without the token file, so
no page on another port can send the browser there. A new token makes a new name.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from clawgate.gateway.dashboard.browser_sessions import BrowserSessions, LoginThrottle
from clawgate.kernel.json_document import JsonDocument
from clawgate.kernel.storage import DiskWriter

TOKEN_FILE = "dashboard.token"
LOGINS_FILE = "dashboard-logins.json"
LOGIN_CODE_SECONDS = 300
DEFAULT_IDLE_SECONDS = 720 * 60
COOKIE_NAME = "clawgate_session"
CSRF_FIELD = "_csrf"
CSRF_HEADER = "X-CSRF-Token"


def token_path(data_dir: Path) -> Path:
    return data_dir / TOKEN_FILE


def read_token(data_dir: Path) -> str | None:
    """The token, or None when there is none (or the file is empty)."""
    try:
        text = token_path(data_dir).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    return text or None


def site_host(token: str) -> str:
    """The dashboard's host name under this token (lower case, as browsers send it)."""
    return f"clawgate-{_mac(token, 'site host')[:32]}.localhost"


def ensure_token(data_dir: Path, writer: DiskWriter | None = None) -> bool:
    """Create the token if there is none; True if this call made it."""
    if read_token(data_dir) is not None:
        return False
    rotate_token(data_dir, writer)
    return True


def rotate_token(data_dir: Path, writer: DiskWriter | None = None) -> str:
    """A new token replaces the old one (0600): every session cookie and login code made
    with the old one stops working."""
    writer = writer or DiskWriter()
    writer.mkdir(data_dir, mode=0o700)
    token = secrets.token_urlsafe(32)
    writer.replace(token_path(data_dir), token + "\n", mode=0o600)
    _logins(data_dir, writer).replace({})
    return token


def issue_login_code(
    data_dir: Path, writer: DiskWriter | None = None, *, clock: Callable[[], float] = time.time
) -> str:
    """A new one-time login code, valid for LOGIN_CODE_SECONDS. Only its digest is stored."""
    code = secrets.token_urlsafe(24)
    now = clock()

    def add(codes: dict[str, float]) -> None:
        _drop_expired(codes, now)
        codes[_digest(code)] = now + LOGIN_CODE_SECONDS

    _logins(data_dir, writer).update(add, repair=True)
    return code


def _digest(code: str) -> str:
    return hashlib.sha256(code.encode("utf-8")).hexdigest()


def _logins(data_dir: Path, writer: DiskWriter | None) -> JsonDocument[dict[str, float]]:
    """Digest -> expiry of the unused login codes; a damaged file holds none."""
    return JsonDocument(
        data_dir / LOGINS_FILE,
        default=dict,
        parse=_parse_logins,
        dump=lambda codes: codes,
        writer=writer,
        indent=None,
    )


def _parse_logins(data: object) -> dict[str, float]:
    if not isinstance(data, dict):
        return {}
    return {str(k): float(v) for k, v in data.items() if isinstance(v, int | float)}


def _drop_expired(codes: dict[str, float], now: float) -> None:
    for digest in [k for k, expiry in codes.items() if expiry <= now]:
        del codes[digest]


class Auth:
    """Checks tokens, login codes, session cookies and CSRF tokens against the current token.
    `idle_seconds`: a session unused this long ends (`dashboard.session_idle_minutes`)."""

    def __init__(
        self,
        data_dir: Path,
        *,
        writer: DiskWriter | None = None,
        clock: Callable[[], float] = time.time,
        idle_seconds: float = DEFAULT_IDLE_SECONDS,
        throttle: LoginThrottle | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.writer = writer or DiskWriter()
        self.clock = clock
        self.sessions = BrowserSessions(idle_seconds=idle_seconds, clock=clock)
        self.throttle = throttle or LoginThrottle()
        self._token: str | None = None
        self._signature: tuple[int, int] | None = None

    def token(self) -> str | None:
        """The current token, re-read when the file changed (a rotation by the CLI)."""
        try:
            stat = token_path(self.data_dir).stat()
        except FileNotFoundError:
            self._token, self._signature = None, None
            return None
        signature = (stat.st_mtime_ns, stat.st_ino)
        if signature != self._signature:
            self._token, self._signature = read_token(self.data_dir), signature
        return self._token

    def site_host(self) -> str | None:
        """The host name the dashboard answers under on loopback; None without a token."""
        token = self.token()
        return None if token is None else site_host(token)

    def check_token(self, given: str) -> bool:
        token = self.token()
        return token is not None and hmac.compare_digest(given.strip(), token)

    def consume_code(self, code: str) -> bool:
        """True once for a code `issue_login_code` made, within its lifetime; never again."""
        if not code or self.token() is None:
            return False
        digest, now = _digest(code), self.clock()

        def take(codes: dict[str, float]) -> float | None:
            expiry = codes.pop(digest, None)
            if expiry is not None:
                _drop_expired(codes, now)
            return expiry

        expiry = _logins(self.data_dir, self.writer).update(take, repair=True)
        return expiry is not None and expiry > now

    def new_session(self) -> str:
        """A new server-side session under the current token; its cookie value."""
        token = self.token()
        if token is None:
            raise RuntimeError("no dashboard token")
        return self.sessions.open(token)

    def valid_session(self, cookie: str | None) -> bool:
        return self.sessions.check(cookie, self.token())

    def end_session(self, cookie: str | None) -> None:
        """Log this session out: its cookie stops working, its event streams end."""
        self.sessions.end(cookie)

    def sweep(self) -> None:
        """End the sessions a rotated token or the idle timeout revoked (the server runs this
        every browser_sessions.SWEEP_SECONDS, so open event streams end without a request)."""
        self.sessions.sweep(self.token())

    def on_session_end(
        self, cookie: str | None, callback: Callable[[], None]
    ) -> AbstractContextManager[None]:
        """While the block runs, `callback` is called when this session ends."""
        return self.sessions.watch(cookie, callback)

    def csrf_token(self, cookie: str) -> str:
        """The CSRF token of one session (derived, so forms carry it without server state)."""
        token = self.token() or ""
        return _mac(token, "csrf:" + cookie)

    def valid_csrf(self, cookie: str | None, given: str | None) -> bool:
        if not cookie or not given:
            return False
        return hmac.compare_digest(given, self.csrf_token(cookie))


def _mac(key: str, message: str) -> str:
    return hmac.new(key.encode("utf-8"), message.encode("utf-8"), hashlib.sha256).hexdigest()


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the dashboard on this machine."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
