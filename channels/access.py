"""Who may talk to the assistant, and at which trust: the one place trust is decided.

`AccessPolicy.trust(facts)` computes a channel's trust from its current rules (`owners`,
`allow_from`, `group_allow` in the config, approvals in pairing.json, re-read when the file
changes) and a message's `ChatFacts` (private or group, ids from the platform's payload).
Nothing else decides trust, and no stored trust is reused without asking it again:

- a chat adapter asks `admit` before publishing anything: a `Decision` whose trust is None
  means the message stops in the channel (a stranger may get the pairing reply);
- the gateway's dispatcher asks `AccessPolicies.decide` again right before each turn, so a message
  replayed from the Telegram journal or from a session after a crash, or one that waited in
  a queue while the owner revoked someone, gets the trust the rules give it now;
- scheduled runs (cron, heartbeat) ask `AccessPolicies.decide` with the facts the target chat last
  recorded, never with the trust it last had.

Ids, not names: a sender matches an entry by platform id. Telegram @usernames also match,
because the README offers them (`allow_from = ["@alice"]`); Discord names, which anyone can
take, never do.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clawgate.channels.pairing import CODE_TTL_SECONDS, MAX_PENDING_PER_CHANNEL, PairingStore
from clawgate.kernel.bus import ChatFacts, Trust
from clawgate.kernel.errors import PairingError
from clawgate.kernel.program import command

if TYPE_CHECKING:
    from clawgate.channels.groups import SeenGroups
    from clawgate.kernel.config import Config, _ChatChannelConfig

log = logging.getLogger(__name__)

# A stranger who keeps writing hears about pairing at most this often.
PAIRING_REPLY_INTERVAL = 3600.0

# The only platform whose usernames the README lets people list in allow_from / owners.
USERNAME_CHANNELS = frozenset({"telegram"})

# Platform user ids are numbers. An entry that looks like one is matched against ids only:
# some platforms let people pick an all-digit username, which must not impersonate an id.
_NUMERIC = re.compile(r"-?\d+")


@dataclass(frozen=True)
class Decision:
    trust: Trust | None  # None: not served, nothing reaches the model
    reply: str | None = None  # text to send back to the sender (the pairing message), else None
    # Text for the owner's private chat (a pairing flood began), sent once per flood.
    owner_notice: str | None = None


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
        self.config = config
        self.store = store
        self.seen_groups = seen_groups
        self._clock = clock
        self._allowed = _Entries(config.allow_from)
        self._owners = _Entries(config.owners if config.owners is not None else config.allow_from)
        self._groups = {g.strip() for g in config.group_allow if g.strip()}
        self._names = channel in USERNAME_CHANNELS
        # sender id -> (the code they were told, when). A new code (after a
        # revoke, a deny, an expiry) is always told. In memory: after a restart a stranger
        # may hear it once more, which is harmless.
        self._replied_at: dict[str, tuple[str, float]] = {}
        # Whether the owner was told of the flood of pairing requests now going on; it ends
        # when fewer than the cap are pending. In memory: after a restart they hear it again.
        self._flood_told = False

    def has_owner(self) -> bool:
        """True once this channel has an owner, from the config or approved through pairing."""
        return bool(self._owners.ids) or self.store.has_owner(self.channel)

    def owner_ids(self) -> list[str]:
        """The owners' platform user ids: numeric entries of the config, approved owners."""
        ids = {e for e in self._owners.ids if _NUMERIC.fullmatch(e)}
        ids.update(a.user_id for a in self.store.approved(self.channel) if a.owner)
        return sorted(ids)

    def trust(self, facts: ChatFacts) -> Trust | None:
        """The trust the current rules give a chat with these facts; None: not served."""
        if not facts.private:
            return Trust.GROUP if self.group(*facts.group_ids) else None
        user_id = facts.user_id
        username = facts.username if self._names else None
        if not user_id:
            return None
        if self._owners.match(user_id, username):
            return Trust.OWNER
        approval = self.store.lookup(self.channel, user_id)
        if approval is not None and approval.owner:
            return Trust.OWNER
        if approval is not None or self._allowed.star or self._allowed.match(user_id, username):
            return Trust.ALLOWED
        return None

    def admit(self, facts: ChatFacts, *, name: str | None = None) -> Decision:
        """What a channel does with a new message: its trust, or silence / a pairing reply.
        `name`: the sender's platform name where it decides nothing (Discord), kept beside
        the id of a pairing request so the owner sees who asks."""
        trust = self.trust(facts)
        if trust is not None or not facts.private or self.config.dm_policy != "pairing":
            return Decision(trust)
        return self._pairing(facts.user_id, facts.username if self._names else name)

    def is_owner(self, user_id: str, username: str | None = None) -> bool:
        return self.trust(ChatFacts(private=True, user_id=user_id, username=username)) is (
            Trust.OWNER
        )

    def private(self, user_id: str, username: str | None = None) -> Decision:
        """`admit` for a private chat with this sender."""
        return self.admit(ChatFacts(private=True, user_id=str(user_id), username=username))

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
            crowded = owned and self.store.crowded(self.channel, MAX_PENDING_PER_CHANNEL)
            code = self.store.request(
                self.channel, user_id, username, cap=MAX_PENDING_PER_CHANNEL if owned else None
            )
        except PairingError as exc:
            # The owner must fix the store; meanwhile strangers stay out, quietly.
            log.warning("%s: pairing unavailable: %s", self.channel, exc)
            return Decision(None)
        notice = self._flood_notice(crowded)
        now = self._clock()
        told, last = self._replied_at.get(user_id, (None, None))
        if last is not None and told == code and now - last < PAIRING_REPLY_INTERVAL:
            return Decision(None, owner_notice=notice)
        self._forget_before(now - PAIRING_REPLY_INTERVAL)
        self._replied_at[user_id] = (code, now)
        log.info("%s: pairing code sent to unknown user %s", self.channel, user_id)
        reply = pairing_message(self.channel, user_id, code, owned=owned)
        return Decision(None, reply=reply, owner_notice=notice)

    def _flood_notice(self, crowded: bool) -> str | None:
        """The owner's one message about a flood of pairing requests, when one just began."""
        if not crowded:
            self._flood_told = False
            return None
        if self._flood_told:
            return None
        self._flood_told = True
        log.warning(
            "%s: %d pairing codes are pending and strangers keep asking: the oldest codes "
            "expire early to make room (see clawgate pairing list)",
            self.channel,
            MAX_PENDING_PER_CHANNEL,
        )
        return flood_message(self.channel)

    def _forget_before(self, cutoff: float) -> None:
        for sender in [s for s, (_, at) in self._replied_at.items() if at <= cutoff]:
            del self._replied_at[sender]


# Channels only the owner can reach: the terminal and the dashboard's chat.
OWNER_CHANNELS = frozenset({"cli", "web"})


class AccessPolicies:
    """`AccessPolicy.trust` for every channel, as the gateway asks it at handling time."""

    def __init__(self, policies: Mapping[str, AccessPolicy]) -> None:
        self._policies = dict(policies)

    @classmethod
    def from_config(cls, config: Config) -> AccessPolicies:
        """Every chat channel's rules from the config, approvals from `<data_dir>/pairing.json`."""
        store = PairingStore(config.pairing_file)
        return cls({name: AccessPolicy(name, rules, store) for name, rules in config.channels})

    def decide(self, channel: str, facts: ChatFacts | None, declared: Trust) -> Trust | None:
        """The trust a message of `channel` gets now; None: it is not served.

        `cli` (the terminal: whoever holds it owns the workspace) and `web` (the dashboard's
        chat, reached only with the owner's dashboard token) are the owner. A chat
        channel's trust comes only from its rules and the facts; without facts (a message
        stored before facts were recorded) it is not served. A channel without access rules
        (a test's recording channel) keeps the trust it declared."""
        if channel in OWNER_CHANNELS:
            return Trust.OWNER
        policy = self._policies.get(channel)
        if policy is None:
            return declared
        return policy.trust(facts) if facts is not None else None

    def sender_is_owner(self, channel: str, facts: ChatFacts | None) -> bool:
        """Whether the sender would be the owner in a private chat: the owner keeps the
        owner-only commands in a group, where the message itself has group trust."""
        if channel in OWNER_CHANNELS:
            return True
        policy = self._policies.get(channel)
        if policy is None or facts is None or not facts.user_id:
            return False
        alone = ChatFacts(private=True, user_id=facts.user_id, username=facts.username)
        return policy.trust(alone) is Trust.OWNER

    def for_chat(self, channel: str, facts: ChatFacts | None, recorded: Trust) -> Trust | None:
        """`decide` for a scheduled run reporting to a chat, from the facts it recorded last.
        A chat channel's chat without facts (never seen, or seen before facts were kept)
        counts as `allowed` (`group` if it was one), never as owner."""
        if facts is None and channel in self._policies:
            return Trust.GROUP if recorded is Trust.GROUP else Trust.ALLOWED
        return self.decide(channel, facts, recorded)


def flood_message(channel: str) -> str:
    return (
        f"Many strangers are asking to pair on {channel}: {MAX_PENDING_PER_CHANNEL} codes are "
        "pending, so each new request replaces the oldest code. I tell you this once.\n"
        "To see them: clawgate pairing list\n"
        "To drop them all: clawgate pairing clear"
    )


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
            f"{command()} pairing approve {code} --owner\n"
            f"The code expires in {hours} hour."
        )
    return (
        "I only talk with people my owner has approved.\n"
        f"Your {channel} user id: {user_id}\n"
        f"Pairing code: {code}\n"
        "To let you in, the owner runs:\n"
        f"{command()} pairing approve {code}\n"
        f"The code expires in {hours} hour."
    )
