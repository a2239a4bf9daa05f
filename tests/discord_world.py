"""One Discord guild with one allowed channel, a thread and the owner's DM on FakeDiscord,
and a whole gateway around a Discord channel: shared by the Discord and fault tests."""

from __future__ import annotations

from pathlib import Path

from clawgate.agent.runtime import AgentRuntime
from clawgate.channels.discord import DiscordChannel, create_channel
from clawgate.gateway.daemon import Gateway
from clawgate.kernel.bus import MessageBus
from clawgate.kernel.config import AgentConfig, ChannelsConfig, Config, DiscordConfig
from tests.fakes.discord import FakeDiscord
from tests.harness import make_config

OWNER = "310000000000000001"


class World:
    """One guild with one allowed channel, an owner DM, and a config pointing at the fake."""

    def __init__(
        self, fake: FakeDiscord, tmp_path: Path, agent: AgentConfig, *, allow_guild: bool = True
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
        )
        self.config: Config = make_config(
            tmp_path, agent, channels=ChannelsConfig(discord=self.discord)
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
        self.gateway = Gateway(self.runtime, [self.channel], self.bus)

    async def __aenter__(self) -> Running:
        await self.gateway.start()
        status = self.gateway.manager.status()["discord"]
        assert status["state"] == "running", status
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.gateway.stop(grace=2)
