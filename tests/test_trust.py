"""Trust is decided in one place, from the current rules, whenever a message is handled.

Each case is an escalation that got through before: a replay after a crash, a scheduled run,
a Discord guild missing from the client's cache, a name anyone can take, and a consolidation
whose older messages were not the owner's. The first runs through a real gateway process.
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from clawgate.agent.runtime import AgentRuntime
from clawgate.agent.session import Message, SessionStore
from clawgate.channels.access import AccessPolicies
from clawgate.channels.pairing import PairingStore
from clawgate.channels.telegram import create_channel
from clawgate.gateway.daemon.gateway import Gateway
from clawgate.gateway.setup.onboard import prepare_workspace
from clawgate.kernel.bus import ChatFacts, MessageBus, Trust
from clawgate.kernel.config import (
    AgentConfig,
    ChannelsConfig,
    Config,
    DiscordConfig,
    HeartbeatConfig,
    TelegramConfig,
)
from tests.conftest import MakeClient
from tests.discord_world import OWNER as DISCORD_OWNER
from tests.discord_world import World
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import FakeLLM, hang, text
from tests.fakes.telegram import FakeTelegram
from tests.harness import make_config, wait_until
from tests.memory_helpers import is_consolidation, make_consolidator, save
from tests.process import ClawgateProcess, fake_model, fake_telegram, run_clawgate, write_config
from tests.scheduler_harness import a_job, write_jobs
from tests.telegram_world import Sleeps, telegram_config

OWNER = 1001
BOB = 2002  # allowed by the config; an owner only while his pairing approval says so
MARKER = "Ann keeps the spare key under the blue pot"
READY = "channel telegram ready"
START_TIMEOUT = 30.0
MODEL_TIMEOUT = 60.0  # litellm's import on the first call, with room for a loaded machine
EXIT_TIMEOUT = 25.0


def tool_names(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools") or []}


def system_prompt(request: dict[str, Any]) -> str:
    return str(request["messages"][0]["content"])


def approve_as_owner(data_dir: Path, user_id: int) -> None:
    store = PairingStore(data_dir / "pairing.json")
    code = store.request("telegram", str(user_id), "bob")
    assert code is not None
    store.approve(code, owner=True)


def with_memory(workspace: Path) -> None:
    prepare_workspace(workspace)
    (workspace / "memory" / "MEMORY.md").write_text(f"# Memory\n\n- {MARKER}\n")


async def test_a_replay_after_a_crash_gets_the_trust_the_rules_give_now(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    answering = False
    fake_llm.handler = lambda body: text("Sure.") if answering else hang()
    config = write_config(
        tmp_path,
        agent=fake_model(fake_llm, request_timeout=60),
        telegram=fake_telegram(telegram, (OWNER, BOB), owners=[str(OWNER)]),
    )
    with_memory(tmp_path / "workspace")
    approve_as_owner(tmp_path / "data", BOB)

    async with ClawgateProcess(tmp_path, "--config", str(config), "gateway") as crashed:
        await crashed.wait_for_log(READY, START_TIMEOUT)
        update = telegram.user_says(BOB, "run uptime for me", username="bob")
        [before] = await fake_llm.wait_for_requests(1, timeout=MODEL_TIMEOUT)
        await wait_until(lambda: telegram.confirmed_offset > update, timeout=10)
        crashed.send_signal(signal.SIGKILL)
        assert await crashed.wait(EXIT_TIMEOUT) == -signal.SIGKILL
    # While it was owner-approved, Bob had the owner's tools and memory.
    assert "exec" in tool_names(before) and MARKER in system_prompt(before)

    code, stderr = await run_clawgate(
        tmp_path, "--config", str(config), "pairing", "revoke", str(BOB)
    )
    assert code == 0, stderr
    answering = True
    async with ClawgateProcess(tmp_path, "--config", str(config), "gateway") as restarted:
        await restarted.wait_for_log(READY, START_TIMEOUT)
        reply = await telegram.next_message(BOB, timeout=MODEL_TIMEOUT)
        restarted.send_signal(signal.SIGTERM)
        assert await restarted.wait(EXIT_TIMEOUT) == 0, restarted.stderr

    assert reply["text"] == "Sure."
    after = fake_llm.requests[1:]
    assert after, "the message in flight was not replayed"
    for request in after:  # the journal and the session may both bring it back
        assert "exec" not in tool_names(request)
        assert MARKER not in system_prompt(request)
        assert "(trust: allowed)" in system_prompt(request)


@pytest.fixture
def demoted_config(tmp_path: Path, agent_config: AgentConfig, telegram: FakeTelegram) -> Config:
    rules = telegram_config(telegram, allow_from=[str(OWNER), str(BOB)], owners=[str(OWNER)])
    # The heartbeat reports to Bob all day; it is ticked by hand below.
    heartbeat = HeartbeatConfig(
        interval_minutes=1440, active_hours="00:00-00:00", deliver_to=f"telegram:{BOB}"
    )
    config = make_config(
        tmp_path, agent_config, channels=ChannelsConfig(telegram=rules), heartbeat=heartbeat
    )
    (config.workspace / "memory" / "MEMORY.md").write_text(f"# Memory\n\n- {MARKER}\n")
    return config


async def test_cron_and_heartbeat_run_at_the_target_chats_current_trust(
    demoted_config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    config = demoted_config
    approve_as_owner(config.data_dir, BOB)
    bus = MessageBus()
    channel = create_channel(config.channels.telegram, bus, config, sleep=Sleeps())
    runtime = AgentRuntime.build(config, outbox=bus.publish_outbound)
    gateway = Gateway(
        [(runtime, bus)], [channel], bus, scheduler=True, scheduler_options={"poll_interval": 0.05}
    )
    assert gateway.default.scheduler is not None
    scheduler = gateway.default.scheduler
    fake_llm.handler = lambda body: text("Done.")
    await gateway.start()
    try:
        telegram.user_says(BOB, "hello", username="bob")
        await telegram.next_message(BOB, timeout=MODEL_TIMEOUT)
        assert "(trust: owner)" in system_prompt(fake_llm.requests[-1])  # recorded: owner

        PairingStore(config.data_dir / "pairing.json").revoke(str(BOB))  # demoted
        write_jobs(scheduler.store, a_job("daily", deliver_to=f"telegram:{BOB}"))
        await wait_until(lambda: "daily" in scheduler.jobs, timeout=5)
        assert (await scheduler.run_job("daily")).ok
        await telegram.next_message(BOB, timeout=MODEL_TIMEOUT)
        cron_run = fake_llm.requests[-1]
        (config.workspace / "HEARTBEAT.md").write_text("- check the plants\n")
        assert await scheduler.heartbeat.tick() == "delivered"
        await telegram.next_message(BOB, timeout=MODEL_TIMEOUT)
        heartbeat_run = fake_llm.requests[-1]
    finally:
        await gateway.stop(grace=2)

    assert "Say the time" in str(cron_run["messages"])
    assert "check the plants" in str(heartbeat_run["messages"])
    for run in (cron_run, heartbeat_run):
        assert "(trust: allowed)" in system_prompt(run)
        assert "exec" not in tool_names(run) and MARKER not in system_prompt(run)


@pytest.mark.long
async def test_the_owners_reminders_keep_owner_trust_after_new(
    demoted_config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    # Issue 35 item 4: /new started the chat's transcript afresh without its recorded facts,
    # so the next reminder and heartbeat ran as `allowed` until the owner wrote again.
    config = demoted_config
    approve_as_owner(config.data_dir, BOB)
    bus = MessageBus()
    channel = create_channel(config.channels.telegram, bus, config, sleep=Sleeps())
    runtime = AgentRuntime.build(config, outbox=bus.publish_outbound)
    gateway = Gateway(
        [(runtime, bus)], [channel], bus, scheduler=True, scheduler_options={"poll_interval": 0.05}
    )
    assert gateway.default.scheduler is not None
    scheduler = gateway.default.scheduler
    fake_llm.handler = lambda body: text("Done.")
    await gateway.start()
    try:
        telegram.user_says(BOB, "hello", username="bob")
        await telegram.next_message(BOB, timeout=MODEL_TIMEOUT)
        telegram.user_says(BOB, "/new", username="bob")
        assert (await telegram.next_message(BOB, timeout=MODEL_TIMEOUT))["text"] == (
            "New session started."
        )
        session = await runtime.sessions.get(f"telegram:{BOB}")
        assert session.state.trust is Trust.OWNER  # what the dashboard's sessions page shows
        write_jobs(scheduler.store, a_job("daily", deliver_to=f"telegram:{BOB}"))
        await wait_until(lambda: "daily" in scheduler.jobs, timeout=5)
        assert (await scheduler.run_job("daily")).ok
        await telegram.next_message(BOB, timeout=MODEL_TIMEOUT)
        cron_run = fake_llm.requests[-1]
        (config.workspace / "HEARTBEAT.md").write_text("- check the plants\n")
        assert await scheduler.heartbeat.tick() == "delivered"
        await telegram.next_message(BOB, timeout=MODEL_TIMEOUT)
        heartbeat_run = fake_llm.requests[-1]
    finally:
        await gateway.stop(grace=2)

    for run in (cron_run, heartbeat_run):
        assert "(trust: owner)" in system_prompt(run)
        assert "exec" in tool_names(run) and MARKER in system_prompt(run)


# -- Discord -------------------------------------------------------------------------------

IMPOSTOR = "310000000000000009"


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


async def test_a_guild_message_from_an_uncached_guild_is_never_a_dm(
    fake: FakeDiscord, tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    world = World(fake, tmp_path, agent_config)
    # A guild the client never got a GUILD_CREATE for: its messages carry its guild_id, but
    # discord.py's cache knows nothing of it.
    late = fake.add_guild("Late")
    channel = fake.add_text_channel(late, "lobby")
    fake.guilds.pop(late)
    world.discord = world.discord.model_copy(update={"group_allow": [world.guild, late]})
    world.config = world.config.model_copy(
        update={"channels": ChannelsConfig(discord=world.discord)}
    )
    (world.config.workspace / "memory" / "MEMORY.md").write_text(f"# Memory\n\n- {MARKER}\n")
    fake_llm.script(text("Hello, lobby."))
    async with world.running():
        await fake.user_says(
            channel, "hi", author_id=DISCORD_OWNER, username="ann", mentions_bot=True
        )
        reply = await fake.next_message(channel)
    assert reply.content == "Hello, lobby."
    [request] = fake_llm.requests
    assert "(trust: group)" in system_prompt(request)
    assert "exec" not in tool_names(request) and MARKER not in system_prompt(request)


async def test_a_discord_name_never_makes_an_owner(
    fake: FakeDiscord, tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    world = World(fake, tmp_path, agent_config)
    # The owner also listed their name; on Discord anyone can call themselves that.
    world.discord = world.discord.model_copy(update={"allow_from": [DISCORD_OWNER, "ann"]})
    world.config = world.config.model_copy(
        update={"channels": ChannelsConfig(discord=world.discord)}
    )
    dm = fake.dm_channel(IMPOSTOR, "ann")
    async with world.running():
        await fake.user_says(
            dm, "read me MEMORY.md", author_id=IMPOSTOR, username="ann", display_name="ann"
        )
        reply = await fake.next_message(dm)
    assert "Pairing code:" in reply.content and IMPOSTOR in reply.content
    assert fake_llm.requests == []


# -- consolidation -------------------------------------------------------------------------


async def consolidate(
    tmp_path: Path,
    agent_config: AgentConfig,
    fake_llm: FakeLLM,
    trusts: list[Trust],
    make_client: MakeClient,
) -> tuple[str, dict[str, Any]]:
    """Consolidate a transcript whose messages were handled at `trusts` (one per user/reply
    pair), loaded from disk; the model answers with a MEMORY.md rewrite. Returns MEMORY.md
    afterwards and the consolidation request."""
    sessions = SessionStore(tmp_path / "workspace" / "sessions")
    session = await sessions.get("telegram:2002")
    for i, trust in enumerate(trusts):
        if session.state.trust != trust:
            sessions.update_state(session, trust=trust)
        sessions.append(session, Message(role="user", content=f"standing order {i}"))
        sessions.append(session, Message(role="assistant", content="Noted."))
    reloaded = SessionStore(sessions.directory)
    session = await reloaded.get("telegram:2002")
    store, consolidator = make_consolidator(tmp_path, reloaded, agent_config, make_client)
    store.memory_path.write_text(f"# Memory\n\n- {MARKER}\n")
    fake_llm.script(save("Orders given.", memory=f"# Memory\n\n- {MARKER}\n- obey the group\n"))
    assert (await consolidator.consolidate(session)).ok
    [request] = [r for r in fake_llm.requests if is_consolidation(r)]
    return store.read_memory(), request


async def test_a_chunk_with_any_non_owner_message_is_not_owner_consolidated(
    tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM, make_client: MakeClient
) -> None:
    # Window 6: the chunk is the oldest 7 messages - two allowed pairs, then owner ones.
    trusts = [Trust.ALLOWED, Trust.ALLOWED, Trust.OWNER, Trust.OWNER, Trust.OWNER]
    memory, request = await consolidate(tmp_path, agent_config, fake_llm, trusts, make_client)
    assert "obey the group" not in memory
    assert MARKER not in str(request["messages"])


async def test_a_chunk_of_only_owner_messages_is_owner_consolidated(
    tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM, make_client: MakeClient
) -> None:
    trusts = [Trust.OWNER, Trust.OWNER, Trust.OWNER, Trust.OWNER, Trust.ALLOWED]
    memory, request = await consolidate(tmp_path, agent_config, fake_llm, trusts, make_client)
    assert "obey the group" in memory
    assert MARKER in str(request["messages"])


# -- the one function ----------------------------------------------------------------------


def test_trust_comes_from_the_rules_and_the_facts(tmp_path: Path) -> None:
    config = make_config(
        tmp_path,
        AgentConfig(),
        channels=ChannelsConfig(
            telegram=TelegramConfig(allow_from=["@ann", "2002"], owners=["@ann"]),
            discord=DiscordConfig(allow_from=["ann", "31"], owners=["ann"], group_allow=["77"]),
        ),
    )
    trusts = AccessPolicies.from_config(config)
    store = PairingStore(config.data_dir / "pairing.json")
    ann = ChatFacts(private=True, user_id="1001", username="ann")
    # Telegram @usernames are the README's opt-in; a Discord name matches nobody.
    assert trusts.decide("telegram", ann, Trust.GROUP) is Trust.OWNER
    assert trusts.decide("discord", ann, Trust.OWNER) is None
    assert trusts.decide("discord", ChatFacts(private=True, user_id="31"), Trust.OWNER) is (
        Trust.ALLOWED
    )
    guild = ChatFacts(private=False, group_ids=("5", "77", ""))
    assert trusts.decide("discord", guild, Trust.OWNER) is Trust.GROUP
    assert (
        trusts.decide("discord", guild.model_copy(update={"group_ids": ("5",)}), Trust.GROUP)
        is None
    )
    # A chat channel's message without facts is not served; the terminal and the dashboard's
    # chat are the owner's; a channel without access rules (a test's) keeps what it declared.
    assert trusts.decide("telegram", None, Trust.OWNER) is None
    assert trusts.decide("cli", None, Trust.GROUP) is Trust.OWNER
    assert trusts.decide("web", None, Trust.GROUP) is Trust.OWNER
    assert trusts.sender_is_owner("web", None)
    assert trusts.decide("test", None, Trust.ALLOWED) is Trust.ALLOWED
    # A scheduled run to a chat never seen counts as allowed (or group), never as owner.
    assert trusts.for_chat("telegram", None, Trust.OWNER) is Trust.ALLOWED
    assert trusts.for_chat("discord", None, Trust.GROUP) is Trust.GROUP
    # Approvals are read from pairing.json as they are now.
    code = store.request("telegram", "2002", "bob")
    assert code is not None
    store.approve(code, owner=True)
    bob = ChatFacts(private=True, user_id="2002")
    assert trusts.decide("telegram", bob, Trust.ALLOWED) is Trust.OWNER
    store.revoke("2002")
    assert trusts.decide("telegram", bob, Trust.OWNER) is Trust.ALLOWED
