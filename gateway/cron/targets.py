"""Where a job's reply can go: the chats a workspace knows, the one a job goes to when the
owner names none, and why a job's target cannot be reached.

A target is a session key, `<channel>:<chat id>`. The chats known are the live session
files: each recorded the platform facts of its latest message (agent/session/state.py), and
the access rules (channels/access.py) say what trust that chat gets now. A job added without
a target goes to `heartbeat.deliver_to` when that is set, else to the owner's private chat
when exactly one is known; with none or several, the caller is refused with the chats to
pick from, never sent to the terminal (`cli:default` reaches someone only while
`clawgate agent` is open beside the gateway, so a reminder there usually reaches no one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from clawgate.agent.session import SessionStore, load_session
from clawgate.channels.access import OWNER_CHANNELS, AccessPolicies
from clawgate.kernel.bus import Trust
from clawgate.kernel.errors import CronError

if TYPE_CHECKING:
    from clawgate.kernel.config import Config

TERMINAL = "cli"


@dataclass(frozen=True)
class KnownChat:
    key: str
    trust: Trust | None  # what the rules give the chat now; None: no longer served
    private: bool

    def describe(self) -> str:
        trust = self.trust.value if self.trust is not None else "not served"
        return f"{self.key} ({trust}, {'private' if self.private else 'group'})"


def known_chats(config: Config) -> list[KnownChat]:
    """Every platform chat with a live session, and the trust the rules give it now."""
    trusts = AccessPolicies.from_config(config)
    store = SessionStore(config.workspace / "sessions")
    found = []
    for key, path in store.list_keys():
        channel = key.partition(":")[0]
        if channel in OWNER_CHANNELS:
            continue
        state = load_session(path, key, live_only=True).state
        trust = trusts.for_chat(channel, state.chat, state.trust or Trust.ALLOWED)
        private = state.chat.private if state.chat is not None else trust is not Trust.GROUP
        found.append(KnownChat(key, trust, private))
    return found


def default_target(config: Config) -> str:
    """The target of a job added without one; CronError naming the chats to pick from."""
    if config.heartbeat.deliver_to:
        return config.heartbeat.deliver_to
    chats = known_chats(config)
    owners = [c for c in chats if c.private and c.trust is Trust.OWNER]
    if len(owners) == 1:
        return owners[0].key
    if owners:
        reason = "the owner has several private chats"
    else:
        reason = "no private chat of the owner is known yet (write to the bot first)"
    listed = ", ".join(c.describe() for c in chats) or "none"
    raise CronError(
        f"{reason}: name the target with --to CHANNEL:CHAT_ID; known chats: {listed}; "
        f"the terminal is {TERMINAL}:default (reached only while `clawgate agent` is open)"
    )


def unreachable(config: Config, target: str, chats: list[KnownChat]) -> str | None:
    """Why a job's reply to `target` would reach no one; None when it can be delivered."""
    channel = target.partition(":")[0]
    if channel == TERMINAL:
        return "the terminal: reached only while `clawgate agent` is open"
    if channel in OWNER_CHANNELS:
        return None
    rules = getattr(config.channels, channel, None)
    if rules is None:
        return f"no channel named {channel!r}"
    if not rules.enabled:
        return f"the {channel} channel is not enabled"
    known = next((c for c in chats if c.key == target), None)
    if known is not None and known.trust is None:
        return "the access rules no longer serve this chat"
    return None
