"""Pairing: strangers get a short code, the owner approves it from the CLI.

The daemon and `clawgate pairing` both write `<data_dir>/pairing.json`, so every write
happens under an `flock` on a sibling lock file and goes through an atomic replace. Readers
need no lock (a replace is all or nothing); they re-read whenever the file changed on disk,
which is how the daemon sees an approval without a restart.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable, Container, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from clawgate.kernel.errors import PairingError, one_line
from clawgate.kernel.storage import DiskWriter, locked

log = logging.getLogger(__name__)

CODE_LENGTH = 8
# No 0/O or 1/I: codes are read off a phone screen and typed into a terminal.
CODE_ALPHABET = "23456789ABCDEFGHJKLMNPQRSTUVWXYZ"
CODE_TTL_SECONDS = 3600.0
MAX_PENDING_PER_CHANNEL = 3
FORMAT_VERSION = 1


@dataclass(frozen=True)
class PendingPairing:
    channel: str
    user_id: str
    username: str | None
    code: str
    created_at: float

    @property
    def who(self) -> str:
        return _who(self.channel, self.user_id, self.username)


@dataclass(frozen=True)
class Approval:
    channel: str
    user_id: str
    username: str | None
    owner: bool
    approved_at: float
    # The code it was approved with, so approving it again can say what happened instead
    # of "no pending pairing". None in files written before codes were kept.
    code: str | None = None

    @property
    def who(self) -> str:
        return _who(self.channel, self.user_id, self.username)

    @property
    def role(self) -> str:
        return "an owner" if self.owner else "an allowed user"


@dataclass
class _State:
    pending: list[PendingPairing] = field(default_factory=list)
    approved: list[Approval] = field(default_factory=list)


# (inode, mtime_ns, size): a replace always makes a new inode, so two writes within one
# mtime tick that happen to have the same size are still told apart.
_Signature = tuple[int, int, int] | None


class _CorruptFile(Exception):
    pass


def normalize_code(code: str) -> str:
    return code.strip().upper()


class PairingStore:
    """Pending codes and approvals of every channel, in one JSON file shared across processes."""

    def __init__(
        self,
        path: Path,
        *,
        writer: DiskWriter | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = path
        self.lock_path = path.with_name(path.name + ".lock")
        self._writer = writer or DiskWriter()
        self._clock = clock
        self._state = _State()
        self._signature: _Signature = None
        self._loaded = False
        self._warned_signature: _Signature = None

    # -- reading ---------------------------------------------------------------------------

    def pending(self) -> list[PendingPairing]:
        """Unexpired codes, oldest first."""
        now = self._clock()
        return sorted(
            (p for p in self._current().pending if not self._expired(p, now)),
            key=lambda p: p.created_at,
        )

    def approved(self, channel: str | None = None) -> list[Approval]:
        return [a for a in self._current().approved if channel is None or a.channel == channel]

    def lookup(self, channel: str, user_id: str) -> Approval | None:
        for approval in self._current().approved:
            if approval.channel == channel and approval.user_id == user_id:
                return approval
        return None

    def has_owner(self, channel: str) -> bool:
        """True when someone was approved as an owner of this channel through pairing."""
        return any(a.owner and a.channel == channel for a in self._current().approved)

    # -- writing ---------------------------------------------------------------------------

    def request(
        self,
        channel: str,
        user_id: str,
        username: str | None,
        *,
        cap: int | None = MAX_PENDING_PER_CHANNEL,
    ) -> str | None:
        """The sender's pending code (a new one if needed); None if the channel already has
        `cap` pending codes. No cap (None) while the channel has no owner: strangers must not
        be able to lock the owner out of their own first pairing."""
        # Strangers can message at any rate; answer from the cached state when it already
        # decides the outcome, so they cost a stat and no lock or write.
        decided, code = self._request_outcome(self._current(), channel, user_id, cap)
        if decided:
            return code
        with self._locked() as state:
            decided, code = self._request_outcome(state, channel, user_id, cap)
            if decided:
                return code
            taken = {p.code for p in state.pending}
            code = _new_code(taken)
            state.pending.append(PendingPairing(channel, user_id, username, code, self._clock()))
            self._save(state)
            return code

    def approve(
        self, code: str, *, owner: bool | None = False, owned_channels: Container[str] = ()
    ) -> Approval:
        """Approve the person who was sent `code`. `owner=None` makes them the owner when
        their channel has none yet (neither in `owned_channels`, the channels whose config
        names an owner, nor through an earlier approval): the first approval is the owner's."""
        wanted = normalize_code(code)
        with self._locked() as state:
            match = next((p for p in state.pending if p.code == wanted), None)
            if match is None:
                raise PairingError(_unknown_code_message(wanted, state.approved))
            if owner is None:
                owner = match.channel not in owned_channels and not any(
                    a.owner and a.channel == match.channel for a in state.approved
                )
            approval = Approval(
                match.channel, match.user_id, match.username, owner, self._clock(), match.code
            )
            state.pending = [p for p in state.pending if p is not match]
            # Approving again (say, with --owner) replaces the earlier approval.
            state.approved = [
                a
                for a in state.approved
                if not (a.channel == approval.channel and a.user_id == approval.user_id)
            ]
            state.approved.append(approval)
            self._save(state)
            return approval

    def set_owner(self, user: str, channel: str | None, owner: bool) -> list[Approval]:
        """Promote (or demote) an approved person; the changed approvals are returned."""
        matches = _matcher(user, channel)
        with self._locked() as state:
            found = [a for a in state.approved if matches(a)]
            if not found:
                where = f" on {channel}" if channel else ""
                raise PairingError(
                    f"no approved user {user}{where} (approve their pairing code first; "
                    "owners named in the config are changed there)"
                )
            changed = [replace(a, owner=owner) for a in found]
            state.approved = [a for a in state.approved if not matches(a)] + changed
            self._save(state)
            return changed

    def deny(self, code: str) -> PendingPairing:
        """Drop one pending request; the person gets a new code if they write again."""
        wanted = normalize_code(code)
        with self._locked() as state:
            match = next((p for p in state.pending if p.code == wanted), None)
            if match is None:
                raise PairingError(_unknown_code_message(wanted, state.approved))
            state.pending = [p for p in state.pending if p is not match]
            self._save(state)
            return match

    def clear(self, channel: str | None = None) -> list[PendingPairing]:
        """Drop every pending request (of one channel, or all); the dropped ones are returned."""
        with self._locked() as state:
            dropped = [p for p in state.pending if channel is None or p.channel == channel]
            if dropped:
                state.pending = [p for p in state.pending if p not in dropped]
                self._save(state)
            return dropped

    def revoke(self, user_id: str, channel: str | None = None) -> list[Approval]:
        """Remove the user's approvals (on one channel or all); the removed ones are returned.

        `user_id` may also be a username ("@alice"), since that is what the owner remembers.
        """
        matches = _matcher(user_id, channel)
        with self._locked() as state:
            removed = [a for a in state.approved if matches(a)]
            if not removed:
                where = f" on {channel}" if channel else ""
                raise PairingError(f"no approved user {user_id}{where}")
            state.approved = [a for a in state.approved if not matches(a)]
            self._save(state)
            return removed

    # -- internals -------------------------------------------------------------------------

    def _request_outcome(
        self, state: _State, channel: str, user_id: str, cap: int | None
    ) -> tuple[bool, str | None]:
        now = self._clock()
        live = [p for p in state.pending if p.channel == channel and not self._expired(p, now)]
        for pending in live:
            if pending.user_id == user_id:
                return True, pending.code
        if cap is not None and len(live) >= cap:
            return True, None
        return False, None

    def _expired(self, pending: PendingPairing, now: float) -> bool:
        return now - pending.created_at >= CODE_TTL_SECONDS

    def _stat(self) -> _Signature:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _current(self) -> _State:
        """The file's state, re-read only when its signature changed (one stat per call)."""
        signature = self._stat()
        if self._loaded and signature == self._signature:
            return self._state
        try:
            self._state = self._read()
        except _CorruptFile as exc:
            # Reading goes on as if empty (nobody gets in by accident); warn once per version
            # of the file, not on every message.
            if signature != self._warned_signature:
                log.warning("%s: %s; treating it as empty until it is fixed", self.path, exc)
                self._warned_signature = signature
            self._state = _State()
        except OSError as exc:
            log.warning("%s: cannot read: %s", self.path, exc)
            return self._state
        self._signature = signature
        self._loaded = True
        return self._state

    def _read(self) -> _State:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return _State()
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise _CorruptFile(f"not valid JSON ({exc})") from None
        return _parse(data)

    @contextmanager
    def _locked(self) -> Iterator[_State]:
        """Exclusive access for a read-modify-write; yields the state freshly read from disk."""
        with ExitStack() as held:
            try:
                self._writer.mkdir(self.path.parent)
                held.enter_context(locked(self.lock_path))
            except OSError as exc:
                raise PairingError(f"cannot open {self.lock_path}: {one_line(exc)}") from None
            try:
                state = self._read()
            except _CorruptFile as exc:
                raise PairingError(
                    f"{self.path} is damaged ({exc}); fix or delete it, then try again"
                ) from None
            except OSError as exc:
                raise PairingError(f"cannot read {self.path}: {one_line(exc)}") from None
            now = self._clock()
            state.pending = [p for p in state.pending if not self._expired(p, now)]
            yield state

    def _save(self, state: _State) -> None:
        data = {
            "version": FORMAT_VERSION,
            "pending": [asdict(p) for p in state.pending],
            "approved": [asdict(a) for a in state.approved],
        }
        try:
            self._writer.replace(self.path, json.dumps(data, indent=2) + "\n", mode=0o600)
        except OSError as exc:
            raise PairingError(f"cannot write {self.path}: {one_line(exc)}") from None
        # Still under the lock, so nobody can have replaced the file since our write.
        self._state = state
        self._signature = self._stat()
        self._loaded = True


def _who(channel: str, user_id: str, username: str | None) -> str:
    name = f" (@{username.removeprefix('@')})" if username else ""
    return f"{channel} user {user_id}{name}"


def _matcher(user: str, channel: str | None) -> Callable[[Approval], bool]:
    """Approvals of `user`, given as an id or a username ("@alice": what the owner remembers)."""
    wanted_name = user.strip().removeprefix("@").casefold()

    def matches(a: Approval) -> bool:
        if channel is not None and a.channel != channel:
            return False
        return a.user_id == user or (
            a.username is not None and a.username.removeprefix("@").casefold() == wanted_name
        )

    return matches


def _unknown_code_message(code: str, approved: list[Approval]) -> str:
    used = next((a for a in approved if a.code == code), None)
    if used is None:
        return (
            f"no pending pairing with code {code} "
            f"(codes expire after {int(CODE_TTL_SECONDS // 3600)} hour)"
        )
    if used.owner:
        return f"code {code} was already used: {used.who} is already approved as an owner"
    return (
        f"code {code} was already used: {used.who} is already approved as an allowed user; "
        f"to make them owner: clawgate pairing promote {used.user_id}"
    )


def _new_code(taken: set[str]) -> str:
    while True:
        code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
        if code not in taken:
            return code


def _parse(data: Any) -> _State:
    if not isinstance(data, dict):
        raise _CorruptFile("expected a JSON object")
    if data.get("version") != FORMAT_VERSION:
        raise _CorruptFile(f"unsupported version {data.get('version')!r}")
    try:
        pending = [
            PendingPairing(
                channel=str(item["channel"]),
                user_id=str(item["user_id"]),
                username=_optional_str(item.get("username")),
                code=str(item["code"]),
                created_at=float(item["created_at"]),
            )
            for item in data.get("pending", [])
        ]
        approved = [
            Approval(
                channel=str(item["channel"]),
                user_id=str(item["user_id"]),
                username=_optional_str(item.get("username")),
                owner=bool(item.get("owner", False)),
                approved_at=float(item["approved_at"]),
                code=_optional_str(item.get("code")),
            )
            for item in data.get("approved", [])
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise _CorruptFile(f"malformed entry ({type(exc).__name__}: {exc})") from None
    return _State(pending, approved)


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)
