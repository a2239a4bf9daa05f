"""A send another process may try again (a cluster's outbound row cut off by a kill) carries a
key; Discord's channel turns it into each part's nonce with enforce_nonce, so trying the
same send again, here or on another worker, posts nothing twice (the fake keeps Discord's
nonce window), while the same text without a key is a new message."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from clawgate.channels.discord import create_channel
from clawgate.kernel.bus import MessageBus, OutboundMessage
from clawgate.kernel.config import AgentConfig
from tests.discord_world import World
from tests.fakes.discord import FakeDiscord


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


async def test_a_send_tried_again_under_its_key_posts_once(
    tmp_path: Path, agent_config: AgentConfig, fake: FakeDiscord
) -> None:
    world = World(fake, tmp_path, agent_config)
    long = " ".join(f"word{i}" for i in range(500))  # over 2000 characters: two messages
    reply = OutboundMessage(channel="discord", chat_id=world.owner_dm, text=long, dedupe_key="cg41")
    for _ in range(2):  # the first worker's try, then the next holder's
        channel = create_channel(world.discord, MessageBus(), world.config)
        assert channel.dedupes_sends
        await channel.send(reply)
    posted = fake.sent_to(world.owner_dm)
    assert len(posted) == 2 and "".join(m.content for m in posted).count("word499") == 1

    await channel.send(reply.model_copy(update={"dedupe_key": None}))
    assert len(fake.sent_to(world.owner_dm)) == 4
