"""Replies that stream into Discord: the real discord.py against FakeDiscord (POST, then PATCH
of the same message), the real gateway, FakeLLM streaming. The channel throttles on virtual
time (`Sleeps.clock`)."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from clawgate.channels.live import CUT_LINE, STOPPED_LINE
from clawgate.channels.split import split_message
from clawgate.kernel.config import AgentConfig
from tests.discord_world import OWNER, GatewayHome, World
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import FakeLLM, cut, error, gate, pause, text, tool_call
from tests.harness import wait_until
from tests.telegram_world import Sleeps

MEMBER = "310000000000000003"
WORDS = " ".join(f"word{n}" for n in range(80))


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


@pytest.fixture
def world(fake: FakeDiscord, tmp_path: Path, agent_config: AgentConfig) -> World:
    return World(fake, tmp_path, agent_config, streaming="edit")


def virtual() -> dict[str, Any]:
    sleeps = Sleeps()
    return {"sleep": sleeps, "clock": sleeps.clock}


def of_type(world: World, chat: str, kind: str) -> list[dict[str, Any]]:
    path = world.config.workspace / "sessions" / f"discord_{chat}.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [r for r in lines if r.get("type") == kind]


async def owner_says(world: World, fake: FakeDiscord, said: str) -> None:
    await fake.user_says(world.owner_dm, said, author_id=OWNER, username="ann")


async def test_a_reply_shows_early_and_is_edited_into_the_whole_text(
    world: World, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    release = asyncio.Event()
    fake_llm.script(pause(release, text(f"**Sure.** {WORDS}"), after=12))
    async with world.running(**virtual()):
        await owner_says(world, fake, "tell me")
        live = await fake.next_message(world.owner_dm)
        assert len(live.content) >= 30 and live.content.startswith("**Sure.** word0")
        release.set()
        await wait_until(lambda: fake.content_of(world.owner_dm, live.id) == f"**Sure.** {WORDS}")
    assert fake.sent_to(world.owner_dm) == [live]
    assert [r["status"] for r in of_type(world, world.owner_dm, "delivery")] == ["sent"]
    assert len(of_type(world, world.owner_dm, "streamed")) == 1


async def test_a_429_on_an_edit_is_waited_out_and_the_final_text_arrives(
    world: World, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    release = asyncio.Event()
    fake_llm.script(pause(release, text(WORDS), after=12))
    async with world.running(**virtual()):
        await owner_says(world, fake, "tell me")
        live = await fake.next_message(world.owner_dm)
        route = f"PATCH /channels/{world.owner_dm}/messages/{live.id}"
        fake.fail_next(route, 429, retry_after=0.2)
        release.set()
        await wait_until(lambda: fake.content_of(world.owner_dm, live.id) == WORDS)
    assert fake.count(route) >= 2  # the refused edit, then the one that took
    assert fake.sent_to(world.owner_dm) == [live]


async def test_a_deleted_live_message_gets_one_follow_up(
    world: World, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    release = asyncio.Event()
    fake_llm.script(pause(release, text(WORDS), after=12))
    async with world.running(**virtual()):
        await owner_says(world, fake, "tell me")
        live = await fake.next_message(world.owner_dm)
        fake.delete_message(world.owner_dm, live.id)
        release.set()
        follow_up = await fake.next_message(world.owner_dm)
    assert follow_up.content == WORDS
    assert fake.sent_to(world.owner_dm) == [live, follow_up]
    assert [r["status"] for r in of_type(world, world.owner_dm, "delivery")] == ["sent"]


async def test_stop_mid_stream_leaves_the_text_with_a_stopped_marker(
    world: World, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    fake_llm.script(pause(asyncio.Event(), text(WORDS), after=12))
    async with world.running(**virtual()):
        await owner_says(world, fake, "tell me")
        live = await fake.next_message(world.owner_dm)
        await owner_says(world, fake, "/stop")
        await wait_until(lambda: fake.content_of(world.owner_dm, live.id).endswith(STOPPED_LINE))
    assert fake.content_of(world.owner_dm, live.id).startswith(live.content.rstrip())
    assert fake.sent_to(world.owner_dm) == [live]


async def test_a_10000_character_reply_continues_in_new_messages(
    world: World, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    block = "```py\n" + "\n".join(f"x_{n} = {n}" for n in range(150)) + "\n```"
    reply = f"{WORDS}\n\n{block}\n\n" + " ".join(f"tail{n}" for n in range(1200))
    assert len(reply) > 10_000
    parts = split_message(reply, 2000)
    release = asyncio.Event()
    fake_llm.script(pause(release, text(reply), after=12))
    async with world.running(**virtual()):
        await owner_says(world, fake, "a long one")
        live = await fake.next_message(world.owner_dm)
        release.set()
        await wait_until(lambda: len(fake.sent_to(world.owner_dm)) == len(parts))
    sent = fake.sent_to(world.owner_dm)
    shown = [fake.content_of(world.owner_dm, live.id), *(m.content for m in sent[1:])]
    assert shown == parts  # the usual split: code blocks closed and reopened, never broken
    assert [r["status"] for r in of_type(world, world.owner_dm, "delivery")] == ["sent"]


async def test_a_guild_reply_quotes_the_message_and_shows_the_tool_name_only(
    world: World, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    release = asyncio.Event()
    fake_llm.script(tool_call("list_dir", path="secret-folder"), gate(release, text(WORDS)))
    async with world.running(**virtual()):
        said = await fake.user_says(
            world.general, "what is here?", author_id=MEMBER, username="bob", mentions_bot=True
        )
        live = await fake.next_message(world.general)
        assert live.content == "⏳ list_dir"
        release.set()
        await wait_until(lambda: fake.content_of(world.general, live.id) == WORDS)
    assert live.reference == said["id"]
    assert fake.sent_to(world.general) == [live]


async def test_streaming_off_sends_the_reply_whole(
    fake: FakeDiscord, tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    world = World(fake, tmp_path, agent_config, streaming="off")
    fake_llm.script(text(WORDS))
    async with world.running():
        await owner_says(world, fake, "tell me")
        assert (await fake.next_message(world.owner_dm)).content == WORDS
    assert fake.edits == []
    assert not fake_llm.requests[-1].get("stream")


async def test_kill_9_mid_stream_leaves_one_message_marked_cut_and_answers_nothing_twice(
    tmp_path: Path, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    home = GatewayHome(tmp_path, fake, fake_llm, streaming="edit")
    held = asyncio.Event()
    fake_llm.handler = lambda body: pause(held, text(f"re: first {WORDS}"), after=12)
    streams = tmp_path / "data" / "channels" / "discord" / "streams.jsonl"
    async with home.gateway() as gateway:
        await gateway.wait_for_log("channel discord ready", 30)
        await home.say(home.owner_dm, "note-first")
        live = await fake.next_message(home.owner_dm, timeout=60)
        await wait_until(lambda: '"shown"' in streams.read_text(), timeout=10)
        gateway.send_signal(signal.SIGKILL)
        assert await gateway.wait(25) == -signal.SIGKILL
    asked = len(fake_llm.requests)

    fake_llm.handler = lambda body: text("A fresh answer.")
    async with home.gateway() as gateway:
        await gateway.wait_for_log("channel discord ready", 30)
        await wait_until(
            lambda: fake.content_of(home.owner_dm, live.id).endswith(CUT_LINE), timeout=20
        )
        await home.say(home.owner_dm, "note-second")
        reply = await fake.next_message(home.owner_dm, timeout=60)
        gateway.send_signal(signal.SIGTERM)
        assert await gateway.wait(25) == 0
    assert reply.content == "A fresh answer."
    assert len(fake_llm.requests) == asked + 1
    assert fake.sent_to(home.owner_dm) == [live, reply]
    assert fake.content_of(home.owner_dm, live.id).startswith(live.content.rstrip())


async def test_a_model_error_mid_stream_replaces_the_unfinished_line_with_the_error(
    fake: FakeDiscord, tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    once = agent_config.model_copy(update={"max_retries": 0})
    world = World(fake, tmp_path, once, streaming="edit")
    failed = asyncio.Event()
    lines = "\n".join(f"line {n} of the answer" for n in range(12))
    fake_llm.script(cut(text(lines), error(400, "the model broke"), hold=failed))
    async with world.running(**virtual()):
        await owner_says(world, fake, "tell me")
        live = await fake.next_message(world.owner_dm)
        failed.set()
        await wait_until(lambda: bool(fake.edits) and "line" not in last_line(fake))
    head, _, error_line = fake.content_of(world.owner_dm, live.id).rpartition("\n\n")
    assert lines.startswith(head) and head.startswith("line 0")
    assert error_line and "line" not in error_line
    assert fake.sent_to(world.owner_dm) == [live]


def last_line(fake: FakeDiscord) -> str:
    return str(fake.edits[-1]["content"]).splitlines()[-1]
