"""One Discord guild with one allowed channel, a thread and the owner's DM on FakeDiscord,
and a whole gateway around a Discord channel: shared by the Discord and fault tests.
`GatewayHome`: the same on the real `clawgate gateway` process, for the restart tests and
bench/soak.py's Discord lane."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from clawgate.agent.runtime import AgentRuntime
from clawgate.channels.discord import DiscordChannel, create_channel
from clawgate.gateway.daemon.gateway import Gateway
from clawgate.kernel.bus import MessageBus
from clawgate.kernel.config import AgentConfig, ChannelsConfig, Config, DiscordConfig
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import FakeLLM, Reply, delay, hang, text
from tests.harness import make_config
from tests.process import ClawgateProcess, fake_model, toml_value, write_config

OWNER = "310000000000000001"
MEMBER = "310000000000000003"
READY = "channel discord ready"
NOTE = re.compile(r"note-[\w-]+")


class World:
    """One guild with one allowed channel, an owner DM, and a config pointing at the fake."""

    def __init__(
        self,
        fake: FakeDiscord,
        tmp_path: Path,
        agent: AgentConfig,
        *,
        allow_guild: bool = True,
        streaming: Literal["edit", "off"] = "off",
        reactions: bool = False,
        **overrides: object,
    ) -> None:
        self.fake = fake
        self.guild = fake.add_guild("Home")
        self.general = fake.add_text_channel(self.guild, "general")
        self.thread = fake.add_thread(self.general, "plans")
        self.owner_dm = fake.dm_channel(OWNER, "ann")
        self.discord = DiscordConfig(
            enabled=True,
            token=fake.token,
            api_base=fake.api_url,
            gateway_url=fake.gateway_url,
            allow_from=[OWNER],
            # A guild id serves all its channels; a channel id serves it and its threads.
            group_allow=[self.guild if allow_guild else self.general],
            # Replies sent whole, as before streaming: the tests that stream say so.
            streaming=streaming,
            reactions=reactions,
        )
        self.config: Config = make_config(
            tmp_path, agent, channels=ChannelsConfig(discord=self.discord), **overrides
        )

    def running(self, **options: object) -> Running:
        return Running(self, **options)


class Running:
    """A whole gateway (bus, dispatcher, runtime, manager) with one Discord channel."""

    def __init__(self, world: World, **options: object) -> None:
        self.bus = MessageBus()
        self.runtime = AgentRuntime.build(world.config, outbox=self.bus.publish_outbound)
        options = {"guild_ready_timeout": 0.05, "retry_delays": (0.01, 0.02, 0.04), **options}
        self.channel: DiscordChannel = create_channel(
            world.discord, self.bus, world.config, **options
        )
        self.gateway = Gateway([(self.runtime, self.bus)], [self.channel], self.bus)

    async def __aenter__(self) -> Running:
        await self.gateway.start()
        status = self.gateway.manager.status()["discord"]
        assert status["state"] == "running", status
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.gateway.stop(grace=2)


@dataclass(frozen=True)
class Said:
    chat: str
    message_id: int
    note: str  # "note-...": what the model's reply echoes


class GatewayHome:
    """A home for the real `clawgate gateway`: one guild channel and the owner's DM on
    `fake`, and `llm` answering "re: <note>" for the last "note-..." it was sent (after
    `slow` seconds, or never while `hold`). Consolidation is out of the way (a large memory
    window).
    """

    def __init__(
        self, home: Path, fake: FakeDiscord, llm: FakeLLM, **discord_options: object
    ) -> None:
        self.home = home
        self.fake = fake
        self.llm = llm
        self.guild = fake.add_guild("Home")
        self.general = fake.add_text_channel(self.guild, "general")
        self.owner_dm = fake.dm_channel(OWNER, "ann")
        self.hold = False
        self.slow = 0.0  # seconds each chat turn takes at the model, when not held
        self.said: list[Said] = []
        llm.handler = self._model
        discord = {
            "enabled": True,
            "token": fake.token,
            "api_base": fake.api_url,
            "gateway_url": fake.gateway_url,
            "allow_from": [OWNER],
            "group_allow": [self.guild],
            # Replies sent whole, as before streaming: the tests that stream say so.
            "streaming": "off",
            "reactions": False,
            **discord_options,
        }
        self.config = write_config(
            home,
            # A held turn outlives the shutdown grace; 20 s of it would only be waited out.
            agent={
                **fake_model(llm, request_timeout=60),
                "memory_window": 1000,
                "shutdown_grace_seconds": 3,
            },
            # Not under test: the per-sender flood limit (a restart replays a backlog at once).
            extra="\n".join(
                [
                    "[limits]",
                    "messages_per_minute = 0",
                    "[channels.discord]",
                    *(f"{key} = {toml_value(value)}" for key, value in discord.items()),
                ]
            ),
        )
        self.state = home / "data" / "channels" / "discord" / "state.json"

    def _model(self, body: dict[str, Any]) -> Reply:
        if self.hold:
            return hang()
        users = [m for m in body["messages"] if m.get("role") == "user"]
        notes = NOTE.findall(str(users[-1]["content"])) if users else []
        reply = text(f"re: {notes[-1]}" if notes else "re: ?")
        return delay(self.slow, reply) if self.slow else reply

    def gateway(self) -> ClawgateProcess:
        return ClawgateProcess(self.home, "--config", str(self.config), "gateway")

    async def say(self, chat: str, note: str) -> Said:
        """The owner in its DM, or a member mentioning the bot in #general."""
        if chat == self.owner_dm:
            message = await self.fake.user_says(chat, note, author_id=OWNER, username="ann")
        else:
            message = await self.fake.user_says(
                chat, note, author_id=MEMBER, username="bob", mentions_bot=True
            )
        said = Said(chat, int(message["id"]), note)
        self.said.append(said)
        return said

    def replies(self, chat: str) -> list[str]:
        return [m.content for m in self.fake.sent_to(chat)]

    def answered(self) -> Counter[str]:
        """How often each note was answered, over every chat."""
        return Counter(m.content.removeprefix("re: ") for m in self.fake.sent)

    def all_answered(self) -> bool:
        answered = self.answered()
        return all(answered[s.note] for s in self.said)

    def watermark(self, chat: str) -> int:
        """The channel's saved watermark for `chat` (0 before the first save)."""
        try:
            return int(json.loads(self.state.read_text())["last_seen"].get(chat, 0))
        except (FileNotFoundError, ValueError):
            return 0
