"""Who may talk to the assistant on one channel, and at which trust.

Every chat adapter asks its `AccessPolicy` before publishing anything: a `Decision` whose
trust is None means the message stops in the channel and nothing reaches the model.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clawgate.channels.pairing import CODE_TTL_SECONDS, MAX_PENDING_PER_CHANNEL, PairingStore
from clawgate.kernel.bus import Trust
from clawgate.kernel.errors import PairingError

if TYPE_CHECKING:
    from clawgate.channels.groups import SeenGroups
    from clawgate.kernel.config import _ChatChannelConfig

log = logging.getLogger(__name__)

# A stranger who keeps writing hears about pairing at most this often.
PAIRING_REPLY_INTERVAL = 3600.0

# Platform user ids are numbers. An entry that looks like one is matched against ids only:
# some platforms let people pick an all-digit username, which must not impersonate an id.
_NUMERIC = re.compile(r"-?\d+")


@dataclass(frozen=True)
class Decision:
    trust: Trust | None  # None: not served, nothing reaches the model
    reply: str | None = None  # text to send back to the sender (the pairing message), else None


def _username_key(name: str) -> str:
    return name.strip().removeprefix("@").casefold()


class _Entries:
    """Config entries (ids, usernames) matched the way the issue asks: names without "@",
    case-insensitively; "*" is kept apart so it can never name a particular person."""

    def __init__(self, entries: Iterable[str]) -> None:
        cleaned = [e.strip() for e in entries if e.strip()]
        self.star = "*" in cleaned
        people = [e for e in cleaned if e != "*"]
        self.ids = set(people)
        self.names = {_username_key(e) for e in people if not _NUMERIC.fullmatch(e)}

    def match(self, user_id: str, username: str | None) -> bool:
        if user_id in self.ids:
            return True
        return bool(username and _username_key(username) in self.names)


class AccessPolicy:
    def __init__(
        self,
        channel: str,
        config: _ChatChannelConfig,
        store: PairingStore,
        *,
        clock: Callable[[], float] = time.time,
        seen_groups: SeenGroups | None = None,
    ) -> None:
        self.channel = channel
        self.seen_groups = seen_groups
        self.config = config
        self.store = store
        self._clock = clock
        self._allowed = _Entries(config.allow_from)
        self._owners = _Entries(config.owners if config.owners is not None else config.allow_from)
        self._groups = {g.strip() for g in config.group_allow if g.strip()}
        # sender id -> (the code they were told, None when capped; when). A new code (after a
        # revoke, a deny, an expiry) is always told. In memory: after a restart a stranger
        # may hear it once more, which is harmless.
        self._replied_at: dict[str, tuple[str | None, float]] = {}

    def has_owner(self) -> bool:
        """True once this channel has an owner, from the config or approved through pairing."""
        return bool(self._owners.ids) or self.store.has_owner(self.channel)

    def is_owner(self, user_id: str, username: str | None = None) -> bool:
        if self._owners.match(user_id, username):
            return True
        approval = self.store.lookup(self.channel, user_id)
        return approval is not None and approval.owner

    def private(self, user_id: str, username: str | None = None) -> Decision:
        """The trust of a private chat with this sender, or silence / a pairing reply."""
        user_id = str(user_id)
        if self._owners.match(user_id, username):
            return Decision(Trust.OWNER)
        approval = self.store.lookup(self.channel, user_id)
        if approval is not None and approval.owner:
            return Decision(Trust.OWNER)
        if approval is not None or self._allowed.star or self._allowed.match(user_id, username):
            return Decision(Trust.ALLOWED)
        if self.config.dm_policy != "pairing":
            return Decision(None)
        return self._pairing(user_id, username)

    def group(self, *chat_ids: str) -> bool:
        """True when any given id (the chat; for Discord also the guild) is in group_allow."""
        return any(str(chat_id) in self._groups for chat_id in chat_ids if chat_id)

    def unknown_group(
        self,
        group_id: str,
        title: str,
        sender_id: str,
        sender_name: str,
        *,
        guild_id: str | None = None,
    ) -> None:
        """The bot was addressed in a group not in group_allow: logged, and kept for
        `clawgate groups` (the owner has no other way to learn the group's id)."""
        if self.seen_groups is not None:
            self.seen_groups.note(
                self.channel, group_id, title, sender_id, sender_name, guild_id=guild_id
            )

    def _pairing(self, user_id: str, username: str | None) -> Decision:
        owned = self.has_owner()
        try:
            code = self.store.request(
                self.channel, user_id, username, cap=MAX_PENDING_PER_CHANNEL if owned else None
            )
        except PairingError as exc:
            # The owner must fix the store; meanwhile strangers stay out, quietly.
            log.warning("%s: pairing unavailable: %s", self.channel, exc)
            return Decision(None)
        now = self._clock()
        told, last = self._replied_at.get(user_id, (None, None))
        if last is not None and told == code and now - last < PAIRING_REPLY_INTERVAL:
            return Decision(None)
        self._forget_before(now - PAIRING_REPLY_INTERVAL)
        self._replied_at[user_id] = (code, now)
        if code is None:
            log.warning(
                "%s: no pairing code for user %s%s: %d codes are already pending "
                "(see clawgate pairing list; deny or clear makes room)",
                self.channel,
                user_id,
                f" (@{username.removeprefix('@')})" if username else "",
                MAX_PENDING_PER_CHANNEL,
            )
            return Decision(None)
        log.info("%s: pairing code sent to unknown user %s", self.channel, user_id)
        return Decision(None, reply=pairing_message(self.channel, user_id, code, owned=owned))

    def _forget_before(self, cutoff: float) -> None:
        for sender in [s for s, (_, at) in self._replied_at.items() if at <= cutoff]:
            del self._replied_at[sender]


def pairing_message(channel: str, user_id: str, code: str, *, owned: bool = True) -> str:
    hours = int(CODE_TTL_SECONDS // 3600)
    if not owned:
        # Whoever installed the bot is the one who writes first; tell them the command that
        # makes them the owner, not one that makes them a guest of their own assistant.
        return (
            "I have no owner yet.\n"
            f"Your {channel} user id: {user_id}\n"
            f"Pairing code: {code}\n"
            "If this is your assistant, run this where clawgate runs to become its owner:\n"
            f"clawgate pairing approve {code} --owner\n"
            f"The code expires in {hours} hour."
        )
    return (
        "I only talk with people my owner has approved.\n"
        f"Your {channel} user id: {user_id}\n"
        f"Pairing code: {code}\n"
        "To let you in, the owner runs:\n"
        f"clawgate pairing approve {code}\n"
        f"The code expires in {hours} hour."
    )
