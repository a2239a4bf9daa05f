"""Where a message meets its agent: the one place that decides which agent answers.

A channel account is one bot (one token) on one platform. The top-level
`[channels.<platform>]` bot is the shared account; an agent whose merged channel section
names another token has its own account. `Router.agent_for` decides, for a message received
on an account:

    1. the agent the account belongs to (its own bot);
    2. on the shared bot: an agent binding the chat (or a Discord thread's parent channel),
       else one binding the Discord guild, else one binding the whole channel;
    3. else the shared bot's agent: the default agent (or, when the default agent has its
       own bot there, the first agent that has none).

Replies leave through `account_for(agent, platform)`: the agent's own bot, else the shared
one - the account the chat wrote to, since an agent with its own bot on a platform cannot
bind chats of the shared one (checked at load).
"""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import dataclass

from clawgate.kernel.agent_configs import PLATFORMS, own_token
from clawgate.kernel.bus import InboundMessage, MessageBus, OutboundMessage
from clawgate.kernel.config import Binding, Config
from clawgate.kernel.storage import DiskWriter, confine


@dataclass(frozen=True)
class Account:
    """One bot. `key` names its channel instance ("telegram", "telegram@work"); `config` is
    the agent config it is built from (rules, workspace for media, data_dir for its state)."""

    key: str
    platform: str
    owner: str | None  # the agent whose own bot this is; None: the shared bot
    config: Config


class Router:
    def __init__(self, root: Config) -> None:
        self.root = root
        self.agents = {name: root.for_agent(name) for name in root.agent_names()}
        self.accounts: dict[str, Account] = {}
        self._own: dict[tuple[str, str], str] = {}  # (agent, platform) -> account key
        self._shared_agent: dict[str, str] = {}
        for platform in PLATFORMS:
            self._add_accounts(platform)

    def _add_accounts(self, platform: str) -> None:
        for name, agent in self.agents.items():
            if own_token(self.root, agent, platform) is not None:
                key = f"{platform}@{name}"
                self.accounts[key] = Account(key, platform, name, agent)
                self._own[(name, platform)] = key
        shared = self._first(platform)
        if shared is None:
            return
        self._shared_agent[platform] = shared
        if getattr(self.agents[shared].channels, platform).enabled:
            self.accounts[platform] = Account(platform, platform, None, self.agents[shared])

    def _first(self, platform: str) -> str | None:
        """The agent the shared bot belongs to: the default agent unless it has its own bot."""
        for name in [self.root.default_agent, *self.agents]:
            if own_token(self.root, self.agents[name], platform) is None:
                return name
        return None

    # -- inbound ---------------------------------------------------------------------------

    def agent_for(self, account: str, message: InboundMessage) -> str:
        """The agent that answers `message`, received on `account` (see the module doc)."""
        found = self.accounts.get(account)
        if found is not None and found.owner is not None:
            return found.owner
        if message.agent is not None:
            # Set by the sender itself (the control socket's --agent); an unknown name is
            # the gateway's to refuse, not to reroute.
            return message.agent
        platform = found.platform if found is not None else message.channel
        bound = self._bound(platform, message)
        if bound is not None:
            return bound
        return self._shared_agent.get(platform, self.root.default_agent)

    def _bound(self, platform: str, message: InboundMessage) -> str | None:
        ids = message.facts.group_ids if message.facts is not None else ()
        chat = message.chat_id.split("/")[0]  # a Telegram forum topic belongs to its chat
        ranked: list[tuple[int, str]] = []
        for name, spec in self.root.agents.items():
            for binding in spec.bindings:
                rank = _rank(binding, platform, chat, ids)
                if rank is not None:
                    ranked.append((rank, name))
        return min(ranked)[1] if ranked else None

    # -- outbound --------------------------------------------------------------------------

    def account_for(self, agent: str | None, platform: str) -> str:
        """The channel instance a reply of `agent` on `platform` leaves through."""
        if agent is not None and (agent, platform) in self._own:
            return self._own[(agent, platform)]
        return platform

    def accounts_of(self, agent: str) -> list[str]:
        """The channel accounts that serve `agent`: its own bots and the shared ones it
        answers on (as the shared bot's agent or through a binding)."""
        spec = self.root.agents.get(agent)
        bound = {b.channel for b in spec.bindings} if spec is not None else set()
        found = []
        for key, account in self.accounts.items():
            if account.owner == agent or (
                account.owner is None
                and (self._shared_agent.get(account.platform) == agent or account.platform in bound)
            ):
                found.append(key)
        return found


def _rank(binding: Binding, platform: str, chat: str, ids: tuple[str, ...]) -> int | None:
    """0: the chat itself, 1: its guild, 2: the whole channel; None: no match."""
    if binding.channel != platform:
        return None
    if binding.chat is not None:
        return 0 if binding.chat == chat or binding.chat in ids else None
    if binding.guild is not None:
        return 1 if binding.guild in ids else None
    return 2


class AgentBus(MessageBus):
    """The shared bus as one agent sees it: what it publishes carries its name, so replies
    leave through its bot and the gateway hands its messages to its dispatcher."""

    def __init__(self, bus: MessageBus, agent: str) -> None:
        self.inbound = bus.inbound
        self.outbound = bus.outbound
        self.agent = agent

    async def publish_inbound(self, message: InboundMessage) -> None:
        if message.agent is None:
            message = message.model_copy(update={"agent": self.agent})
        await self.inbound.put(message)

    async def publish_outbound(self, message: OutboundMessage) -> None:
        if message.agent is None:
            message = message.model_copy(update={"agent": self.agent})
        await self.outbound.put(message)


class AccountBus(MessageBus):
    """The shared bus as one channel account sees it: what it receives is routed to its
    agent on the way in, attachments included (see `_hand_media`)."""

    def __init__(
        self, bus: MessageBus, account: str, router: Router, writer: DiskWriter | None = None
    ) -> None:
        self.inbound = bus.inbound
        self.outbound = bus.outbound
        self.account = account
        self.router = router
        self._writer = writer or DiskWriter()

    async def publish_inbound(self, message: InboundMessage) -> None:
        await self.inbound.put(await self.routed(message))

    async def routed(self, message: InboundMessage) -> InboundMessage:
        """`message` with the agent that answers it, its attachments in that agent's
        workspace."""
        agent = self.router.agent_for(self.account, message)
        if message.media and agent in self.router.agents:
            await asyncio.to_thread(self._hand_media, agent, message.media)
        return message.model_copy(update={"agent": agent})

    def _hand_media(self, agent: str, media: tuple[str, ...]) -> None:
        """A shared bot saves attachments in its own agent's workspace; one routed to
        another agent moves them, same relative path, into that agent's workspace - the only
        one its tools reach, and one the bot's agent must not keep a copy in."""
        account = self.router.accounts.get(self.account)
        if account is None:
            return
        source_root = account.config.workspace
        target_root = self.router.agents[agent].workspace
        if source_root == target_root:
            return
        for relative in media:
            source = confine(source_root, relative)
            if not source.is_file():
                continue
            target = confine(target_root, relative)
            self._writer.mkdir(target.parent)
            try:
                self._writer.move(source, target)
            except OSError:  # another filesystem: copy, then remove
                shutil.move(source, target)
