"""Discord's delivery contract: every message received is answered once, in order, through a
graceful stop or a kill -9 during a long turn; catch-up reads every page since the watermark
(bounded by age); no typing for a message over the rate limit. The real discord.py against
FakeDiscord; the real `clawgate gateway` process where the case is a restart."""

from __future__ import annotations

import json
import signal
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from clawgate.gateway.daemon.ratelimit import limit_notice
from clawgate.kernel.config import AgentConfig, LimitsConfig
from tests.discord_world import MEMBER, OWNER, READY, GatewayHome, World
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import FakeLLM, Reply, text
from tests.harness import wait_until

START_TIMEOUT = 60.0  # the daemon imports litellm at start: seconds on a busy machine
REPLY_TIMEOUT = 90.0
# The daemon's shutdown grace (3 s in GatewayHome) runs out on the held turn before it exits.
STOP_TIMEOUT = 60.0


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


def echo(body: dict) -> Reply:
    said = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
    return text(f"re: {said.removeprefix('[bob] ')}")


def asked(fake_llm: FakeLLM) -> list[str]:
    """The message each model call answered (its last user message)."""
    return [
        next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
        for body in fake_llm.requests
    ]


# -- restarts of the real gateway process ----------------------------------------------------


@pytest.mark.long
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill-9"])
async def test_messages_queued_behind_a_long_turn_survive_a_stop_answered_once_in_order(
    tmp_path: Path, fake: FakeDiscord, fake_llm: FakeLLM, stop: signal.Signals
) -> None:
    home = GatewayHome(tmp_path, fake, fake_llm)
    notes = [f"note-{n}" for n in range(1, 5)]
    home.hold = True  # the first turn runs past the shutdown grace
    async with home.gateway() as gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        await home.say(home.owner_dm, notes[0])
        await wait_until(lambda: len(fake_llm.requests) == 1, timeout=REPLY_TIMEOUT)
        queued = [await home.say(home.owner_dm, note) for note in notes[1:]]
        # The channel has passed them all on (its watermark is past the last).
        await wait_until(lambda: home.watermark(home.owner_dm) >= queued[-1].message_id, 20)
        gateway.send_signal(stop)
        code = await gateway.wait(STOP_TIMEOUT)
    assert code == (0 if stop == signal.SIGTERM else -signal.SIGKILL)
    assert home.replies(home.owner_dm) == []

    home.hold = False
    async with home.gateway() as gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        await wait_until(home.all_answered, timeout=REPLY_TIMEOUT)
        gateway.send_signal(signal.SIGTERM)  # a graceful stop sends whatever is still due
        assert await gateway.wait(STOP_TIMEOUT) == 0

    assert home.replies(home.owner_dm) == [f"re: {note}" for note in notes]


# -- catch-up --------------------------------------------------------------------------------


async def test_a_mention_after_more_than_a_page_of_chatter_is_answered_at_the_restart(
    tmp_path: Path, fake: FakeDiscord, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = echo
    world = World(fake, tmp_path, agent_config)
    async with world.running():
        await fake.user_says(
            world.general, "before", author_id=MEMBER, username="bob", mentions_bot=True
        )
        assert (await fake.next_message(world.general, REPLY_TIMEOUT)).content == "re: before"

    # Down: two and a half pages of chatter, then a mention, then more chatter.
    for n in range(250):
        await fake.user_says(world.general, f"chatter {n}", author_id=MEMBER, username="bob")
    await fake.user_says(
        world.general, "after the chatter", author_id=MEMBER, username="bob", mentions_bot=True
    )
    await fake.user_says(world.general, "more chatter", author_id=MEMBER, username="bob")

    async with world.running() as running:
        reply = (await fake.next_message(world.general, REPLY_TIMEOUT)).content
        # The chatter before it rides along as quoted group context (`group_context`).
        assert reply.startswith("re: ") and reply.endswith("after the chatter")
        assert await running.gateway.default.dispatcher.wait_idle(10)
    before, after = asked(fake_llm)
    assert before == "[bob] before"
    assert after.startswith("[bob] ") and after.endswith("\nafter the chatter")
    assert "> bob: chatter 249" in after  # the newest chatter, quoted as context
    pages = fake.count(f"GET /channels/{world.general}/messages")
    assert pages >= 3  # every page after the watermark, not the oldest 100


async def test_catch_up_skips_messages_older_than_its_age_bound(
    tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = echo
    # The gateway last ran two days ago.
    async with FakeDiscord(clock_offset=-timedelta(hours=48).total_seconds()) as fake:
        await caught_up_after_two_days(fake, World(fake, tmp_path, agent_config), fake_llm)


async def caught_up_after_two_days(fake: FakeDiscord, world: World, fake_llm: FakeLLM) -> None:
    assert world.discord.catchup_max_age_hours == 24
    async with world.running():
        await fake.user_says(
            world.general, "two days ago", author_id=MEMBER, username="bob", mentions_bot=True
        )
        assert (await fake.next_message(world.general, REPLY_TIMEOUT)).content == "re: two days ago"
        await fake.user_says(world.owner_dm, "dm two days ago", author_id=OWNER, username="ann")
        assert (
            await fake.next_message(world.owner_dm, REPLY_TIMEOUT)
        ).content == "re: dm two days ago"
    await fake.user_says(world.owner_dm, "stale dm", author_id=OWNER, username="ann")
    await fake.user_says(
        world.general, "stale mention", author_id=MEMBER, username="bob", mentions_bot=True
    )
    fake.clock_offset = -timedelta(hours=1).total_seconds()
    await fake.user_says(
        world.general, "fresh mention", author_id=MEMBER, username="bob", mentions_bot=True
    )

    async with world.running() as running:
        assert (await fake.next_message(world.general, REPLY_TIMEOUT)).content == (
            "re: fresh mention"
        )
        assert await running.gateway.default.dispatcher.wait_idle(10)
    assert asked(fake_llm) == ["[bob] two days ago", "dm two days ago", "[bob] fresh mention"]
    assert [m.content for m in fake.sent_to(world.owner_dm)] == ["re: dm two days ago"]


# -- the rate limit ----------------------------------------------------------------------------


async def test_a_member_over_the_rate_limit_is_kept_marked_untyped_and_not_replayed(
    tmp_path: Path, fake: FakeDiscord, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = echo
    world = World(fake, tmp_path, agent_config, limits=LimitsConfig(messages_per_minute=2))
    chat = world.general

    async def member_says(said: str) -> None:
        await fake.user_says(chat, said, author_id=MEMBER, username="bob", mentions_bot=True)

    async with world.running() as running:
        for said in ("one", "two"):
            await member_says(said)
            assert (await fake.next_message(chat, REPLY_TIMEOUT)).content == f"re: {said}"
        assert await running.gateway.default.dispatcher.wait_idle(10)

        await member_says("three")
        notice = await fake.next_message(chat, REPLY_TIMEOUT)
        await member_says("four")  # no second notice
        # Handled in order: once the next message (the owner, another chat) is answered,
        # "four" has been decided on.
        await fake.user_says(world.owner_dm, "elsewhere", author_id=OWNER, username="ann")
        assert (await fake.next_message(world.owner_dm, REPLY_TIMEOUT)).content == "re: elsewhere"
        assert await running.gateway.default.dispatcher.wait_idle(10)
        await wait_until(lambda: not running.channel.journal.pending, timeout=10)
        # Typing runs from the decision to answer until the reply: nobody answers "four".
        typing = running.channel._typing._tasks.get(chat)
        assert typing is None or typing.done()

    assert notice.content == limit_notice(2)
    assert "[bob] three" not in asked(fake_llm) and "[bob] four" not in asked(fake_llm)
    # Kept in the session, marked: nothing vanished.
    session = world.config.workspace / "sessions" / f"discord_{chat}.jsonl"
    lines = [json.loads(line) for line in session.read_text().splitlines()]
    kept = [line["content"] for line in lines if line.get("type") == "over_limit"]
    assert [k.split()[-1] for k in kept] == ["three", "four"]
    # Not answered after a restart either: the notice said so.
    async with world.running() as running:
        await member_says("five")
        assert (await fake.next_message(chat, REPLY_TIMEOUT)).content == "re: five"
        assert await running.gateway.default.dispatcher.wait_idle(10)
    assert [m.content for m in fake.sent_to(chat)] == [
        "re: one",
        "re: two",
        notice.content,
        "re: five",
    ]


# -- a damaged watermark file ----------------------------------------------------------------


async def test_a_truncated_state_file_still_catches_up_the_dm_sent_while_down_answered_once(
    tmp_path: Path, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    home = GatewayHome(tmp_path, fake, fake_llm)
    async with home.gateway() as gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        for chat, note in ((home.owner_dm, "note-dm-1"), (home.general, "note-general")):
            said = await home.say(chat, note)
            await wait_until(home.all_answered, timeout=REPLY_TIMEOUT)
            await wait_until(lambda s=said: home.watermark(s.chat) >= s.message_id, 20)
        gateway.send_signal(signal.SIGTERM)
        assert await gateway.wait(STOP_TIMEOUT) == 0

    # Down: the owner writes, and state.json loses its second half.
    await home.say(home.owner_dm, "note-dm-2")
    whole = home.state.read_bytes()
    home.state.write_bytes(whole[: len(whole) // 2])

    async with home.gateway() as gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        await wait_until(home.all_answered, timeout=REPLY_TIMEOUT)
        await wait_until(lambda: home.watermark(home.owner_dm) >= home.said[-1].message_id, 20)
        gateway.send_signal(signal.SIGTERM)
        assert await gateway.wait(STOP_TIMEOUT) == 0
        log = gateway.stderr

    assert home.replies(home.owner_dm) == ["re: note-dm-1", "re: note-dm-2"]
    assert home.replies(home.general) == ["re: note-general"]
    aside = list(home.state.parent.glob("state.json.damaged-*"))
    assert [p.read_bytes() for p in aside] == [whole[: len(whole) // 2]]
    assert log.count("state.json: damaged") == 1
    assert home.watermark(home.general) >= home.said[1].message_id  # a fresh, whole file


async def test_a_lost_state_file_after_a_compacted_journal_catches_up_owner_dm_and_guild(
    tmp_path: Path, fake: FakeDiscord, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = echo
    world = World(fake, tmp_path, agent_config)
    async with world.running() as running:
        await fake.user_says(world.owner_dm, "dm before", author_id=OWNER, username="ann")
        assert (await fake.next_message(world.owner_dm, REPLY_TIMEOUT)).content == "re: dm before"
        said = await fake.user_says(
            world.general, "before", author_id=MEMBER, username="bob", mentions_bot=True
        )
        assert (await fake.next_message(world.general, REPLY_TIMEOUT)).content == "re: before"
        journal = running.channel.journal.path
    # The journal was compacted (it names no chat any more) and state.json is gone.
    journal.write_text(json.dumps({"high": int(said["id"])}) + "\n")
    (journal.parent / "state.json").unlink()
    await fake.user_says(world.owner_dm, "dm while down", author_id=OWNER, username="ann")
    await fake.user_says(
        world.thread, "in the thread", author_id=MEMBER, username="bob", mentions_bot=True
    )

    async with world.running() as running:
        assert (await fake.next_message(world.owner_dm, REPLY_TIMEOUT)).content == (
            "re: dm while down"
        )
        assert (await fake.next_message(world.thread, REPLY_TIMEOUT)).content == (
            "re: in the thread"
        )
        assert await running.gateway.default.dispatcher.wait_idle(10)
    first, then = asked(fake_llm)[:2], asked(fake_llm)[2:]
    assert first == ["dm before", "[bob] before"]
    assert sorted(then) == ["[bob] in the thread", "dm while down"]  # each chat in its turn
    assert set(json.loads((journal.parent / "state.json").read_text())["last_seen"]) >= {
        world.owner_dm,
        world.general,
        world.thread,
    }
