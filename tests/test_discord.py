"""Discord through the real discord.py against FakeDiscord, with the real gateway and FakeLLM."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import discord
import pytest
from pydantic import SecretStr

from clawgate.channels.discord import create_channel
from clawgate.channels.discord.client import intents, point_at
from clawgate.kernel.bus import MessageBus, OutboundMessage, Trust
from clawgate.kernel.config import AgentConfig
from clawgate.kernel.errors import ChannelError
from tests.discord_world import OWNER, World
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import FakeLLM, gate, text

STRANGER = "310000000000000002"
MEMBER = "310000000000000003"


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


@pytest.fixture
def world(fake: FakeDiscord, tmp_path: Path, agent_config: AgentConfig) -> World:
    return World(fake, tmp_path, agent_config)


def user_text(request: dict) -> str:
    return next(m["content"] for m in reversed(request["messages"]) if m["role"] == "user")


# -- the fake's own rules, driven by discord.py ------------------------------------------


async def logged_in_client(fake: FakeDiscord) -> discord.Client:
    point_at(fake.api_url, fake.gateway_url)
    client = discord.Client(intents=intents())
    await client.login(fake.token)
    return client


async def test_fake_enforces_2000_chars_and_non_empty(fake: FakeDiscord) -> None:
    channel_id = fake.add_text_channel(fake.add_guild())
    client = await logged_in_client(fake)
    try:
        target = client.get_partial_messageable(int(channel_id))
        await target.send("x" * 2000)
        with pytest.raises(discord.HTTPException) as too_long:
            await target.send("x" * 2001)
        assert too_long.value.status == 400 and too_long.value.code == 50035
        with pytest.raises(discord.HTTPException) as empty:
            await target.send("")
        assert empty.value.code == 50006
        await target.send(file=discord.File(io.BytesIO(b"data"), "a.txt"))
    finally:
        await client.close()
    assert [len(m.content) for m in fake.sent_to(channel_id)] == [2000, 0]
    assert fake.sent_to(channel_id)[1].files == (("a.txt", b"data"),)


async def test_fake_answers_exactly_application_json(fake: FakeDiscord) -> None:
    client = await logged_in_client(fake)
    try:
        # discord.py only parses JSON under exactly this content type: login building a user
        # from the body proves the fake sends it.
        assert client.user is not None and client.user.name == fake.bot["username"]
    finally:
        await client.close()
    async with aiohttp.ClientSession() as session:
        headers = {"Authorization": f"Bot {fake.token}"}
        async with session.get(f"{fake.api_url}/users/@me", headers=headers) as response:
            assert response.headers["Content-Type"] == "application/json"
        async with session.get(f"{fake.api_url}/users/@me") as response:
            assert response.status == 401


async def test_fake_429_has_discords_shape_and_discord_py_waits_it_out(fake: FakeDiscord) -> None:
    channel_id = fake.add_text_channel(fake.add_guild())
    route = f"POST /channels/{channel_id}/messages"
    fake.fail_next(route, 429, retry_after=0.05)
    client = await logged_in_client(fake)
    try:
        await client.get_partial_messageable(int(channel_id)).send("after the limit")
    finally:
        await client.close()
    assert fake.count(route) == 2
    assert [m.content for m in fake.sent_to(channel_id)] == ["after the limit"]

    fake.fail_next(route, 429, retry_after=0.25)
    async with aiohttp.ClientSession() as session:
        headers = {"Authorization": f"Bot {fake.token}", "Content-Type": "application/json"}
        url = f"{fake.api_url}/channels/{channel_id}/messages"
        async with session.post(url, data=json.dumps({"content": "x"}), headers=headers) as r:
            assert r.status == 429
            assert await r.json() == {
                "message": "You are being rate limited.",
                "retry_after": 0.25,
                "global": False,
            }
            assert r.headers["Retry-After"] == "1" and r.headers["X-RateLimit-Remaining"] == "0"


# -- the channel ---------------------------------------------------------------------------


async def test_owner_dm_is_answered_with_typing(
    world: World, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("Hello Ann!"))
    async with world.running():
        await fake.user_says(world.owner_dm, "hi there", author_id=OWNER, username="ann")
        reply = await fake.next_message(world.owner_dm)
    assert reply.content == "Hello Ann!"
    assert reply.reference is None  # no reply threading in a DM
    assert user_text(fake_llm.requests[0]) == "hi there"
    assert fake.typing[world.owner_dm] >= 1
    session = world.config.workspace / "sessions" / f"discord_{world.owner_dm}.jsonl"
    records = [json.loads(line) for line in session.read_text().splitlines()]
    assert any(r.get("type") == "delivery" and r.get("status") == "sent" for r in records)


async def test_unknown_dm_gets_a_pairing_code_and_no_model_call(
    world: World, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    dm = fake.dm_channel(STRANGER, "mallory")
    async with world.running():
        await fake.user_says(dm, "let me in", author_id=STRANGER, username="mallory")
        reply = await fake.next_message(dm)
    assert "Pairing code:" in reply.content and STRANGER in reply.content
    assert fake_llm.requests == []


async def test_guild_mention_is_answered_with_the_speakers_name(
    world: World, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("Pong."))
    async with world.running():
        said = await fake.user_says(
            world.general,
            "ping",
            author_id=MEMBER,
            username="bob",
            display_name="Bob B",
            mentions_bot=True,
        )
        reply = await fake.next_message(world.general)
    assert reply.content == "Pong."
    assert reply.reference == said["id"]
    assert user_text(fake_llm.requests[0]) == "[Bob B] ping"


async def test_guild_chatter_without_mention_is_ignored(
    world: World, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    other = fake.add_text_channel(fake.add_guild("Elsewhere"), "random")
    fake_llm.script(text("Yes?"))
    async with world.running():
        await fake.user_says(world.general, "just chatting", author_id=MEMBER, username="bob")
        await fake.user_says(other, "hey bot", author_id=MEMBER, username="bob", mentions_bot=True)
        # Inbound is handled in order: once this one is answered, the two above were dropped.
        await fake.user_says(
            world.general, "now you", author_id=MEMBER, username="bob", mentions_bot=True
        )
        await fake.next_message(world.general)
    assert len(fake_llm.requests) == 1
    assert user_text(fake_llm.requests[0]).endswith("now you")
    assert fake.sent_to(other) == []


async def test_a_reply_to_the_bot_counts_as_a_mention_and_is_quoted(
    world: World, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("First."), text("Second."))
    async with world.running():
        await fake.user_says(
            world.general, "one", author_id=MEMBER, username="bob", mentions_bot=True
        )
        first = await fake.next_message(world.general)
        await fake.user_says(
            world.general, "why?", author_id=MEMBER, username="bob", reply_to=first.id
        )
        await fake.next_message(world.general)
    assert user_text(fake_llm.requests[1]) == "[bob] > First.\nwhy?"


async def test_long_reply_is_split_with_code_blocks_intact(
    world: World, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    code = "\n".join(f"print('line {i:03d} of the example program')" for i in range(70))
    prose = " ".join(["This paragraph explains the code in some detail."] * 20)
    body = f"{prose}\n\n```python\n{code}\n```\n\n{prose}"
    assert len(body) >= 4500
    fake_llm.script(text(body))
    async with world.running():
        await fake.user_says(world.owner_dm, "show me", author_id=OWNER, username="ann")
        parts = [await fake.next_message(world.owner_dm)]
        while sum(len(p.content) for p in parts) < len(body) - 50:
            parts.append(await fake.next_message(world.owner_dm))
    assert len(parts) >= 3
    assert all(0 < len(p.content) <= 2000 for p in parts)
    for part in parts:
        fences = [line for line in part.content.splitlines() if line.startswith("```")]
        assert len(fences) % 2 == 0, part.content
    sent_lines = [line for p in parts for line in p.content.splitlines() if "print(" in line]
    assert sent_lines == code.splitlines()  # every line, in order, none doubled
    assert parts[0].content.startswith("This paragraph")
    assert parts[-1].content.endswith("in some detail.")


async def test_gateway_disconnect_resumes_and_keeps_answering(
    world: World, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("One."), text("Two."), text("Three."))
    async with world.running():
        await fake.user_says(world.owner_dm, "one", author_id=OWNER, username="ann")
        assert (await fake.next_message(world.owner_dm)).content == "One."
        await fake.disconnect(4000)
        # Sent while the socket is down: the resume replays it.
        await fake.user_says(world.owner_dm, "two", author_id=OWNER, username="ann")
        assert (await fake.next_message(world.owner_dm)).content == "Two."
        await fake.wait_for(lambda: fake.resumes == 1)
        await fake.user_says(world.owner_dm, "three", author_id=OWNER, username="ann")
        assert (await fake.next_message(world.owner_dm)).content == "Three."
    assert fake.identifies == 1
    assert [user_text(r) for r in fake_llm.requests] == ["one", "two", "three"]


async def test_catch_up_after_downtime_answers_each_missed_message_once(
    world: World, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = lambda body: text(f"re: {user_text(body).removeprefix('[bob] ')}")
    async with world.running():
        await fake.user_says(world.owner_dm, "before", author_id=OWNER, username="ann")
        await fake.next_message(world.owner_dm)
        await fake.user_says(
            world.general, "before too", author_id=MEMBER, username="bob", mentions_bot=True
        )
        await fake.next_message(world.general)
    state = world.config.data_dir / "channels" / "discord" / "state.json"
    assert set(json.loads(state.read_text())["last_seen"]) == {world.owner_dm, world.general}

    # Down: these reach Discord's history and a session nobody will resume.
    await fake.user_says(world.owner_dm, "missed 1", author_id=OWNER, username="ann")
    await fake.user_says(world.general, "chatter", author_id=MEMBER, username="bob")
    await fake.user_says(
        world.general, "missed 2", author_id=MEMBER, username="bob", mentions_bot=True
    )
    await fake.user_says(world.owner_dm, "missed 3", author_id=OWNER, username="ann")

    async with world.running():
        assert (await fake.next_message(world.owner_dm)).content == "re: missed 1"
        # The unaddressed chatter before it goes along as context (channels/chatter.py).
        context = "Earlier in this group (not addressed to you):\n> bob: chatter\n"
        assert (await fake.next_message(world.general)).content == f"re: {context}missed 2"
        assert (await fake.next_message(world.owner_dm)).content == "re: missed 3"
    assert len(fake_llm.requests) == 5

    # Up again: nothing is answered twice; the next live message is the only new turn.
    async with world.running():
        await fake.user_says(world.owner_dm, "live", author_id=OWNER, username="ann")
        assert (await fake.next_message(world.owner_dm)).content == "re: live"
    assert [user_text(r) for r in fake_llm.requests][4:] == ["missed 3", "live"]
    assert fake.identifies == 3


async def test_attachment_is_downloaded_and_a_file_goes_out(
    world: World, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("Got it."))
    public = world.config.workspace / "public"
    public.mkdir(exist_ok=True)
    (public / "report.txt").write_text("the report\n")
    async with world.running() as running:
        said = await fake.user_says(
            world.owner_dm,
            "here is my list",
            author_id=OWNER,
            username="ann",
            attachments={"list of things.txt": b"milk\neggs\n"},
        )
        assert (await fake.next_message(world.owner_dm)).content == "Got it."
        await running.bus.publish_outbound(
            OutboundMessage(
                channel="discord",
                chat_id=world.owner_dm,
                text="Here you go.",
                media=("public/report.txt", "../outside.txt"),
                trust=Trust.OWNER,  # an owner's session attached them: the workspace is its reach
            )
        )
        sent = await fake.next_message(world.owner_dm)
    relative = f"media/discord/{world.owner_dm}/{said['id']}_list_of_things.txt"
    assert (world.config.workspace / relative).read_bytes() == b"milk\neggs\n"
    prompt = user_text(fake_llm.requests[0])
    assert prompt.startswith("here is my list\n") and relative in prompt
    assert sent.files == (("report.txt", b"the report\n"),)
    assert sent.content.startswith("Here you go.") and "outside the workspace" in sent.content


async def test_new_and_stop_from_a_dm(world: World, fake: FakeDiscord, fake_llm: FakeLLM) -> None:
    release = asyncio.Event()
    fake_llm.script(gate(release, text("too late")), text("After."))
    async with world.running():
        await fake.user_says(world.owner_dm, "/new", author_id=OWNER, username="ann")
        assert (await fake.next_message(world.owner_dm)).content == "New session started."
        assert fake_llm.requests == []
        await fake.user_says(world.owner_dm, "think hard", author_id=OWNER, username="ann")
        await fake_llm.wait_for_requests(1)
        await fake.user_says(world.owner_dm, "/stop", author_id=OWNER, username="ann")
        assert (await fake.next_message(world.owner_dm)).content == "Stopped."
        release.set()
        await fake.user_says(world.owner_dm, "and now?", author_id=OWNER, username="ann")
        assert (await fake.next_message(world.owner_dm)).content == "After."
    assert "too late" not in [m.content for m in fake.sent]


async def test_send_retries_server_errors_and_lost_responses_without_doubling(
    world: World, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("Survived."), text("Once."))
    route = f"POST /channels/{world.owner_dm}/messages"
    async with world.running(send_timeout=0.5):
        fake.fail_next(route, 503)
        await fake.user_says(world.owner_dm, "a", author_id=OWNER, username="ann")
        assert (await fake.next_message(world.owner_dm)).content == "Survived."
        # The message lands but the answer is lost: the retry carries the same nonce, and
        # Discord hands back the first message instead of posting a second.
        fake.lose_response_next(route)
        await fake.user_says(world.owner_dm, "b", author_id=OWNER, username="ann")
        assert (await fake.next_message(world.owner_dm)).content == "Once."
        await fake.wait_for(lambda: fake.count(route) == 4)
    assert [m.content for m in fake.sent_to(world.owner_dm)] == ["Survived.", "Once."]


async def test_bad_token_is_one_clear_line(world: World, fake: FakeDiscord) -> None:
    config = world.discord.model_copy(update={"token": SecretStr("wrong")})
    channel = create_channel(config, MessageBus(), world.config)
    with pytest.raises(ChannelError, match="Discord rejected the bot token"):
        await channel.start()
    await channel.stop()


async def test_thread_of_an_allowed_channel_is_its_own_session(
    fake: FakeDiscord, tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    world = World(fake, tmp_path, agent_config, allow_guild=False)
    elsewhere = fake.add_text_channel(world.guild, "off-topic")
    fake_llm.script(text("In the thread."))
    async with world.running():
        await fake.user_says(
            elsewhere, "not here", author_id=MEMBER, username="bob", mentions_bot=True
        )
        await fake.user_says(
            world.thread, "plan it", author_id=MEMBER, username="bob", mentions_bot=True
        )
        assert (await fake.next_message(world.thread)).content == "In the thread."
    assert len(fake_llm.requests) == 1 and fake.sent_to(elsewhere) == []
    assert (world.config.workspace / "sessions" / f"discord_{world.thread}.jsonl").exists()


async def test_a_dead_client_is_restarted_and_catches_up(
    world: World, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("First."), text("Caught up."))
    async with world.running() as running:
        await fake.user_says(world.owner_dm, "first", author_id=OWNER, username="ann")
        await fake.next_message(world.owner_dm)
        # 4004 is not resumable: discord.py gives up, and the manager starts us afresh.
        await fake.disconnect(4004)
        await fake.user_says(world.owner_dm, "while dead", author_id=OWNER, username="ann")
        assert (await fake.next_message(world.owner_dm)).content == "Caught up."
        assert running.gateway.manager.status()["discord"]["restarts"] == 1
    assert fake.identifies == 2 and fake.resumes == 0


async def test_a_reply_after_stop_still_goes_out(world: World, fake: FakeDiscord) -> None:
    channel = create_channel(world.discord, MessageBus(), world.config)
    # Never started, like a channel whose gateway is down while a turn finishes.
    await channel.send(OutboundMessage(channel="discord", chat_id=world.owner_dm, text="late"))
    assert [m.content for m in fake.sent_to(world.owner_dm)] == ["late"]
