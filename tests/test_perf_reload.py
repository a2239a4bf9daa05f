"""The store's reload leaves the consolidated part of a transcript on disk, and nothing a
session answers changes: a message re-delivered from that part is still recognised."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from clawgate.agent.session import (
    Command,
    Compaction,
    Consolidation,
    Delivery,
    Message,
    SessionStore,
    State,
    load_session,
)
from clawgate.kernel.config import AgentConfig
from tests.fakes.llm import FakeLLM, Reply, text
from tests.harness import Harness, make_config

KEY = "test:1"


def echo(body: dict[str, Any]) -> Reply:
    users = [m for m in body["messages"] if m.get("role") == "user"]
    return text(f"re: {users[-1]['content']}")


def turn(
    store: SessionStore, session: Any, said: str, message_id: str, *, sent: bool = True
) -> None:
    store.append(session, Message(role="user", content=said, message_id=message_id))
    reply = store.append(session, Message(role="assistant", content=f"re: {said}"))
    if sent:
        store.append(session, Delivery(seq=reply.seq, status="sent"))


async def seed(store: SessionStore) -> None:
    """A transcript whose first 40 turns are consolidated, then one live turn."""
    session = await store.get(KEY)
    store.append(session, State(trust="owner"))
    turn(store, session, "remember the milk", "X")
    turn(store, session, "what about eggs", "U", sent=False)  # the reply never left
    for i in range(38):
        turn(store, session, f"chat {i}", f"m{i}")
    store.append(session, Consolidation(from_seq=1, to_seq=session.next_seq - 1, mode="llm"))
    turn(store, session, "latest", "L")


def user_lines(path: Path) -> list[str]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [line["content"] for line in lines if line.get("role") == "user"]


async def test_a_redelivered_message_from_the_consolidated_part_is_recognised(
    tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = echo
    config = make_config(tmp_path, agent_config)
    async with Harness(config) as harness:
        await seed(harness.runtime.sessions)
        await harness.gateway.default.dispatcher.wait_idle(10)

    async with Harness(config) as harness:
        sessions = harness.runtime.sessions
        path = sessions.path_for(KEY)
        before = user_lines(path)
        session = await sessions.get(KEY)
        assert session.cold is not None  # the reload left the consolidated turns on disk

        # Delivered long ago: nothing is sent, nothing stored.
        await harness.channel.say(message_id="X", text="remember the milk")
        # Replied but never sent: that stored reply goes out, the model is not asked again.
        await harness.channel.say(message_id="U", text="what about eggs")
        assert (await harness.channel.next_reply()).text == "re: what about eggs"
        await harness.channel.say(message_id="Z", text="and bread")
        assert (await harness.channel.next_reply()).text == "re: and bread"
        await harness.gateway.default.dispatcher.wait_idle(10)
        await asyncio.sleep(0)
        assert harness.channel.sent["1"].empty()
        assert user_lines(path) == [*before, "and bread"]


async def test_a_new_message_id_does_not_read_the_consolidated_part(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    await seed(store)
    session = load_session(store.path_for(KEY), KEY, live_only=True)
    assert session.seq_of("new") is None and session.seq_of("L") is not None
    assert session.cold is not None
    assert session.seq_of("m3") == 11 and session.cold is None


async def test_a_live_window_reload_answers_as_a_full_one(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    session = await store.get(KEY)
    store.append(session, State(trust="owner"))
    turn(store, session, "hello", "1")
    store.append(session, Command(name="model", message_id="2"))
    store.append(session, State(trust="group"))  # a trust mark inside the skipped part
    turn(store, session, "with a quote", 'a"b')  # an id the quick id scan cannot read
    store.append(session, Compaction(up_to_seq=4, summary="s"))
    turn(store, session, "more", "3")
    store.append(session, Consolidation(from_seq=1, to_seq=6, mode="llm"))
    store.append(session, Message(role="user", content="late", message_id="4"))
    turn(store, session, "live", "5")
    full = load_session(session.path, KEY)
    live = load_session(session.path, KEY, live_only=True)

    assert live.cold is not None
    assert live.unconsolidated() == full.unconsolidated()
    assert live.unconsolidated_count() == len(full.unconsolidated())
    assert live.state == full.state and live.trust_marks == full.trust_marks
    assert (live.next_seq, live.first_seq) == (full.next_seq, full.first_seq)
    assert list(live.records_of(Compaction)) == list(full.records_of(Compaction))
    assert list(live.records_of(Command)) == list(full.records_of(Command))
    assert live.cold is not None  # none of that needed the skipped part
    assert live.seq_of('a"b') == full.message_ids['a"b']
    assert live.messages == full.messages and live.records == full.records
    assert live.message_ids == full.message_ids
    assert list(live.message_ids) == list(full.message_ids)


async def test_consolidation_racing_a_turn_keeps_the_late_message_live(tmp_path: Path) -> None:
    # Messages appended while a consolidation ran sit before its record in the file.
    store = SessionStore(tmp_path)
    session = await store.get(KEY)
    turn(store, session, "old", "1")
    turn(store, session, "during", "2")
    store.append(session, Consolidation(from_seq=1, to_seq=2, mode="llm"))
    live = load_session(session.path, KEY, live_only=True)
    assert [m.content for m in live.unconsolidated()] == ["during", "re: during"]
    assert live.cold is not None and live.seq_of("2") == 3 and live.seq_of("1") == 1


async def test_new_after_a_live_window_reload_carries_the_skipped_ids(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    await seed(store)
    reloaded = SessionStore(tmp_path)
    session = await reloaded.get(KEY)
    assert session.cold is not None
    await reloaded.archive(session)
    fresh = await reloaded.get(KEY)
    assert fresh.seq_of("X") == 1 and fresh.seq_of("L") is not None


async def test_a_replaced_file_is_not_read_as_the_skipped_part(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SessionStore(tmp_path)
    await seed(store)
    path = store.path_for(KEY)
    session = load_session(path, KEY, live_only=True)
    copy = path.with_suffix(".copy")
    copy.write_bytes(path.read_bytes())
    copy.replace(path)
    assert [m.content for m in session.messages] == ["latest", "re: latest"]
    assert "cannot read its consolidated messages" in caplog.text
