import json
import logging
import string
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from clawgate.agent.history import MISSING_RESULT, repair_tool_pairs, to_model_messages
from clawgate.agent.session import (
    Message,
    SessionStore,
    State,
    StoredMessage,
    load_session,
    read_key,
    session_filename,
)


def test_filename_examples():
    assert session_filename("telegram:123") == "telegram_123"
    assert session_filename("telegram:-100987") == "telegram_-100987"
    assert session_filename("cli:my_chat") == "cli_my%5Fchat"
    assert session_filename("telegram:1:2") == "telegram_1_2"
    assert session_filename("a/../b") == "a%2F%2E%2E%2Fb"


@settings(deadline=None, max_examples=300)
@given(st.text(min_size=1, max_size=40), st.text(min_size=1, max_size=40))
def test_filename_is_injective_and_safe(a, b):
    fa, fb = session_filename(a), session_filename(b)
    assert set(fa) <= set(string.ascii_letters + string.digits + "-_%0123456789ABCDEF")
    assert "/" not in fa and fa not in (".", "..")
    if a != b:
        assert fa != fb


async def _session_with_turn(tmp_path: Path):
    store = SessionStore(tmp_path / "sessions")
    session = await store.get("telegram:123")
    store.append(session, Message(role="user", content="hello"))
    store.append(session, Message(role="assistant", content="hi there, 世界"))
    await store.sync(session)
    return store, session


async def test_header_names_key_and_messages_have_fields(tmp_path):
    _, session = await _session_with_turn(tmp_path)
    lines = session.path.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["type"] == "session" and header["key"] == "telegram:123"
    assert read_key(session.path) == "telegram:123"
    first = json.loads(lines[1])
    assert first["seq"] == 1 and first["role"] == "user" and first["timestamp"].endswith("Z")
    assert session.path.name == "telegram_123.jsonl"
    assert (session.path.stat().st_mode & 0o777) == 0o600


async def test_seq_continues_across_restart(tmp_path):
    store, session = await _session_with_turn(tmp_path)
    store.append(session, State(last_consolidated=1))
    reloaded = await SessionStore(tmp_path / "sessions").get("telegram:123")
    assert [m.seq for m in reloaded.messages] == [1, 2]
    assert reloaded.last_consolidated == 1
    assert [m.seq for m in reloaded.unconsolidated()] == [2]
    assert reloaded.unconsolidated_count() == 1
    stored = SessionStore(tmp_path / "sessions").append(reloaded, Message(role="user", content="x"))
    assert stored.seq == 3


async def test_truncation_at_every_byte_of_last_line_loads(tmp_path, caplog):
    store, session = await _session_with_turn(tmp_path)
    store.append(session, Message(role="user", content="the last line ✓"))
    raw = session.path.read_bytes()
    last_start = raw.rstrip(b"\n").rfind(b"\n") + 1
    for cut in range(last_start, len(raw) + 1):
        path = tmp_path / f"cut{cut}.jsonl"
        path.write_bytes(raw[:cut])
        with caplog.at_level(logging.WARNING):
            loaded = load_session(path, "telegram:123")
        complete = cut >= len(raw) - 1  # the line is whole with or without its newline
        assert [m.seq for m in loaded.messages] == ([1, 2, 3] if complete else [1, 2])
        # A torn file must accept further appends without gluing them onto the fragment.
        cut_store = SessionStore(tmp_path)
        cut_store._cache["telegram:123"] = loaded
        loaded.path = path
        cut_store.append(loaded, Message(role="user", content="after crash"))
        again = load_session(path, "telegram:123")
        assert again.messages[-1].content == "after crash"
        assert again.messages[-1].seq == (4 if complete else 3)


async def test_corrupt_line_in_the_middle_is_skipped(tmp_path, caplog):
    store, session = await _session_with_turn(tmp_path)
    with session.path.open("ab") as handle:
        handle.write(b"{not json\n\xff\xfe\n[1,2]\n")
    store.append(session, Message(role="user", content="still here"))
    with caplog.at_level(logging.WARNING):
        loaded = load_session(session.path, "telegram:123")
    assert [m.content for m in loaded.messages] == ["hello", "hi there, 世界", "still here"]
    assert "skipped" in caplog.text


async def test_archive_moves_file_and_continues_seq(tmp_path):
    store, session = await _session_with_turn(tmp_path)
    live_path = session.path
    archived = await store.archive(session)
    assert archived is not None and archived.parent.name == "archive" and archived.exists()
    assert not live_path.exists()
    assert session.path == archived  # the old object now stands for the archived transcript
    fresh = await store.get("telegram:123")
    assert fresh.messages == []
    assert store.append(fresh, Message(role="user", content="new")).seq == 3
    assert load_session(fresh.path, "telegram:123").next_seq == 4


async def test_cache_is_bounded(tmp_path):
    store = SessionStore(tmp_path / "s", cache_size=3)
    for i in range(10):
        await store.get(f"cli:{i}")
    assert len(store._cache) == 3


def _call(call_id, name="read_file"):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def test_pair_repair_adds_missing_and_drops_orphans_and_duplicates():
    history = [
        {"role": "tool", "tool_call_id": "gone", "content": "orphan from a consolidated call"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [_call("a"), _call("b")]},
        {"role": "tool", "tool_call_id": "a", "content": "A"},
        {"role": "tool", "tool_call_id": "a", "content": "A again"},
        {"role": "user", "content": "next"},
        {"role": "tool", "tool_call_id": "b", "content": "late B"},
    ]
    repaired = repair_tool_pairs(history)
    assert [m["role"] for m in repaired] == ["user", "assistant", "tool", "tool", "user"]
    assert repaired[2]["content"] == "A"
    assert repaired[3]["tool_call_id"] == "b" and repaired[3]["content"] == MISSING_RESULT


@settings(deadline=None, max_examples=200)
@given(
    st.lists(
        st.one_of(
            st.just({"role": "user", "content": "u"}),
            st.sampled_from(["a", "b", "c"]).map(
                lambda i: {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [_call(i), _call(i + "2")],
                }
            ),
            st.sampled_from(["a", "b", "c", "a2", "x"]).map(
                lambda i: {"role": "tool", "tool_call_id": i, "content": "r"}
            ),
            st.just({"role": "assistant", "content": "done"}),
        ),
        max_size=30,
    )
)
def test_pair_repair_always_yields_valid_history(history):
    repaired = to_model_messages([StoredMessage(dict(m, seq=i)) for i, m in enumerate(history)])
    expected: list[str] = []
    for message in repaired:
        assert "seq" not in message
        if message["role"] == "tool":
            assert message["tool_call_id"] in expected
            expected.remove(message["tool_call_id"])
        else:
            assert not expected
            expected = [c["id"] for c in message.get("tool_calls") or []]
    assert not expected
