"""A Discord bot in two shards on a cluster of two real `clawgate gateway` workers (the fake's
sharded gateway, the fake LLM, the private PostgreSQL): each shard is a lease of its own, the
two land on different workers, and each connects only its shard, so a guild on shard 0 and a
guild on shard 1 are heard by different workers, the owner's DM by shard 0's. Every message
is answered once, in order; a kill -9 of shard 0's worker (the one that sends the bot's
replies), then of shard 1's, moves that shard to the other worker within the lease, and what
was said meanwhile is answered once. `clawgate cluster status` names each shard."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from clawgate.gateway.cli import app
from tests.cluster_helpers import Leases, eventually, worker
from tests.discord_world import MEMBER, OWNER
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import FakeLLM, Reply, text
from tests.process import ClawgateProcess, fake_model, toml_value, write_config

LEASE = 5.0
START_TIMEOUT = 90.0
REPLY_TIMEOUT = 60.0


@pytest.fixture
async def discord() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


def _echo(body: dict[str, Any]) -> Reply:
    said = [m for m in body["messages"] if m.get("role") == "user"][-1]["content"]
    return text(f"re: {str(said).split()[-1]}")


class ShardedHome:
    """One agent on a Discord bot of two shards: a guild on each shard and the owner's DM."""

    def __init__(self, home: Path, url: str, discord: FakeDiscord, llm: FakeLLM) -> None:
        self.discord = discord
        guilds = [discord.add_guild(f"guild {i}", shard=(i, 2)) for i in range(2)]
        self.rooms = [discord.add_text_channel(guild, "general") for guild in guilds]
        self.owner_dm = discord.dm_channel(OWNER, "ann")
        self.expected: dict[str, list[str]] = {chat: [] for chat in (*self.rooms, self.owner_dm)}
        llm.handler = _echo
        channel = {
            "enabled": True,
            "token": discord.token,
            "api_base": discord.api_url,
            "gateway_url": discord.gateway_url,
            "allow_from": [OWNER],
            "group_allow": guilds,
            "streaming": "off",
            "reactions": False,
            "shards": 2,
        }
        cluster = {"database_url": url, "worker_name": "unset", "lease_seconds": LEASE}
        self.config = write_config(
            home,
            agent=fake_model(llm, request_timeout=30),
            telegram={"enabled": False},
            extra="\n".join(
                [
                    "[limits]",
                    "messages_per_minute = 0",
                    "[channels.discord]",
                    *(f"{key} = {toml_value(value)}" for key, value in channel.items()),
                    "[cluster]",
                    *(f"{key} = {toml_value(value)}" for key, value in cluster.items()),
                ]
            ),
        )

    async def say(self, chat: str, note: str) -> None:
        if chat == self.owner_dm:
            await self.discord.user_says(chat, note, author_id=OWNER, username="ann")
        else:
            await self.discord.user_says(
                chat, note, author_id=MEMBER, username="bob", mentions_bot=True
            )
        self.expected[chat].append(f"re: {note}")

    async def everywhere(self, word: str) -> None:
        for i, room in enumerate(self.rooms):
            await self.say(room, f"shard{i}-{word}")
        await self.say(self.owner_dm, f"dm-{word}")

    async def answered(self) -> bool:
        """Every message answered, once, in order (more than expected fails at once)."""
        for chat, texts in self.expected.items():
            sent = [m.content for m in self.discord.sent_to(chat)]
            assert sent == texts[: len(sent)], (chat, sent, texts)
            if len(sent) < len(texts):
                return False
        return True


@pytest.mark.long
async def test_a_sharded_bot_spreads_over_workers_and_a_killed_shard_moves(
    tmp_path: Path, database_url: str, discord: FakeDiscord, fake_llm: FakeLLM
) -> None:
    home = ShardedHome(tmp_path, database_url, discord, fake_llm)
    leases = await Leases.open(database_url)
    workers = {name: worker(tmp_path, home.config, name) for name in ("w1", "w2")}

    async def spread() -> bool:
        """One shard on each worker, both connected, the agent held."""
        bots = await leases.holders("bot")
        shards = sorted(r for r in bots if r.endswith(("/0of2", "/1of2")))
        return (
            len(bots) == 2
            and len(shards) == 2
            and set(bots.values()) == {"w1", "w2"}
            and len(await leases.holders("agent")) == 1
            and discord.connected_shards() == {(0, 2), (1, 2)}
        )

    async def holder_of(shard: int) -> str:
        bots = await leases.holders("bot")
        return next(w for r, w in bots.items() if r.endswith(f"/{shard}of2"))

    async def kill_the_holder_of(shard: int) -> None:
        victim = await holder_of(shard)
        survivor = next(n for n in workers if n != victim)
        workers[victim].send_signal(signal.SIGKILL)
        # Said while that shard has no connection: caught up on by its next holder.
        await home.everywhere(f"while-{shard}-moves")

        async def moved() -> bool:
            held = await leases.holders("")
            return len(held) == 3 and set(held.values()) == {survivor}

        await eventually(moved, LEASE + 5)
        await eventually(home.answered, REPLY_TIMEOUT)
        # Back to two workers, a shard on each.
        await workers[victim].close()
        workers[victim] = worker(tmp_path, home.config, victim)
        await workers[victim].start()
        await eventually(spread, START_TIMEOUT)

    try:
        for process in workers.values():
            await process.start()
        await eventually(spread, START_TIMEOUT)
        await home.everywhere("one")
        await eventually(home.answered, REPLY_TIMEOUT)
        # Each shard's journal and watermarks in a folder of its own; none for the whole bot.
        state = tmp_path / "data" / "channels" / "discord"
        assert (state / "shard-0of2" / "state.json").exists()
        assert (state / "shard-1of2" / "state.json").exists()
        assert not (state / "state.json").exists()

        await kill_the_holder_of(0)
        await home.everywhere("two")
        await eventually(home.answered, REPLY_TIMEOUT)
        await kill_the_holder_of(1)
        await home.everywhere("three")
        await eventually(home.answered, REPLY_TIMEOUT)

        # Replies in a guild quote what they answer, whichever shard heard it; in a DM not.
        for room in home.rooms:
            assert all(m.reference for m in discord.sent_to(room))
        assert not any(m.reference for m in discord.sent_to(home.owner_dm))

        status = await asyncio.to_thread(
            CliRunner().invoke, app, ["--config", str(home.config), "cluster", "status"]
        )
        assert status.exit_code == 0, status.output
        for shard in (0, 1):
            assert f"of2 (discord shard {shard} of 2)" in status.output, status.output
    finally:
        for process in workers.values():
            await process.close()
        await leases.close()


async def test_one_shard_is_the_whole_bot_as_before(
    tmp_path: Path, database_url: str, discord: FakeDiscord, fake_llm: FakeLLM
) -> None:
    """`shards = 1`: the bot's one lease and folder as before sharding existed."""
    home = ShardedHome(tmp_path, database_url, discord, fake_llm)
    home.config.write_text(home.config.read_text().replace("shards = 2", "shards = 1"))
    leases = await Leases.open(database_url)
    process: ClawgateProcess = worker(tmp_path, home.config, "w1")
    try:
        await process.start()

        async def connected() -> bool:
            bots = await leases.holders("bot")
            return len(bots) == 1 and discord.connected_shards() == {(0, 1)}

        await eventually(connected, START_TIMEOUT)
        (bot,) = await leases.holders("bot")
        assert "/" not in bot
        await home.everywhere("one")
        await eventually(home.answered, REPLY_TIMEOUT)
        assert (tmp_path / "data" / "channels" / "discord" / "state.json").exists()
    finally:
        await process.close()
        await leases.close()
