"""Reloading a session validates each line once, as the kind it is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clawgate.agent.session import (
    Archived,
    Compaction,
    Consolidation,
    Delivery,
    Message,
    SessionStore,
    State,
    load_session,
)
from clawgate.agent.session import lines as lines_module
from clawgate.agent.session.records import MESSAGE_LINE


class CountingMessages:
    """Stands in for the message validator and counts the lines handed to it."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.validator = self

    def validate_json(self, data: bytes, *args: Any, **kwargs: Any) -> Any:
        self.lines.append(bytes(data))
        return MESSAGE_LINE.validate_json(data, *args, **kwargs)


async def test_a_record_line_is_not_validated_as_a_message_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SessionStore(tmp_path)
    session = await store.get("telegram:42")
    store.append(session, State(trust="owner"))
    store.append(session, Message(role="user", content="hello", message_id="7"))
    reply = store.append(session, Message(role="assistant", content="hi"))
    store.append(session, Delivery(seq=reply.seq, status="sent"))
    store.append(session, Consolidation(from_seq=1, to_seq=2, mode="llm"))
    counting = CountingMessages()
    monkeypatch.setattr(lines_module, "MESSAGE_LINE", counting)

    loaded = load_session(session.path, session.key)

    assert [line[:7] for line in counting.lines] == [b'{"seq":'] * 2
    assert loaded.messages == session.messages
    assert loaded.records == session.records
    assert loaded.state == session.state and loaded.message_ids == {"7": 1}


async def test_a_record_shaped_line_that_is_a_message_still_loads_as_one(tmp_path: Path) -> None:
    # Only what the store writes takes the short way: a line that begins like a record but
    # carries a role (even spelled with an escape) is read as before, as a message.
    store = SessionStore(tmp_path)
    session = await store.get("telegram:42")
    store.append(session, Message(role="user", content="hello"))
    with session.path.open("a") as handle:
        handle.write('{"type":"state","seq":2,"role":"assistant","content":"a"}\n')
        handle.write('{"type":"state","seq":3,"r\\u006fle":"user","content":"b"}\n')
    loaded = load_session(session.path, session.key)
    assert [m.content for m in loaded.messages] == ["hello", "a", "b"]
    assert loaded.records == [] and loaded.next_seq == 4


@pytest.mark.parametrize("live_only", [False, True])
async def test_records_by_kind_answer_as_a_scan_of_the_file_does(
    tmp_path: Path, live_only: bool
) -> None:
    # A turn asks for the latest compaction, how many there were and a reply's deliveries
    # from running indexes; after a reload (the cold part read on demand) they must answer
    # what a scan of every record answers.
    store = SessionStore(tmp_path)
    session = await store.get("telegram:42")
    for turn in range(6):
        store.append(session, Message(role="user", content=f"q{turn}", message_id=str(turn)))
        reply = store.append(session, Message(role="assistant", content=f"a{turn}"))
        store.append(session, Delivery(seq=reply.seq, status="failed" if turn == 1 else "sent"))
        if turn in (2, 4):
            store.append(session, Compaction(up_to_seq=reply.seq, summary=f"s{turn}"))
    store.append(session, Consolidation(from_seq=1, to_seq=6, mode="llm"))
    await store.sync(session)

    for loaded in (session, load_session(session.path, session.key, live_only=live_only)):
        compactions = [r for r in loaded.records if isinstance(r, Compaction)]
        assert loaded.count(Compaction) == 2 and loaded.latest(Compaction) == compactions[-1]
        assert [r.summary for r in loaded.records_of(Compaction)] == ["s2", "s4"]
        assert [r.status for r in loaded.deliveries_for(4)] == ["failed"]
        assert [r.seq for r in loaded.records_of(Delivery)] == [2, 4, 6, 8, 10, 12]
        assert list(loaded.records_of(Archived)) == []
