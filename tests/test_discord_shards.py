"""A Discord bot split into shards (`[channels.discord] shards`), real discord.py against the
fake's sharded gateway: a channel given one shard connects that shard alone, hears only the
guilds on it (and the DMs, on shard 0) and keeps its own journal; on one machine one client
connects every shard and the gateway answers in each guild; a bad shard count is one line."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from clawgate.channels.discord import create_channel
from clawgate.kernel.bus import InboundMessage, MessageBus
from clawgate.kernel.config import AgentConfig, ChannelsConfig, DiscordConfig, load_config
from clawgate.kernel.errors import ConfigError
from tests.cluster_helpers import eventually
from tests.discord_world import MEMBER, OWNER, World
from tests.fakes.discord import FakeDiscord, shard_of
from tests.fakes.llm import FakeLLM, Reply, text
from tests.harness import make_config

TIMEOUT = 20.0


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


def _echo(body: dict[str, object]) -> Reply:
    said = [m for m in body["messages"] if m.get("role") == "user"][-1]["content"]  # type: ignore[attr-defined]
    return text(f"re: {str(said).split()[-1]}")


async def _received(bus: MessageBus) -> InboundMessage:
    return await asyncio.wait_for(bus.inbound.get(), TIMEOUT)


async def test_a_shard_hears_only_its_guilds_and_shard_0_the_dms(
    fake: FakeDiscord, tmp_path: Path, agent_config: AgentConfig
) -> None:
    guilds = [fake.add_guild(f"g{i}", shard=(i, 2)) for i in range(2)]
    assert [shard_of(g, 2) for g in guilds] == [0, 1]
    rooms = [fake.add_text_channel(g, "general") for g in guilds]
    owner_dm = fake.dm_channel(OWNER, "ann")
    discord = DiscordConfig(
        enabled=True,
        token=fake.token,
        api_base=fake.api_url,
        gateway_url=fake.gateway_url,
        allow_from=[OWNER],
        group_allow=guilds,
        shards=2,
    )
    config = make_config(tmp_path, agent_config, channels=ChannelsConfig(discord=discord))
    buses = [MessageBus(), MessageBus()]
    folders = [tmp_path / "data" / "channels" / "discord" / f"shard-{i}of2" for i in range(2)]
    channels = [
        create_channel(
            discord,
            buses[i],
            config,
            shard=(i, 2),
            state_dir=folders[i],
            guild_ready_timeout=0.05,
        )
        for i in range(2)
    ]
    try:
        for channel in channels:
            await channel.start()
        assert fake.connected_shards() == {(0, 2), (1, 2)}
        assert sorted(fake.identified) == [(0, 2), (1, 2)]

        await fake.user_says(
            rooms[1], "second", author_id=MEMBER, username="bob", mentions_bot=True
        )
        await fake.user_says(rooms[0], "first", author_id=MEMBER, username="bob", mentions_bot=True)
        await fake.user_says(owner_dm, "private", author_id=OWNER, username="ann")
        one = await _received(buses[1])
        assert (one.chat_id, one.text.split()[-1]) == (rooms[1], "second")
        zero = [await _received(buses[0]) for _ in range(2)]
        assert [(m.chat_id, m.text.split()[-1]) for m in zero] == [
            (rooms[0], "first"),
            (owner_dm, "private"),
        ]
        assert buses[0].inbound.empty() and buses[1].inbound.empty()
        # Each shard's own journal, and nothing in it left to answer: the bus has it.
        for folder, chats in zip(folders, ([rooms[0], owner_dm], [rooms[1]]), strict=True):
            journal = (folder / "journal.jsonl").read_text()
            assert all(chat in journal for chat in chats), journal

        async def all_stored() -> bool:
            return not any(channel.journal.pending for channel in channels)

        await eventually(all_stored, TIMEOUT)
        assert not (tmp_path / "data" / "channels" / "discord" / "journal.jsonl").exists()
    finally:
        for channel in channels:
            await channel.stop()


async def test_one_machine_connects_every_shard_and_answers_in_each_guild(
    fake: FakeDiscord, tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = _echo
    world = World(fake, tmp_path, agent_config)
    # The world's guild is on one shard of two; a second guild on the other.
    other = fake.add_guild("Other", shard=(1 - shard_of(world.guild, 2), 2))
    room = fake.add_text_channel(other, "general")
    world.discord = world.discord.model_copy(
        update={"shards": 2, "group_allow": [world.guild, other]}
    )
    world.config = world.config.model_copy(
        update={"channels": ChannelsConfig(discord=world.discord)}
    )
    async with world.running():
        assert fake.connected_shards() == {(0, 2), (1, 2)}
        for chat in (world.general, room):
            await fake.user_says(chat, "hello", author_id=MEMBER, username="bob", mentions_bot=True)
            assert (await fake.next_message(chat, TIMEOUT)).content == "re: hello"
        await fake.user_says(world.owner_dm, "hi", author_id=OWNER, username="ann")
        assert (await fake.next_message(world.owner_dm, TIMEOUT)).content == "re: hi"


def test_a_shard_count_out_of_range_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[channels.discord]\nshards = 0\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert "channels.discord.shards" in message and "\n" not in message
