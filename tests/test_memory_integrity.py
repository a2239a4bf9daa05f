"""Memory integrity (issue 11, cases 4-8): failures that escaped the failure count, MEMORY.md
rewrites that dropped facts, backups pruned by a clock that went back, state keyed by a
Session object the cache could drop, and the context guard on one oversized message."""

import asyncio
import logging
import time

from clawgate.agent.loop import TOO_LONG
from clawgate.agent.memory.audit import audit_sessions
from clawgate.agent.memory.store import MemoryStore
from clawgate.agent.session import Archived, Consolidation, Message
from clawgate.gateway.ops.housekeeping import sweep
from clawgate.kernel.clock import Clock as Clocks
from clawgate.kernel.config import Config, HousekeepingConfig
from clawgate.kernel.storage import DiskWriter
from tests.conftest import MakeClient
from tests.fakes.llm import error, gate, text, tool_call
from tests.harness import Harness, make_config
from tests.memory_helpers import is_consolidation, make_consolidator, owner_session, save

HALF_EMOJI = "\ud83d"  # the first half of a surrogate pair, alone: no character
TEN_FACTS = "# Memory\n\n" + "".join(f"- fact number {i}\n" for i in range(10))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class BrokenHistory(DiskWriter):
    """A disk whose first `failures` appends to HISTORY.md raise something other than
    OSError (a driver bug, an encoding problem...)."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def _check(self, path):
        if path.name == "HISTORY.md" and self.failures > 0:
            self.failures -= 1
            raise RuntimeError("the disk driver hiccupped")


def _history_entries(store: MemoryStore) -> list[str]:
    if not store.history_path.exists():
        return []
    return [e for e in store.history_path.read_text().split("\n\n") if e.strip()]


# -- 4. Any exception is a failure; memory writes take any text -----------------------------


async def test_half_an_emoji_in_history_entry_is_written_not_raised(
    tmp_path,
    fake_llm,
    agent_config,
    make_client: MakeClient,
):
    sessions, session = await owner_session(tmp_path)
    store, consolidator = make_consolidator(tmp_path, sessions, agent_config, make_client)
    fake_llm.script(save(f"Ann sent {HALF_EMOJI} from Lisbon."))
    task = consolidator.maybe_schedule(session)
    assert task is not None
    outcome = await task
    assert outcome.ok and session.last_consolidated == 7
    [entry] = _history_entries(store)
    assert "Ann sent \ufffd from Lisbon." in entry
    day = store.now().date()
    assert "Ann sent \ufffd from Lisbon." in store.read_daily(day)
    assert audit_sessions(sessions.directory).ok


async def test_half_an_emoji_in_memory_update_lands_once(
    tmp_path, fake_llm, agent_config, make_client: MakeClient
):
    sessions, session = await owner_session(tmp_path)
    clock = Clock()
    store, consolidator = make_consolidator(
        tmp_path, sessions, agent_config, make_client, clock=clock
    )
    store.memory_path.write_text("# Memory\n\n- Ann lives in Porto\n")
    update = f"# Memory\n\n- Ann lives in Porto\n- Ann's favourite emoji is {HALF_EMOJI}\n"
    fake_llm.handler = lambda request: save("Ann named her emoji.", memory=update)
    for _ in range(3):  # a turn after each attempt, time moving on
        task = consolidator.maybe_schedule(session)
        if task is not None:
            assert (await task).ok
        clock.now += 1000
    assert len(_history_entries(store)) == 1
    assert "favourite emoji is \ufffd" in store.read_memory()
    assert len([r for r in fake_llm.requests if is_consolidation(r)]) == 1
    assert audit_sessions(sessions.directory).ok


async def test_any_exception_backs_off_then_archives_raw(
    tmp_path, fake_llm, agent_config, make_client: MakeClient
):
    sessions, session = await owner_session(tmp_path)
    clock = Clock()
    writer = BrokenHistory(failures=3)
    store, consolidator = make_consolidator(
        tmp_path, sessions, agent_config, make_client, clock=clock, writer=writer
    )
    fake_llm.handler = lambda request: save("A fine summary.")
    for attempt in range(3):
        task = consolidator.maybe_schedule(session)
        assert task is not None, f"attempt {attempt} should run"
        outcome = await task
        if attempt < 2:
            assert not outcome.ok and "hiccupped" in outcome.reason
            # Backoff: the next turn inside the window starts nothing.
            assert consolidator.maybe_schedule(session) is None
        clock.now += 1000
    assert outcome.ok and outcome.mode == "raw"
    [entry] = _history_entries(store)
    assert "Raw archive of messages 1-7" in entry and session.last_consolidated == 7
    assert len([r for r in fake_llm.requests if is_consolidation(r)]) == 3
    assert audit_sessions(sessions.directory).ok


async def test_archive_retries_any_exception(
    tmp_path, fake_llm, agent_config, make_client: MakeClient
):
    sessions, session = await owner_session(tmp_path, count=4)
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    store, consolidator = make_consolidator(
        tmp_path, sessions, agent_config, make_client, writer=BrokenHistory(failures=2), sleep=sleep
    )
    await sessions.archive(session)
    fake_llm.handler = lambda request: save("The archived talk.")
    outcome = await consolidator.schedule_archive(session)
    assert outcome.ok and outcome.mode == "llm" and slept == [30.0, 120.0]
    assert [e.count("The archived talk.") for e in _history_entries(store)] == [1]
    assert any(True for _ in session.records_of(Archived))
    report = audit_sessions(sessions.directory)
    assert report.ok and report.pending_archive == 0 and report.covered == 4


async def test_memory_md_that_is_not_utf8_never_blocks_consolidation(
    tmp_path,
    fake_llm,
    agent_config,
    caplog,
    make_client: MakeClient,
):
    sessions, session = await owner_session(tmp_path)
    store, consolidator = make_consolidator(tmp_path, sessions, agent_config, make_client)
    original = b"# Memory\n\n- Ann likes caf\xe9 au lait\n- Ann lives in Porto\n"  # Latin-1
    store.memory_path.write_bytes(original)
    seen = "# Memory\n\n- Ann likes caf\ufffd au lait\n- Ann lives in Porto\n"
    fake_llm.script(
        error(500, "down"),
        save("Ann talked about Lisbon.", memory=seen + "- Ann plans Lisbon\n"),
    )
    with caplog.at_level(logging.WARNING, logger="clawgate.agent.memory.store"):
        assert not (await consolidator.consolidate(session)).ok  # read, then the model failed
        assert (await consolidator.consolidate(session)).ok  # the same bytes read again
    prompts = [r["messages"][1]["content"] for r in fake_llm.requests if is_consolidation(r)]
    assert len(prompts) == 2 and all("caf\ufffd au lait" in p for p in prompts)
    assert len(_history_entries(store)) == 1 and session.last_consolidated == 7
    assert store.read_memory() == seen + "- Ann plans Lisbon\n"
    warnings = [r for r in caplog.records if "not valid UTF-8" in r.getMessage()]
    assert len(warnings) == 1
    # The backup keeps the bytes the editor wrote.
    assert [p.read_bytes() for p in store.versions_dir.glob("MEMORY.*.md")] == [original]
    # A model that repairs the character keeps the fact: no removal to list.
    store.memory_path.write_bytes(original)
    for i in range(6):
        sessions.append(session, Message(role="user", content=f"later {i}"))
    repaired = "# Memory\n\n- Ann likes café au lait\n- Ann lives in Porto\n"
    fake_llm.script(save("Ann talked about coffee.", memory=repaired))
    assert (await consolidator.consolidate(session)).ok
    assert store.read_memory() == repaired
    assert audit_sessions(sessions.directory).ok


# -- 5. A rewrite of MEMORY.md removes only what it lists, at most a third --------------------


async def _attempt(tmp_path, fake_llm, agent_config, make_client: MakeClient, memory: str, reply):
    sessions, session = await owner_session(tmp_path)
    store, consolidator = make_consolidator(tmp_path, sessions, agent_config, make_client)
    store.memory_path.write_text(memory)
    fake_llm.script(reply)
    outcome = await consolidator.consolidate(session)
    assert audit_sessions(sessions.directory).ok
    return store, session, outcome


async def test_a_placeholder_never_replaces_a_short_memory(
    tmp_path, fake_llm, agent_config, make_client
):
    memory = "# Memory\n\n- Ann's cat is Miso\n"
    reply = save("Nothing durable was said.", memory="No new facts to add.")
    store, session, outcome = await _attempt(
        tmp_path, fake_llm, agent_config, make_client, memory, reply
    )
    assert outcome.ok and session.last_consolidated == 7
    assert store.read_memory() == memory
    assert "Nothing durable was said." in store.history_path.read_text()


async def test_an_error_looking_update_is_refused(tmp_path, fake_llm, agent_config, make_client):
    memory = "# Memory\n\n- Ann's cat is Miso\n"
    reply = save("Talked.", memory="Error: I could not read the memory file.")
    store, session, outcome = await _attempt(
        tmp_path, fake_llm, agent_config, make_client, memory, reply
    )
    assert not outcome.ok and "looks like an error" in outcome.reason
    assert store.read_memory() == memory and not store.history_path.exists()
    assert session.last_consolidated == 0


async def test_dropping_half_of_ten_facts_is_refused(tmp_path, fake_llm, agent_config, make_client):
    half = "# Memory\n\n" + "".join(f"- fact number {i}\n" for i in range(5))
    reply = save("Talked.", memory=half)
    store, session, outcome = await _attempt(
        tmp_path, fake_llm, agent_config, make_client, TEN_FACTS, reply
    )
    assert not outcome.ok and "not listed in removed" in outcome.reason
    assert store.read_memory() == TEN_FACTS and session.last_consolidated == 0


async def test_listing_half_of_ten_facts_as_removed_is_still_refused(
    tmp_path, fake_llm, agent_config, make_client
):
    half = "# Memory\n\n" + "".join(f"- fact number {i}\n" for i in range(5))
    listed = [f"- fact number {i}" for i in range(5, 10)]
    reply = tool_call("save_memory", history_entry="Talked.", memory_update=half, removed=listed)
    store, session, outcome = await _attempt(
        tmp_path, fake_llm, agent_config, make_client, TEN_FACTS, reply
    )
    assert not outcome.ok and "at most a third" in outcome.reason
    assert store.read_memory() == TEN_FACTS and session.last_consolidated == 0


async def test_one_unlisted_fact_dropped_from_a_short_file_is_refused(
    tmp_path, fake_llm, agent_config, make_client
):
    memory = "# Memory\n\n- Ann lives in Porto\n- Ann's cat is Miso\n- Ann likes tea\n"
    update = "# Memory\n\n- Ann lives in Lisbon\n- Ann's cat is Miso\n- Ann likes tea\n"
    store, _, outcome = await _attempt(
        tmp_path, fake_llm, agent_config, make_client, memory, save("Ann moved.", memory=update)
    )
    assert not outcome.ok and "'ann lives in porto'" in outcome.reason
    assert store.read_memory() == memory


async def test_listed_removals_within_a_third_are_applied(
    tmp_path, fake_llm, agent_config, make_client
):
    update = TEN_FACTS.replace("- fact number 3\n", "- fact number 3, corrected\n")
    update = update.replace("- fact number 7\n", "").replace(
        "- fact number 8\n", "* Fact  number 8\n"
    )
    update += "- a new fact\n"
    reply = tool_call(
        "save_memory",
        history_entry="Corrected two facts.",
        memory_update=update,
        removed=["- fact number 3", "- fact number 7"],
    )
    store, session, outcome = await _attempt(
        tmp_path, fake_llm, agent_config, make_client, TEN_FACTS, reply
    )
    assert outcome.ok and session.last_consolidated == 7
    assert store.read_memory() == update
    request = next(r for r in fake_llm.requests if is_consolidation(r))
    schema = request["tools"][0]["function"]["parameters"]["properties"]
    assert schema["removed"]["type"] == "array"
    assert "removed" in request["messages"][0]["content"]


# -- 6. Backups by counter, not by the clock -------------------------------------------------


async def test_backup_survives_a_clock_that_went_back(
    tmp_path, fake_llm, agent_config, make_client: MakeClient
):
    sessions, session = await owner_session(tmp_path, count=0)
    store, consolidator = make_consolidator(tmp_path, sessions, agent_config, make_client)
    store.versions_dir.mkdir(parents=True)
    # Twenty backups written while the clock ran a year ahead (before NTP pulled it back).
    for i in range(20):
        (store.versions_dir / f"MEMORY.20271201T0000{i:02d}000000Z.md").write_text(f"ahead {i}\n")
    memory = "# Memory\n\n- fact 0\n"
    store.memory_path.write_text(memory)
    versions = [memory]
    for round_ in range(1, 4):
        for i in range(6):
            sessions.append(session, Message(role="user", content=f"round {round_} message {i}"))
        memory += f"- fact {round_}\n"
        versions.append(memory)
        fake_llm.script(save(f"Round {round_}.", memory=memory))
        assert (await consolidator.consolidate(session)).ok
    kept = {p.read_text() for p in store.versions_dir.glob("MEMORY.*.md")}
    assert len(kept) == 20
    assert set(versions[:3]) <= kept  # every previous version just written is there
    assert "ahead 0\n" not in kept and "ahead 3\n" in kept  # the oldest went first
    assert store.read_memory() == versions[3]
    config = Config(
        workspace=tmp_path / "workspace",
        data_dir=tmp_path / "data",
        agent=agent_config,
        housekeeping=HousekeepingConfig(
            media_days=0, archive_days=0, versions_days=10, keep_newest=0
        ),
    )
    later = Clocks(wall=lambda: time.time() + 11 * 86_400)
    assert sweep(config, clock=later).removed["memory versions"] == 20
    assert store.read_memory() == versions[3]
    assert audit_sessions(sessions.directory).ok


# -- 8. State keyed by session key; the session pinned while its consolidation runs ----------


async def test_eviction_during_a_consolidation_never_covers_a_seq_twice(
    tmp_path,
    fake_llm,
    agent_config,
    make_client: MakeClient,
):
    sessions, session = await owner_session(tmp_path, cache_size=2)
    store, consolidator = make_consolidator(tmp_path, sessions, agent_config, make_client)
    release = asyncio.Event()
    fake_llm.handler = lambda request: (
        gate(release, save("First part.")) if len(fake_llm.requests) == 1 else save("Again.")
    )
    assert consolidator.maybe_schedule(session) is not None
    await fake_llm.wait_for_requests(1)  # the consolidation is in flight
    for key in ("test:2", "test:3", "test:4"):  # enough other sessions to evict test:1
        await sessions.get(key)
    again = await sessions.get("test:1")
    sessions.append(again, Message(role="user", content="one more about Lisbon"))
    consolidator.maybe_schedule(again)
    release.set()
    assert await consolidator.drain(10)
    assert again is session  # the cache kept the object its consolidation holds
    ranges = [(r.from_seq, r.to_seq) for r in again.records_of(Consolidation)]
    assert ranges == [(1, 7)]
    assert store.history_path.read_text().count("(test:1)") == 1
    assert len([r for r in fake_llm.requests if is_consolidation(r)]) == 1
    # Nothing is left behind per key once its work is done.
    assert not (consolidator._running or consolidator._locks or consolidator._lock_users)
    for key in ("test:5", "test:6"):  # unpinned again: evictable like any other
        await sessions.get(key)
    reloaded = await sessions.get("test:1")
    assert reloaded is not session and reloaded.last_consolidated == 7
    assert audit_sessions(sessions.directory).ok


async def test_failure_backoff_survives_eviction(
    tmp_path, fake_llm, agent_config, make_client: MakeClient
):
    sessions, session = await owner_session(tmp_path, cache_size=1)
    clock = Clock()
    _, consolidator = make_consolidator(tmp_path, sessions, agent_config, make_client, clock=clock)
    fake_llm.handler = lambda request: error(500, "down")
    task = consolidator.maybe_schedule(session)
    assert task is not None and not (await task).ok
    await sessions.get("test:2")  # test:1 is evicted...
    again = await sessions.get("test:1")  # ...and loaded as a new object
    assert again is not session
    assert consolidator.maybe_schedule(again) is None  # still inside its backoff
    clock.now += 1000
    fake_llm.handler = lambda request: save("Recovered.")
    task = consolidator.maybe_schedule(again)
    assert task is not None and (await task).ok
    assert not consolidator._failures
    assert audit_sessions(sessions.directory).ok


# -- 7. One message larger than the window ---------------------------------------------------


async def test_one_message_larger_than_the_window_and_compact(tmp_path, fake_llm, agent_config):
    agent_config.context_window_tokens = 4000
    agent_config.max_tokens = 500
    config = make_config(tmp_path, agent_config)
    fake_llm.handler = lambda request: (
        save("A long paste.") if is_consolidation(request) else text("SUMMARY")
    )
    async with Harness(config) as harness:
        reply = await harness.ask("lorem ipsum dolor " * 2000)
        assert reply.is_error and reply.text == TOO_LONG
        assert (await harness.ask("/compact")).text == "Nothing to compact yet."
        assert (await harness.ask("/new")).text == "New session started."
        assert await harness.runtime.consolidator.drain(10)
    assert audit_sessions(config.workspace / "sessions").ok


async def test_a_stop_does_not_wait_for_an_archive_sleeping_out_its_backoff(
    tmp_path, fake_llm, agent_config, make_client: MakeClient
):
    sessions, session = await owner_session(tmp_path, count=4)
    backing_off = asyncio.Event()

    async def sleep(seconds: float) -> None:
        backing_off.set()
        await asyncio.Event().wait()  # a backoff longer than any stop's grace

    store, consolidator = make_consolidator(
        tmp_path, sessions, agent_config, make_client, sleep=sleep
    )
    await sessions.archive(session)
    fake_llm.handler = lambda request: text("no memory call")  # refused: tried again later
    archive = consolidator.schedule_archive(session)
    drained = asyncio.ensure_future(consolidator.drain(3600))
    await backing_off.wait()
    for _ in range(5):
        await asyncio.sleep(0)
    assert drained.done() and drained.result() is True
    assert consolidator.backing_off == 1 and not archive.done()
    await consolidator.close()
    assert archive.cancelled() and not _history_entries(store)
    assert audit_sessions(sessions.directory).pending_archive == 4  # the next start archives them
