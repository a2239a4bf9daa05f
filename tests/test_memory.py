import asyncio
import json
from datetime import UTC, datetime

import pytest

from clawgate.agent.memory.audit import audit_sessions
from clawgate.agent.session import (
    Archived,
    Consolidation,
    Message,
    load_session,
)
from clawgate.kernel.bus import Trust
from clawgate.kernel.storage import DiskWriter
from tests.conftest import MakeClient
from tests.fakes.llm import error, gate, raw_tool_call, text
from tests.harness import Harness, make_config
from tests.memory_helpers import is_consolidation, make_consolidator, owner_session, save

MEMORY = "# Memory\n\n- Ann lives in Porto\n- Ann's cat is Miso\n- Ann works on clawgate\n- Ann likes tea\n"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _snapshot(tmp_path):
    memory = tmp_path / "workspace" / "memory"
    return {p.name: p.read_text() for p in sorted(memory.glob("*.md"))}


async def test_consolidation_in_the_background_after_memory_window(
    tmp_path, fake_llm, agent_config
):
    agent_config.memory_window = 6
    config = make_config(tmp_path, agent_config)
    (config.workspace / "memory" / "MEMORY.md").write_text(MEMORY)
    release = asyncio.Event()
    fake_llm.handler = lambda request: (
        gate(release, save(memory=MEMORY + "- Ann booked Lisbon for May\n"))
        if is_consolidation(request)
        else text("noted")
    )
    async with Harness(config) as harness:
        for i in range(3):
            assert (await harness.ask(f"turn {i}: Lisbon in May")).text == "noted"
        # The reply came back although the consolidation's answer is still held.
        assert harness.runtime.consolidator.busy
        assert "Lisbon for May" not in (config.workspace / "memory" / "MEMORY.md").read_text()
        release.set()
        assert await harness.runtime.consolidator.drain(10)
    memory_dir = config.workspace / "memory"
    history = (memory_dir / "HISTORY.md").read_text()
    assert history.startswith("[") and "(test:1) Ann planned the Lisbon trip." in history
    assert "- Ann booked Lisbon for May" in (memory_dir / "MEMORY.md").read_text()
    day = datetime.now(UTC).date().isoformat()
    assert "Ann planned the Lisbon trip." in (memory_dir / f"{day}.md").read_text()
    assert list((memory_dir / ".versions").glob("MEMORY.*.md"))
    consolidation = next(r for r in fake_llm.requests if is_consolidation(r))
    prompt = consolidation["messages"][1]["content"]
    assert "Ann's cat is Miso" in prompt and "USER: turn 0: Lisbon in May" in prompt
    assert "turn 2" not in prompt  # the newest memory_window // 2 messages stay live
    reloaded = load_session(harness.runtime.sessions.path_for("test:1"), "test:1")
    assert reloaded.last_consolidated == 3
    assert [m.seq for m in reloaded.unconsolidated()] == [4, 5, 6]
    assert audit_sessions(config.workspace / "sessions").ok


async def test_burst_during_slow_consolidation_skips_nothing(tmp_path, fake_llm, agent_config):
    agent_config.memory_window = 6
    config = make_config(tmp_path, agent_config)
    release = asyncio.Event()
    first = True

    def handler(request):
        nonlocal first
        if is_consolidation(request):
            reply = gate(release, save()) if first else save("Later part.")
            first = False
            return reply
        return text("ok")

    fake_llm.handler = handler
    async with Harness(config) as harness:
        for i in range(3):
            await harness.ask(f"warm-up {i}")
        for i in range(8):  # arrives while the first consolidation is held
            await harness.ask(f"burst {i}")
        release.set()
        assert await harness.runtime.consolidator.drain(10)
        await harness.ask("one more")  # triggers a second consolidation
        assert await harness.runtime.consolidator.drain(10)
    session = load_session(harness.runtime.sessions.path_for("test:1"), "test:1")
    ranges = [(r.from_seq, r.to_seq) for r in session.records_of(Consolidation)]
    assert ranges[0] == (1, 3)  # the cut fixed before the model call, not moved by the burst
    assert len(ranges) == 2 and ranges[1][0] == 4
    report = audit_sessions(config.workspace / "sessions")
    assert report.ok and report.total == len(session.messages) == 24


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (text("I can't do that."), "no save_memory"),
        (save(""), "empty"),
        (save("Error: the model failed"), "error"),
        (save("x" * 9000), "too long"),
        (text("partial", finish_reason="length"), "cut off"),
        (save(memory="# Memory\n- only one fact\n"), "would drop"),
        (error(500, "upstream down"), "HTTP 500"),
        (raw_tool_call("save_memory", '{"history_entry": "unterminated'), "not JSON"),
    ],
)
async def test_every_refusal_changes_nothing_and_a_later_attempt_succeeds(
    tmp_path,
    fake_llm,
    agent_config,
    reply,
    reason,
    make_client: MakeClient,
):
    sessions, session = await owner_session(tmp_path)
    store, consolidator = make_consolidator(tmp_path, sessions, agent_config, make_client)
    store.memory_path.write_text(MEMORY)
    before, lines_before = _snapshot(tmp_path), session.path.read_text()
    fake_llm.script(reply)
    outcome = await consolidator.consolidate(session)
    assert not outcome.ok and reason in outcome.reason
    assert _snapshot(tmp_path) == before
    assert session.path.read_text() == lines_before and session.last_consolidated == 0
    fake_llm.script(save(memory=MEMORY + "- new fact\n"))
    assert (await consolidator.consolidate(session)).ok
    assert "new fact" in store.read_memory() and session.last_consolidated == 7
    assert audit_sessions(sessions.directory).ok


async def test_json_in_text_double_encoded_args_and_unforced_retry(
    tmp_path,
    fake_llm,
    agent_config,
    make_client: MakeClient,
):
    sessions, session = await owner_session(tmp_path, count=0)
    store, consolidator = make_consolidator(tmp_path, sessions, agent_config, make_client)
    replies = [
        [text('Here you go: {"history_entry": "From text.", "memory_update": null}')],
        [raw_tool_call("save_memory", json.dumps(json.dumps({"history_entry": "Double."})))],
        [error(400, "tool_choice 'required' is not supported by this model"), save("Unforced.")],
    ]
    for round_replies in replies:
        for i in range(6):
            sessions.append(session, Message(role="user", content=f"more {i}"))
        fake_llm.script(*round_replies)
        assert (await consolidator.consolidate(session)).ok
    assert "tool_choice" in fake_llm.requests[-2] and "tool_choice" not in fake_llm.requests[-1]
    history = store.history_path.read_text()
    assert all(word in history for word in ("From text.", "Double.", "Unforced."))


async def test_three_spaced_failures_archive_the_raw_messages(
    tmp_path, fake_llm, agent_config, make_client: MakeClient
):
    sessions, session = await owner_session(tmp_path)
    clock = Clock()
    store, consolidator = make_consolidator(
        tmp_path, sessions, agent_config, make_client, clock=clock
    )
    fake_llm.handler = lambda request: error(500, "down")
    for attempt in range(3):
        task = consolidator.maybe_schedule(session)
        assert task is not None, f"attempt {attempt} should run"
        await task
        # A trigger inside the backoff window is a no-op, not a queued duplicate.
        assert consolidator.maybe_schedule(session) is None if attempt < 2 else True
        clock.now += 1000
    history = store.history_path.read_text()
    assert "Raw archive of messages 1-7" in history and "message 0 about Lisbon" in history
    assert session.last_consolidated == 7
    assert len(fake_llm.requests) == 3
    assert audit_sessions(sessions.directory).ok


async def test_disk_refusing_writes_loses_nothing(
    tmp_path, fake_llm, agent_config, make_client: MakeClient
):
    class FullDisk(DiskWriter):
        full = True

        def _check(self, path):
            if self.full and "memory" in str(path):
                raise OSError(28, "No space left on device")

    writer = FullDisk()
    sessions, session = await owner_session(tmp_path)
    store, consolidator = make_consolidator(
        tmp_path, sessions, agent_config, make_client, writer=writer
    )
    fake_llm.script(save())
    assert not (await consolidator.consolidate(session)).ok
    assert session.last_consolidated == 0 and not store.history_path.exists()
    writer.full = False
    fake_llm.script(save())
    assert (await consolidator.consolidate(session)).ok
    assert audit_sessions(sessions.directory).ok


async def test_shared_sessions_never_see_or_rewrite_memory(tmp_path, fake_llm, agent_config):
    agent_config.memory_window = 6
    config = make_config(tmp_path, agent_config)
    memory_file = config.workspace / "memory" / "MEMORY.md"
    memory_file.write_text(MEMORY)
    fake_llm.handler = lambda request: (
        save("Group talked.", memory="# hacked\n") if is_consolidation(request) else text("hi")
    )
    async with Harness(config) as harness:
        for trust in (Trust.GROUP, Trust.ALLOWED):
            for i in range(3):
                await harness.ask(f"msg {i}", chat_id=trust.value, trust=trust)
            assert "Miso" not in fake_llm.requests[-1]["messages"][0]["content"]
        assert await harness.runtime.consolidator.drain(10)
        await harness.ask("owner here")
        assert "Miso" in fake_llm.requests[-1]["messages"][0]["content"]
    consolidations = [r for r in fake_llm.requests if is_consolidation(r)]
    assert len(consolidations) == 2
    assert all("Miso" not in json.dumps(r["messages"]) for r in consolidations)
    assert memory_file.read_text() == MEMORY
    # Shared chats' consolidations land in their own notes, never in the owner's history.
    history = config.workspace / "memory" / "HISTORY.md"
    assert "Group talked." not in (history.read_text() if history.exists() else "")
    notes = sorted((config.workspace / "memory" / "chats").glob("*/HISTORY.md"))
    assert len(notes) == 2 and all(n.read_text().count("> Group talked.") == 1 for n in notes)
    assert audit_sessions(config.workspace / "sessions").ok


async def test_new_archives_in_background_and_survives_a_crash(tmp_path, fake_llm, agent_config):
    config = make_config(tmp_path, agent_config)
    held = asyncio.Event()
    fake_llm.handler = lambda request: (
        gate(held, save("Archived talk.")) if is_consolidation(request) else text("ok")
    )
    harness = Harness(config)
    await harness.gateway.start()
    await harness.ask("remember the Lisbon trip")
    assert (await harness.ask("/new")).text == "New session started."
    await fake_llm.wait_for_requests(2)  # the archive's consolidation is in flight...
    await harness.runtime.consolidator.close()  # ...and the process dies
    await harness.runtime.llm.aclose()  # its connections go with it
    archived = list((config.workspace / "sessions" / "archive").glob("*.jsonl"))
    assert len(archived) == 1
    assert audit_sessions(config.workspace / "sessions").pending_archive == 2
    fake_llm.handler = lambda request: (
        save("Archived talk.") if is_consolidation(request) else text("ok")
    )
    async with Harness(config) as restarted:
        assert await restarted.runtime.consolidator.drain(10)
    assert archived[0].exists()  # the raw record is kept after its archive lands
    transcript = load_session(archived[0], "test:1")
    assert any(True for _ in transcript.records_of(Archived))
    history = (config.workspace / "memory" / "HISTORY.md").read_text()
    assert history.count("Archived talk.") == 1
    notes = [p for p in (config.workspace / "memory").glob("*-archived-talk.md")]
    assert len(notes) == 1 and "Archived talk." in notes[0].read_text()
    report = audit_sessions(config.workspace / "sessions")
    assert report.ok and report.pending_archive == 0 and report.covered == 2


async def test_new_during_consolidation_makes_no_duplicates(tmp_path, fake_llm, agent_config):
    agent_config.memory_window = 6
    config = make_config(tmp_path, agent_config)
    release = asyncio.Event()
    calls = 0

    def handler(request):
        nonlocal calls
        if not is_consolidation(request):
            return text("ok")
        calls += 1
        return gate(release, save(f"Part {calls}.")) if calls == 1 else save(f"Part {calls}.")

    fake_llm.handler = handler
    async with Harness(config) as harness:
        for i in range(3):
            await harness.ask(f"m{i}")
        assert harness.runtime.consolidator.busy
        assert (await harness.ask("/new")).text == "New session started."
        release.set()
        assert await harness.runtime.consolidator.drain(10)
    report = audit_sessions(config.workspace / "sessions")
    assert report.ok and report.live == 0 and report.covered == 6


async def test_audit_reports_a_deleted_line(tmp_path, fake_llm, agent_config):
    sessions, session = await owner_session(tmp_path)
    assert audit_sessions(sessions.directory).ok
    lines = session.path.read_text().splitlines(keepends=True)
    victim = next(i for i, line in enumerate(lines) if '"seq":3' in line)
    session.path.write_text("".join(lines[:victim] + lines[victim + 1 :]))
    report = audit_sessions(sessions.directory)
    assert not report.ok and any("seq 3 is missing" in p for p in report.problems)
