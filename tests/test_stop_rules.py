"""The rules behind /stop and replayed commands, in process (the real bus, dispatcher and
loop; the process tests are in test_stop_and_replays.py): a /stop ends the running turn and
no other, "Stopped." answers the /stop and names the stopped message, a stopped message is
never run again; a command's platform id is remembered across /new and a reload."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from clawgate.agent.session import Command, Message, SessionStore, Stopped, load_session
from clawgate.agent.session.delivery import command_ran, unanswered
from clawgate.kernel.config import AgentConfig
from tests.fakes.llm import FakeLLM, Reply, gate, text
from tests.harness import Harness, make_config
from tests.memory_helpers import is_consolidation, save

KEY = "test:1"


def echo(body: dict[str, Any]) -> Reply:
    if is_consolidation(body):  # the archive /new starts
        return save("Ann talked.")
    users = [m for m in body["messages"] if m.get("role") == "user"]
    return text(f"re: {users[-1]['content']}")


async def test_stop_ends_the_running_turn_only_and_names_it(
    tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    never = asyncio.Event()
    fake_llm.script(gate(never, text("too late")))
    fake_llm.handler = echo
    async with Harness(make_config(tmp_path, agent_config)) as harness:
        await harness.channel.say(message_id="A", text="slow one")
        await fake_llm.wait_for_requests(1)
        await harness.channel.say(message_id="B", text="queued one")
        await harness.channel.say(message_id="S", text="/stop")

        stopped = await harness.channel.next_reply()
        assert (stopped.text, stopped.reply_to, stopped.stopped) == ("Stopped.", "S", "A")
        queued = await harness.channel.next_reply()
        assert (queued.text, queued.reply_to, queued.stopped) == ("re: queued one", "B", None)

        # A copy of the stopped message (a channel's replay) is not run again.
        await harness.channel.say(message_id="A", text="slow one")
        await harness.channel.say(message_id="C", text="next")
        assert (await harness.channel.next_reply()).text == "re: next"
        assert len(fake_llm.requests) == 3
        session = await harness.runtime.sessions.get(KEY)
        assert [r.message_id for r in session.records_of(Stopped)] == ["A"]


async def test_a_stopped_message_is_not_left_unanswered_at_the_next_start(
    tmp_path: Path,
) -> None:
    store = SessionStore(tmp_path)
    session = await store.get("telegram:42")
    store.append(session, Message(role="user", content="slow one", message_id="u1"))
    assert unanswered(load_session(session.path, session.key)) is not None
    store.append(session, Stopped(message_id="u1"))
    assert unanswered(load_session(session.path, session.key)) is None


async def test_command_ids_are_remembered_across_new_and_a_reload(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    session = await store.get("telegram:42")
    store.append(session, Command(name="model", message_id="m1"))
    await store.archive(session)
    fresh = await store.get("telegram:42")
    store.append(fresh, Command(name="new", message_id="n1"))
    await store.archive(fresh)
    live = await store.get("telegram:42")
    store.append(live, Command(name="new", message_id="n2"))
    reloaded = load_session(live.path, live.key)
    assert all(command_ran(reloaded, i) for i in ("m1", "n1", "n2"))
    assert not command_ran(reloaded, "n3")


async def test_two_new_replayed_after_a_restart_are_skipped(
    tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = echo
    config = make_config(tmp_path, agent_config)
    async with Harness(config) as harness:
        await harness.channel.say(message_id="N1", text="/new")
        assert (await harness.channel.next_reply()).text == "New session started."
        await harness.channel.say(message_id="N2", text="/new")
        assert (await harness.channel.next_reply()).text == "New session started."
        assert (await harness.ask("hi")).text == "re: hi"
        archived = harness.runtime.sessions.list_archived()

    async with Harness(config) as harness:
        await harness.channel.say(message_id="N1", text="/new")
        await harness.channel.say(message_id="N2", text="/new")
        await harness.channel.say(message_id="X", text="still here?")
        assert (await harness.channel.next_reply()).text == "re: still here?"
        assert harness.runtime.sessions.list_archived() == archived
        session = await harness.runtime.sessions.get(KEY)
        assert [m.content for m in session.messages if m.role == "user"] == [
            "hi",
            "still here?",
        ]
