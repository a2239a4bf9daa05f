"""Pairing: strangers get a short code, the owner approves it from the CLI.

The daemon and `clawgate pairing` both write `<data_dir>/pairing.json`, a kernel
JsonDocument: every write is a read-modify-write under an `flock` on a sibling lock file and
an atomic replace. Readers need no lock (a replace is all or nothing); they re-read whenever
the file's fingerprint changed, which is how the daemon sees an approval without a restart.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Container
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from clawgate.kernel.errors import DocumentDamaged, PairingError, one_line
from clawgate.kernel.json_document import Fingerprint, JsonDocument
from clawgate.kernel.sanitise import sanitise
from clawgate.kernel.storage import DiskWriter

log = logging.getLogger(__name__)

T = TypeVar("T")

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
        self._doc: JsonDocument[_State] = JsonDocument(
            path, default=_State, parse=_parse, dump=_dump, writer=writer
        )
        self._clock = clock
        self._state = _State()
        self._signature: Fingerprint = None
        self._loaded = False
        self._warned_signature: Fingerprint = None

    # -- reading ---------------------------------------------------------------------------

    def pending(self) -> list[PendingPairing]:
        """Unexpired codes, oldest first."""
        now = self._clock()
        return sorted(
            (p for p in self._current().pending if not self._expired(p, now)),
            key=lambda p: p.created_at,
        )

    def crowded(self, channel: str, cap: int) -> bool:
        """True when the channel holds `cap` or more unexpired codes: a newcomer's code now
        replaces the oldest one."""
        return sum(1 for p in self.pending() if p.channel == channel) >= cap

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
    ) -> str:
        """The sender's pending code: the one they hold (one per requester: asking again
        reissues it, never adds a second), else a new one. When the channel already has `cap`
        pending codes the oldest expire first to make room, so strangers who got there
        first can never lock a newcomer out. No cap (None) while the channel has no owner."""
        # Strangers can message at any rate; answer from the cached state when it already
        # decides the outcome, so they cost a stat and no lock or write.
        held = self._held(self._current(), channel, user_id)
        if held is not None:
            return held

        def add(state: _State) -> str:
            held = self._held(state, channel, user_id)
            if held is not None:
                return held
            if cap is not None:
                _make_room(state, channel, cap)
            code = _new_code({p.code for p in state.pending})
            state.pending.append(PendingPairing(channel, user_id, username, code, self._clock()))
            return code

        return self._update(add)

    def approve(
        self, code: str, *, owner: bool | None = False, owned_channels: Container[str] = ()
    ) -> Approval:
        """Approve the person who was sent `code`. `owner=None` makes them the owner when
        their channel has none yet (neither in `owned_channels`, the channels whose config
        names an owner, nor through an earlier approval): the first approval is the owner's."""
        wanted = normalize_code(code)

        def approve(state: _State) -> Approval:
            match = next((p for p in state.pending if p.code == wanted), None)
            if match is None:
                raise PairingError(_unknown_code_message(wanted, state.approved))
            as_owner = owner
            if as_owner is None:
                as_owner = match.channel not in owned_channels and not any(
                    a.owner and a.channel == match.channel for a in state.approved
                )
            approval = Approval(
                match.channel, match.user_id, match.username, as_owner, self._clock(), match.code
            )
            state.pending = [p for p in state.pending if p is not match]
            # Approving again (say, with --owner) replaces the earlier approval.
            state.approved = [
                a
                for a in state.approved
                if not (a.channel == approval.channel and a.user_id == approval.user_id)
            ]
            state.approved.append(approval)
            return approval

        return self._update(approve)

    def set_owner(self, user: str, channel: str | None, owner: bool) -> list[Approval]:
        """Promote (or demote) an approved person; the changed approvals are returned."""
        matches = _matcher(user, channel)

        def promote(state: _State) -> list[Approval]:
            found = [a for a in state.approved if matches(a)]
            if not found:
                where = f" on {channel}" if channel else ""
                raise PairingError(
                    f"no approved user {user}{where} (approve their pairing code first; "
                    "owners named in the config are changed there)"
                )
            changed = [replace(a, owner=owner) for a in found]
            state.approved = [a for a in state.approved if not matches(a)] + changed
            return changed

        return self._update(promote)

    def deny(self, code: str) -> PendingPairing:
        """Drop one pending request; the person gets a new code if they write again."""
        wanted = normalize_code(code)

        def deny(state: _State) -> PendingPairing:
            match = next((p for p in state.pending if p.code == wanted), None)
            if match is None:
                raise PairingError(_unknown_code_message(wanted, state.approved))
            state.pending = [p for p in state.pending if p is not match]
            return match

        return self._update(deny)

    def clear(self, channel: str | None = None) -> list[PendingPairing]:
        """Drop every pending request (of one channel, or all); the dropped ones are returned."""

        def clear(state: _State) -> list[PendingPairing]:
            dropped = [p for p in state.pending if channel is None or p.channel == channel]
            state.pending = [p for p in state.pending if p not in dropped]
            return dropped

        return self._update(clear)

    def revoke(self, user_id: str, channel: str | None = None) -> list[Approval]:
        """Remove the user's approvals (on one channel or all); the removed ones are returned.

        `user_id` may also be a username ("@alice"), since that is what the owner remembers.
        """
        matches = _matcher(user_id, channel)

        def revoke(state: _State) -> list[Approval]:
            removed = [a for a in state.approved if matches(a)]
            if not removed:
                where = f" on {channel}" if channel else ""
                raise PairingError(f"no approved user {user_id}{where}")
            state.approved = [a for a in state.approved if not matches(a)]
            return removed

        return self._update(revoke)

    # -- internals -------------------------------------------------------------------------

    def _held(self, state: _State, channel: str, user_id: str) -> str | None:
        now = self._clock()
        for pending in state.pending:
            if (pending.channel, pending.user_id) == (channel, user_id):
                if not self._expired(pending, now):
                    return pending.code
        return None

    def _expired(self, pending: PendingPairing, now: float) -> bool:
        return now - pending.created_at >= CODE_TTL_SECONDS

    def _current(self) -> _State:
        """The file's state, re-read only when its fingerprint changed (one stat per call)."""
        signature = self._doc.fingerprint()
        if self._loaded and signature == self._signature:
            return self._state
        try:
            self._state = self._doc.load()
        except DocumentDamaged as exc:
            # Reading goes on as if empty (nobody gets in by accident); warn once per version
            # of the file, not on every message.
            if signature != self._warned_signature:
                log.warning(
                    "%s: %s; treating it as empty until it is fixed", self.path, exc.problem
                )
                self._warned_signature = signature
            self._state = _State()
        except OSError as exc:
            log.warning("%s: cannot read: %s", self.path, exc)
            return self._state
        self._signature = signature
        self._loaded = True
        return self._state

    def _update(self, change: Callable[[_State], T]) -> T:
        """`change` applied under the file lock to the state freshly read from disk, expired
        codes already dropped; written back atomically unless it raises."""

        def fresh(state: _State) -> T:
            now = self._clock()
            state.pending = [p for p in state.pending if not self._expired(p, now)]
            return change(state)

        try:
            return self._doc.update(fresh)
        except DocumentDamaged as exc:
            raise PairingError(
                f"{self.path} is damaged ({exc.problem}); fix or delete it, then try again"
            ) from None
        except OSError as exc:
            raise PairingError(f"cannot update {self.path}: {one_line(exc)}") from None
        finally:
            # Read again next time: the file is ours or someone else's newer one.
            self._loaded = False


def _who(channel: str, user_id: str, username: str | None) -> str:
    # For people to read (CLI lines, logs, the owner's chat): the username is theirs to choose.
    name = f" (@{sanitise(username.removeprefix('@'))})" if username else ""
    return f"{channel} user {sanitise(user_id)}{name}"


def _make_room(state: _State, channel: str, cap: int) -> None:
    """Drop the channel's oldest codes until one more fits under `cap` (the state holds
    only unexpired codes here)."""
    mine = sorted((p for p in state.pending if p.channel == channel), key=lambda p: p.created_at)
    dropped = mine[: max(0, len(mine) - cap + 1)]
    for pending in dropped:
        log.info("%s: pairing code of %s expired early to make room", channel, pending.who)
    state.pending = [p for p in state.pending if p not in dropped]


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


def _dump(state: _State) -> dict[str, Any]:
    return {
        "version": FORMAT_VERSION,
        "pending": [asdict(p) for p in state.pending],
        "approved": [asdict(a) for a in state.approved],
    }


def _parse(data: Any) -> _State:
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object")
    if data.get("version") != FORMAT_VERSION:
        raise ValueError(f"unsupported version {data.get('version')!r}")
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
        raise ValueError(f"malformed entry ({type(exc).__name__}: {exc})") from None
    return _State(pending, approved)


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)
