"""Who a session is with, in words: the person's name, the group's title, "terminal", "web
chat"; and the trust it gets now, decided by the gateway's one trust decision
(`channels/access.py`) from the facts the session recorded - never a `?`.

Names come from what the gateway already keeps: approved and pending people
(`pairing.json`), the groups that mentioned a bot (`groups.json`), a Telegram @username
among the facts. What is unknown reads as the platform and its id ("telegram user 42").
Reading those files blocks: build a `Directory` in a thread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from clawgate.channels.access import AccessPolicies
from clawgate.channels.pairing import PairingStore
from clawgate.gateway.setup import approvals
from clawgate.kernel.bus import ChatFacts, Trust
from clawgate.kernel.config import Config

# How a group's user message names its speaker (agent/loop.py `_user_content`).
SPEAKER = re.compile(r"^\[([^\]\n]{1,100})\] ")


def speaker(content: str) -> tuple[str, str]:
    """(speaker, text) of a group's user message; ("", content) when it names nobody."""
    match = SPEAKER.match(content)
    return (match.group(1), content[match.end() :]) if match else ("", content)


@dataclass(frozen=True)
class Directory:
    """The names and rules a page needs to describe sessions, read once per page."""

    people: dict[tuple[str, str], str]  # (platform, user id) -> name
    groups: dict[tuple[str, str], str]  # (platform, group id) -> title
    policies: AccessPolicies

    @classmethod
    def read(cls, config: Config) -> Directory:
        pairing = PairingStore(config.pairing_file)
        people: dict[tuple[str, str], str] = {}
        for pending in pairing.pending():
            if pending.username:
                people[(pending.channel, pending.user_id)] = pending.username
        for approved in pairing.approved():  # an approval's name over a request's
            if approved.username:
                people[(approved.channel, approved.user_id)] = approved.username
        groups = {(g.channel, g.group_id): g.title for g in approvals.seen(config) if g.title}
        return cls(people, groups, AccessPolicies.from_config(config))

    def name(self, key: str, facts: ChatFacts | None) -> str:
        channel, _, chat = key.partition(":")
        platform = channel.split("@", 1)[0]
        if platform == "cli":
            return "terminal" if chat in ("", "default") else f"terminal ({chat})"
        if platform == "web":
            return "web chat" if chat == "owner" else f"web chat ({chat})"
        if (facts is not None and not facts.private) or chat.startswith("-"):
            group = chat.split("/", 1)[0]
            ids = (group, *(facts.group_ids if facts is not None else ()))
            for found in ids:
                if (platform, found) in self.groups:
                    return self.groups[(platform, found)]
            return f"{platform} group {group}"
        user = facts.user_id if facts is not None and facts.user_id else chat
        if (platform, user) in self.people:
            return self.people[(platform, user)]
        if facts is not None and facts.username:
            return f"@{facts.username}"
        return f"{platform} user {user}"

    def trust(self, key: str, facts: ChatFacts | None, recorded: str | None) -> str:
        """The trust the chat's next message would get; "not served" when the rules no
        longer let it in (a person revoked, a group no longer allowed)."""
        channel = key.partition(":")[0].split("@", 1)[0]
        try:
            declared = Trust(recorded) if recorded else Trust.ALLOWED
        except ValueError:
            declared = Trust.ALLOWED
        decided = self.policies.for_chat(channel, facts, declared)
        return decided.value if decided is not None else "not served"
