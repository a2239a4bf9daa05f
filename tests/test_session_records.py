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
    StoredMessage,
    ToolCall,
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
from clawgate.agent.session.records import MESSAGE_LINE, MessageLine
from clawgate.agent.session.state import SessionState
from clawgate.kernel.bus import ChatFacts, Trust

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
    records = [w for w in written if not isinstance(w, StoredMessage)]
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
    assert [m.seq for m in session.messages] == [1, 2, 3, 4, 5]
    assert session.messages[1].to_dict() == {
        "seq": 2,
        "role": "assistant",
        "content": "",
        "tool_calls": [CALL],
        "timestamp": "2026-12-03T07:22:42.497Z",
    }
    assert session.messages[0].content.endswith("世界 😀\n\ttab \x01")
    assert session.state == SessionState(
        trust=Trust.OWNER, model="openai/gpt-4o", flushed_cycle=0, last_consolidated=3
    )
    assert session.state.trust is Trust.OWNER
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


def test_state_written_as_today_loads_typed(tmp_path: Path) -> None:
    path = tmp_path / "telegram_-100.jsonl"
    path.write_text(
        '{"type": "session", "key": "telegram:-100", "version": 1, "first_seq": 1}\n'
        '{"type":"state","trust":"group","chat":{"private":false,"user_id":"7","username":null,'
        '"group_ids":["-100"]},"timestamp":"2026-12-03T07:22:42.497Z"}\n'
        '{"seq":1,"role":"user","content":"[Ann] hi","timestamp":"2026-12-03T07:22:42.497Z"}\n'
        '{"type":"state","model":"openai/gpt-4o","timestamp":"2026-12-03T07:22:42.497Z"}\n'
    )
    state = load_session(path, "telegram:-100").state
    assert state.trust is Trust.GROUP
    assert state.chat == ChatFacts(private=False, user_id="7", group_ids=("-100",))
    assert (state.model, state.flushed_cycle, state.last_consolidated) == ("openai/gpt-4o", None, 0)
    with pytest.raises(ValidationError):
        state.model = "other"  # type: ignore[misc]


async def test_an_unknown_trust_in_the_file_reads_as_not_recorded(tmp_path: Path, caplog) -> None:
    # As before the typed state: the line loads (no warning), the unknown value is never taken
    # for a trust (scheduled runs and replays fall back to `allowed`, the next turn records
    # its own), and the range it marks is not the owner's.
    store = SessionStore(tmp_path)
    session = await store.get("telegram:42")
    store.append(session, State(trust="superuser", chat={"private": "maybe"}))
    store.append(session, Message(role="user", content="hello"))
    with caplog.at_level(logging.WARNING):
        loaded = load_session(session.path, session.key)
    assert not caplog.records
    assert loaded.state == SessionState() == session.state
    assert loaded.trusts_between(1, 1) == {"superuser"}
    assert loaded.state.trust != Trust.OWNER


async def test_update_state_writes_the_state_record_as_before(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    session = await store.get("telegram:42")
    facts = ChatFacts(private=True, user_id="42")
    state = store.update_state(session, trust=Trust.OWNER, chat=facts)
    assert state == session.state == SessionState(trust=Trust.OWNER, chat=facts)
    line = json.loads(session.path.read_text().splitlines()[-1])
    assert line == {
        "type": "state",
        "trust": "owner",
        "chat": {"private": True, "user_id": "42", "username": None, "group_ids": []},
        "timestamp": line["timestamp"],
    }
    store.update_state(session, model="openai/gpt-4o")
    assert session.state.trust is Trust.OWNER and session.state.model == "openai/gpt-4o"
    assert load_session(session.path, session.key).state == session.state


async def test_a_stored_message_is_read_only_and_sent_without_our_fields(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    session = await store.get("telegram:42")
    store.append(session, Message(role="user", content="hi", message_id="9"))
    call = Message(role="assistant", tool_calls=[ToolCall.model_validate(CALL)])
    stored = store.append(session, call)
    assert stored.tool_calls == (ToolCall.model_validate(CALL),)
    assert stored == session.messages[1] == load_session(session.path, session.key).messages[1]
    with pytest.raises(AttributeError):
        stored.content = "changed"  # type: ignore[misc]
    assert session.messages[0].to_provider() == {"role": "user", "content": "hi"}
    assert stored.to_provider() == {"role": "assistant", "content": "", "tool_calls": [CALL]}


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
    assert [m.content for m in loaded.messages] == ["hello", "hi"]
    assert loaded.records == []
    assert any("telegram_42.jsonl:3: skipped" in r.getMessage() for r in caplog.records)


def test_the_loaded_message_form_has_the_message_models_fields() -> None:
    assert list(MessageLine.__annotations__) == list(Message.model_fields)
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
        assert (
            line == json.dumps(stored.to_dict(), ensure_ascii=False, separators=(",", ":")).encode()
        )

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
    hand_out(session, reply.seq)
    assert answered(session, reply.seq)
    assert replay(session, 1).action is Replay.ANSWERED


async def test_a_delivery_record_survives_a_restart(tmp_path: Path) -> None:
    store, session = await _turn(tmp_path)
    reply = store.append(session, Message(role="assistant", content="hi"))
    store.append(session, Delivery(seq=reply.seq, status="failed", error="timeout"))
    assert replay(load_session(session.path, session.key), 1).action is Replay.UNSENT
    store.append(session, Delivery(seq=reply.seq, status="sent"))
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
