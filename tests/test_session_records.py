"""The session file's schema: typed lines, byte-compatible with files written before it."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from clawgate.agent.session import (
    Archived,
    Command,
    Compaction,
    Consolidation,
    Delivery,
    Message,
    Record,
    SessionStore,
    State,
    TurnError,
    load_session,
)
from clawgate.agent.session.delivery import (
    Replay,
    answered,
    command_ran,
    hand_out,
    replay,
    unanswered,
)
from clawgate.agent.session.records import MESSAGE_LINE, StoredMessage

# Written by the session module as it was before these types (agent/session.py at 9d86091),
# one line of every kind it wrote. Byte for byte: escapes, key order, separators.
OLD_FILE = r"""{"type": "session", "key": "telegram:42", "version": 1, "created_at": "2026-12-03T07:22:42.497Z", "first_seq": 1}
{"type":"state","trust":"owner","timestamp":"2026-12-03T07:22:42.497Z"}
{"seq":1,"role":"user","content":"note: milk, \"quoted\" \\ and 世界 😀\n\ttab \u0001","message_id":"101","timestamp":"2026-12-03T07:22:42.497Z"}
{"seq":2,"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"write_file","arguments":"{\"path\": \"todo.md\"}"}}],"timestamp":"2026-12-03T07:22:42.497Z"}
{"seq":3,"role":"tool","content":"ok","tool_call_id":"call_1","name":"write_file","timestamp":"2026-12-03T07:22:42.497Z"}
{"seq":4,"role":"assistant","content":"Saved.","timestamp":"2026-12-03T07:22:42.497Z"}
{"type":"delivery","seq":4,"status":"sent","timestamp":"2026-12-03T07:22:42.497Z"}
{"type":"delivery","seq":4,"status":"failed","error":"Forbidden: bot was blocked","timestamp":"2026-12-03T07:22:42.497Z"}
{"type":"command","name":"model","message_id":"102","timestamp":"2026-12-03T07:22:42.497Z"}
{"type":"state","model":"openai/gpt-4o","timestamp":"2026-12-03T07:22:42.497Z"}
{"type":"error","error":"empty reply","timestamp":"2026-12-03T07:22:42.497Z"}
{"type":"state","flushed_cycle":0,"timestamp":"2026-12-03T07:22:42.497Z"}
{"type":"compaction","up_to_seq":2,"summary":"The user keeps a todo list.","timestamp":"2026-12-03T07:22:42.497Z"}
{"type":"consolidation","from_seq":1,"to_seq":3,"mode":"llm","timestamp":"2026-12-03T07:22:42.497Z"}
{"type":"state","last_consolidated":3,"timestamp":"2026-12-03T07:22:42.497Z"}
{"seq":5,"role":"user","content":"a�b","message_id":"103","timestamp":"2026-12-03T07:22:42.498Z"}
{"type":"archived","timestamp":"2026-12-03T07:22:42.498Z"}
"""
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "write_file", "arguments": '{"path": "todo.md"}'},
}
# What the old writer was asked to write, in order, as the new API says it.
OLD_WRITES: list[Any] = [
    State(trust="owner"),
    Message(
        role="user", content='note: milk, "quoted" \\ and 世界 😀\n\ttab \x01', message_id="101"
    ),
    Message(role="assistant", content="", tool_calls=[CALL]),
    Message(role="tool", tool_call_id="call_1", name="write_file", content="ok"),
    Message(role="assistant", content="Saved."),
    Delivery(seq=4, status="sent"),
    Delivery(seq=4, status="failed", error="Forbidden: bot was blocked"),
    Command(name="model", message_id="102"),
    State(model="openai/gpt-4o"),
    TurnError(error="empty reply"),
    State(flushed_cycle=0),
    Compaction(up_to_seq=2, summary="The user keeps a todo list."),
    Consolidation(from_seq=1, to_seq=3, mode="llm"),
    State(last_consolidated=3),
    Message(role="user", content="a\ud800b", message_id="103"),
    Archived(),
]
_TIME = re.compile(r'"(timestamp|created_at)": ?"[^"]*"')


def _without_times(text: str) -> str:
    return _TIME.sub(r'"\1":"T"', text)


def test_a_misspelled_kind_or_value_cannot_be_constructed() -> None:
    with pytest.raises(ValidationError):
        Delivery(seq=1, status="snet")
    with pytest.raises(ValidationError):
        State(type="stat")
    with pytest.raises(ValidationError):
        Consolidation(from_seq=1, to_seq=2, mode="lml")
    with pytest.raises(ValidationError):
        Message(role="asistant", content="hi")
    with pytest.raises(ValidationError):
        TypeAdapter(Record).validate_python({"type": "delivry", "seq": 1, "status": "sent"})
    with pytest.raises(ValidationError):
        Compaction(up_to_seq="soon", summary="x")


def test_records_are_frozen() -> None:
    record = Delivery(seq=1, status="sent")
    with pytest.raises(ValidationError):
        record.seq = 2  # type: ignore[misc]


async def test_every_record_kind_round_trips_through_a_file(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    session = await store.get("telegram:42")
    written = [store.append(session, item) for item in OLD_WRITES]
    loaded = load_session(session.path, session.key)
    assert loaded.messages == session.messages
    assert loaded.records == session.records
    assert loaded.state == session.state
    assert loaded.next_seq == session.next_seq == 6
    assert loaded.message_ids == {"101": 1, "103": 5}
    kinds = {type(r) for r in loaded.records}
    assert kinds == {Delivery, Command, TurnError, Compaction, Consolidation, Archived}
    records = [w for w in written if not isinstance(w, dict)]
    assert all(r.timestamp for r in records)
    assert [r for r in records if not isinstance(r, State)] == loaded.records


async def test_new_lines_are_byte_for_byte_what_the_old_writer_wrote(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    session = await store.get("telegram:42")
    for item in OLD_WRITES:
        store.append(session, item)
    assert _without_times(session.path.read_text()) == _without_times(OLD_FILE)


def test_a_file_written_before_the_schema_loads(tmp_path: Path, caplog) -> None:
    path = tmp_path / "telegram_42.jsonl"
    path.write_text(OLD_FILE)
    with caplog.at_level(logging.WARNING):
        session = load_session(path, "telegram:42")
    assert not caplog.records
    assert [m["seq"] for m in session.messages] == [1, 2, 3, 4, 5]
    assert session.messages[1] == {
        "seq": 2,
        "role": "assistant",
        "content": "",
        "tool_calls": [CALL],
        "timestamp": "2026-12-03T07:22:42.497Z",
    }
    assert session.messages[0]["content"].endswith("世界 😀\n\ttab \x01")
    assert session.state == {
        "trust": "owner",
        "model": "openai/gpt-4o",
        "flushed_cycle": 0,
        "last_consolidated": 3,
    }
    assert session.records == [
        Delivery(seq=4, status="sent", timestamp="2026-12-03T07:22:42.497Z"),
        Delivery(
            seq=4,
            status="failed",
            error="Forbidden: bot was blocked",
            timestamp="2026-12-03T07:22:42.497Z",
        ),
        Command(name="model", message_id="102", timestamp="2026-12-03T07:22:42.497Z"),
        TurnError(error="empty reply", timestamp="2026-12-03T07:22:42.497Z"),
        Compaction(
            up_to_seq=2,
            summary="The user keeps a todo list.",
            timestamp="2026-12-03T07:22:42.497Z",
        ),
        Consolidation(from_seq=1, to_seq=3, mode="llm", timestamp="2026-12-03T07:22:42.497Z"),
        Archived(timestamp="2026-12-03T07:22:42.498Z"),
    ]
    assert session.message_ids == {"101": 1, "103": 5}
    assert session.next_seq == 6 and session.last_consolidated == 3


@pytest.mark.parametrize(
    "line",
    [
        '{"type":"reaction","emoji":"+1","timestamp":"2026-12-03T07:22:42.497Z"}',
        '{"type":"Delivery","seq":2,"status":"sent"}',
        '{"type":["delivery"],"seq":2,"status":"sent"}',
        '{"type":"delivery","seq":2,"status":"delivered"}',
        '{"seq":9,"role":"system","content":"not a role we write"}',
        '{"seq":"9","role":"user","content":"seq must be a number"}',
    ],
)
async def test_an_unknown_or_wrong_typed_line_is_skipped_with_a_warning(
    tmp_path: Path, caplog, line: str
) -> None:
    store = SessionStore(tmp_path)
    session = await store.get("telegram:42")
    store.append(session, Message(role="user", content="hello"))
    with session.path.open("a") as handle:
        handle.write(line + "\n")
    store.append(session, Message(role="assistant", content="hi"))
    with caplog.at_level(logging.WARNING):
        loaded = load_session(session.path, session.key)
    assert [m["content"] for m in loaded.messages] == ["hello", "hi"]
    assert loaded.records == []
    assert any("telegram_42.jsonl:3: skipped" in r.getMessage() for r in caplog.records)


def test_the_loaded_message_form_has_the_message_models_fields() -> None:
    assert list(StoredMessage.__annotations__) == list(Message.model_fields)
    assert MESSAGE_LINE.validate_python({"seq": 1, "role": "user"}) == {"seq": 1, "role": "user"}
    with pytest.raises(ValidationError):
        MESSAGE_LINE.validate_python({"role": "user", "content": "no seq"})


async def test_any_text_is_written_as_json_dumps_would_write_it(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    session = await store.get("k:1")

    @settings(deadline=None, max_examples=300)
    @given(st.text(), st.text(max_size=20))
    def check(content: str, message_id: str) -> None:
        message = Message(role="user", content=content, message_id=message_id or None)
        stored = store.append(session, message)
        line = session.path.read_bytes().splitlines()[-1]
        assert line == json.dumps(stored, ensure_ascii=False, separators=(",", ":")).encode()

    check()


# -- at-most-once delivery ----------------------------------------------------------------


async def _turn(tmp_path: Path) -> tuple[SessionStore, Any]:
    store = SessionStore(tmp_path)
    session = await store.get("telegram:42")
    store.append(session, Message(role="user", content="hello", message_id="u1"))
    return store, session


async def test_replay_of_a_message_whose_turn_never_finished(tmp_path: Path) -> None:
    _, session = await _turn(tmp_path)
    assert replay(session, 1).action is Replay.UNFINISHED
    assert unanswered(session) == session.messages[0]


async def test_replay_of_a_reply_never_sent_then_handed_out(tmp_path: Path) -> None:
    store, session = await _turn(tmp_path)
    reply = store.append(session, Message(role="assistant", content="hi"))
    decision = replay(session, 1)
    assert decision.action is Replay.UNSENT and decision.reply == reply
    assert unanswered(session) is None
    hand_out(session, reply["seq"])
    assert answered(session, reply["seq"])
    assert replay(session, 1).action is Replay.ANSWERED


async def test_a_delivery_record_survives_a_restart(tmp_path: Path) -> None:
    store, session = await _turn(tmp_path)
    reply = store.append(session, Message(role="assistant", content="hi"))
    store.append(session, Delivery(seq=reply["seq"], status="failed", error="timeout"))
    assert replay(load_session(session.path, session.key), 1).action is Replay.UNSENT
    store.append(session, Delivery(seq=reply["seq"], status="sent"))
    assert replay(load_session(session.path, session.key), 1).action is Replay.ANSWERED


async def test_replay_of_an_old_unanswered_message_after_newer_ones(tmp_path: Path) -> None:
    store, session = await _turn(tmp_path)
    store.append(session, Message(role="user", content="are you there?", message_id="u2"))
    store.append(session, Message(role="assistant", content="yes"))
    assert replay(session, 1).action is Replay.SUPERSEDED


async def test_a_command_runs_once_per_platform_message(tmp_path: Path) -> None:
    store, session = await _turn(tmp_path)
    assert not command_ran(session, "c1")
    store.append(session, Command(name="new", message_id="c1"))
    assert command_ran(load_session(session.path, session.key), "c1")


async def test_a_lone_surrogate_in_a_record_is_stored_as_valid_utf8(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    session = await store.get("k:1")
    record = store.append(session, TurnError(error="bad \ud800 text"))
    assert record.error == "bad \ufffd text"
    session.path.read_bytes().decode("utf-8")
    assert load_session(session.path, "k:1").records == [record]
