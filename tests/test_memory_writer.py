"""One memory writer (issue 11, cases 1-2): no write to MEMORY.md or a daily log is lost to
another that started from an older copy - a consolidation in flight, a second owner chat,
another process, the model's own read-then-write_file of a log."""

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from clawgate.agent.memory.lock import MemoryLock
from clawgate.agent.memory.merge import merge_lines
from clawgate.agent.memory.store import MemoryStore
from clawgate.agent.session import Message, State
from clawgate.agent.tools import ToolContext, ToolRegistry, default_tools
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import ToolsConfig
from clawgate.kernel.storage import DiskWriter
from tests.fakes.llm import gate, text, tool_call
from tests.harness import Harness, make_config, wait_until
from tests.memory_helpers import is_consolidation, make_consolidator, owner_session, save

BASE = "# Memory\n\n- Ann lives in Porto\n- Ann's cat is Miso\n"
LISBON = "- Ann booked Lisbon for May\n"
REX = "- Ann's dog is Rex\n"
ADD_REX = tool_call(
    "edit_file",
    path="memory/MEMORY.md",
    old_text="- Ann lives in Porto\n",
    new_text="- Ann lives in Porto\n" + REX,
)
# The first model call of a test process imports litellm, which takes seconds on a busy machine.
REPLY_TIMEOUT = 60


@pytest.fixture
def config(tmp_path, agent_config):
    agent_config.memory_window = 6
    agent_config.request_timeout = 60  # consolidations are held on purpose
    config = make_config(tmp_path, agent_config)
    (config.workspace / "memory" / "MEMORY.md").write_text(BASE)
    return config


async def ask(harness: Harness, words: str, chat_id: str = "1") -> str:
    await harness.channel.say(words, chat_id=chat_id)
    return (await harness.channel.next_reply(chat_id, timeout=REPLY_TIMEOUT)).text


def consolidations(fake_llm) -> int:
    return len([r for r in fake_llm.requests if is_consolidation(r)])


def excerpt_of(request) -> str:
    return request["messages"][1]["content"].split("## Conversation excerpt (")[1].split(")")[0]


# -- 1. MEMORY.md rewritten from a stale snapshot ---------------------------------------------


async def test_a_fact_added_while_a_consolidation_is_in_flight_survives_it(
    config, fake_llm, tmp_path
):
    release = asyncio.Event()

    def handler(request):
        if is_consolidation(request):
            # The model's rewrite is built from BASE, the MEMORY.md it was shown.
            return gate(release, save("Ann planned Lisbon.", memory=BASE + LISBON))
        last = request["messages"][-1]
        if last["role"] == "user" and "my dog is Rex" in str(last["content"]):
            return ADD_REX
        return text("noted")

    fake_llm.handler = handler
    memory = config.workspace / "memory" / "MEMORY.md"
    async with Harness(config) as harness:
        for i in range(3):
            assert await ask(harness, f"turn {i}: Lisbon in May") == "noted"
        await wait_until(lambda: consolidations(fake_llm) == 1)
        assert await ask(harness, "remember that my dog is Rex") == "noted"
        assert REX in memory.read_text()  # the turn's edit landed while the model thinks
        release.set()
        assert await harness.runtime.consolidator.drain(30)
    text_now = memory.read_text()
    assert REX in text_now and LISBON in text_now and "Ann's cat is Miso" in text_now
    assert text_now.count("Rex") == 1
    history = (config.workspace / "memory" / "HISTORY.md").read_text()
    assert "Ann planned Lisbon." in history


async def test_two_owner_chats_consolidating_at_once_both_keep_their_facts(config, fake_llm):
    release = asyncio.Event()
    facts = {"test:1": LISBON, "test:2": "- Ann's sister Bea visits in June\n"}

    def handler(request):
        if is_consolidation(request):
            key = excerpt_of(request)
            return gate(release, save(f"Talked in {key}.", memory=BASE + facts[key]))
        return text("noted")

    fake_llm.handler = handler
    async with Harness(config) as harness:
        for chat_id in ("1", "2"):
            for i in range(3):
                assert await ask(harness, f"chat {chat_id} turn {i}", chat_id) == "noted"
        # Both read the same MEMORY.md and are waiting for the model.
        await wait_until(lambda: consolidations(fake_llm) == 2)
        release.set()
        assert await harness.runtime.consolidator.drain(30)
    memory = (config.workspace / "memory" / "MEMORY.md").read_text()
    assert all(fact in memory for fact in facts.values()), memory
    assert "Ann lives in Porto" in memory and "Ann's cat is Miso" in memory


# A second process (a CLI command beside the daemon) changing MEMORY.md the way every writer
# must: under the memory lock from its read to its write.
OTHER_PROCESS = """
import sys
from pathlib import Path
from clawgate.kernel.storage import DiskWriter, locked

memory = Path(sys.argv[1]) / "memory"
with locked(memory / ".lock"):
    text = (memory / "MEMORY.md").read_text()
    print("holding", flush=True)
    sys.stdin.readline()
    new = text.replace("- Ann lives in Porto\\n", "- Ann lives in Porto\\n" + sys.argv[2])
    DiskWriter().replace(memory / "MEMORY.md", new)
print("done", flush=True)
"""


def _waiting_for(lock: Path) -> bool:
    """Whether this process has an flock request on `lock` blocked behind another's."""
    inode = os.stat(lock).st_ino
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields and fields[fields.index("->") + 4] == str(os.getpid()):
            if fields[fields.index("->") + 5].rsplit(":", 1)[-1] == str(inode):
                return True
    return False


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux /proc/locks")
async def test_another_process_writing_memory_during_a_consolidation(
    tmp_path, fake_llm, agent_config, make_client
):
    agent_config.request_timeout = 60
    sessions, session = await owner_session(tmp_path)
    store, consolidator = make_consolidator(tmp_path, sessions, agent_config, make_client)
    store.memory_path.write_text(BASE)
    release = asyncio.Event()
    fake_llm.script(gate(release, save("Ann planned Lisbon.", memory=BASE + LISBON)))
    task = consolidator.maybe_schedule(session)
    assert task is not None
    await fake_llm.wait_for_requests(1, timeout=REPLY_TIMEOUT)  # BASE is the model's snapshot
    other = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        OTHER_PROCESS,
        str(store.dir.parent),
        REX,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert other.stdout is not None and other.stdin is not None
        async with asyncio.timeout(30):
            assert (await other.stdout.readline()).strip() == b"holding"
        # The model answers; the consolidation now waits for the other process's lock
        # instead of writing between that process's read and its write.
        release.set()
        await wait_until(lambda: _waiting_for(store.dir / ".lock"))
        assert not task.done()
        other.stdin.write(b"go\n")
        await other.stdin.drain()
        async with asyncio.timeout(30):
            assert (await other.stdout.readline()).strip() == b"done"
            assert await other.wait() == 0
    finally:
        if other.returncode is None:
            other.kill()
            await other.wait()
    assert (await task).ok
    memory = store.read_memory()
    assert REX in memory and LISBON in memory and "Ann's cat is Miso" in memory
    assert session.last_consolidated == 7


# -- 2. A daily log rewritten from a stale read ------------------------------------------------


def _in_flush(request) -> bool:
    return any(
        m["role"] == "user" and "about to be compacted" in str(m["content"])
        for m in request["messages"]
    )


async def test_flush_write_file_over_a_changed_log_fails_and_append_keeps_both(
    tmp_path, fake_llm, agent_config
):
    agent_config.context_window_tokens = 4000
    agent_config.max_tokens = 500
    agent_config.memory_window = 500
    agent_config.request_timeout = 60
    config = make_config(tmp_path, agent_config)
    harness = Harness(config)
    day = harness.runtime.memory.now().date().isoformat()
    log = config.workspace / "memory" / f"{day}.md"
    log.write_text("- 08:00 Ann asked about trains\n")
    tool_results: list[str] = []

    async def handler(request):
        if is_consolidation(request):
            return save("Ann booked the Lisbon flights.")
        if not _in_flush(request):
            return text("the answer")
        last = request["messages"][-1]
        if last["role"] == "user":
            return tool_call("read_file", path=f"memory/{day}.md")
        tool_results.append(last["content"])
        if len(tool_results) == 1:
            # Between the model's read and its write, another chat's consolidation lands.
            other = await harness.runtime.sessions.get("test:2")
            outcome = await harness.runtime.consolidator.consolidate(other, archive_all=True)
            assert outcome.ok
            return tool_call(
                "write_file", path=f"memory/{day}.md", content=last["content"] + "- flushed fact\n"
            )
        if len(tool_results) == 2:
            return tool_call("append_file", path=f"memory/{day}.md", content="- flushed fact")
        return text("NO_REPLY")

    fake_llm.handler = handler
    async with harness:
        sessions = harness.runtime.sessions
        other = await sessions.get("test:2")
        sessions.append(other, State(trust=Trust.OWNER.value))
        for i in range(4):
            sessions.append(
                other, Message(role="user" if i % 2 == 0 else "assistant", content=f"Lisbon {i}")
            )
        session = await sessions.get("test:1")
        sessions.append(session, State(trust=Trust.OWNER.value))
        for i in range(16):
            role = "user" if i % 2 == 0 else "assistant"
            sessions.append(session, Message(role=role, content=f"old {i} " + "lorem ipsum " * 66))
        # Place the window so the next request sits past the soft threshold, under the limit.
        used = int((await ask(harness, "/context")).split("~")[1].split()[0].replace(",", ""))
        guard = harness.runtime.loop.guard
        guard.limit, guard.soft_limit = used + 400, used - 200
        assert await ask(harness, "what now?") == "the answer"
    assert len(tool_results) == 3
    assert tool_results[1] == f"Error: memory/{day}.md changed since you read it; read it again"
    assert tool_results[2].startswith(f"Appended 15 bytes to memory/{day}.md")
    lines = log.read_text().splitlines()
    assert lines[0] == "- 08:00 Ann asked about trains"
    assert any("(test:2) Ann booked the Lisbon flights." in line for line in lines)
    assert lines[-1] == "- flushed fact" and len(lines) == 3


# -- The file tools' compare-and-swap ---------------------------------------------------------


async def test_write_file_is_a_compare_and_swap_against_the_turns_read(config, fake_llm):
    notes = config.workspace / "notes.md"
    notes.write_text("v1\n")
    memory = config.workspace / "memory" / "MEMORY.md"
    replies = [
        tool_call("write_file", path="memory/MEMORY.md", content="# Memory\n"),  # never read
        tool_call("read_file", path="notes.md"),
        tool_call("write_file", path="notes.md", content="v2\n"),
        tool_call("write_file", path="notes.md", content="v3\n"),  # its own write is known
        tool_call("write_file", path="notes.md", content="v4\n"),  # someone else's came first
        text("done"),
    ]
    results: list[str] = []

    def handler(request):
        last = request["messages"][-1]
        if last["role"] == "tool":
            results.append(last["content"])
        if len(results) == 4:
            notes.write_text("someone else's v3b\n")
        return replies[len(results)]

    fake_llm.handler = handler
    async with Harness(config) as harness:
        assert await ask(harness, "tidy up") == "done"
    assert results[0].startswith("Error: memory/MEMORY.md is a memory file that already has")
    assert memory.read_text() == BASE
    assert results[2:4] == ["Wrote 3 bytes to notes.md", "Wrote 3 bytes to notes.md"]
    assert results[4] == "Error: notes.md changed since you read it; read it again"
    assert notes.read_text() == "someone else's v3b\n"


# -- The three-way merge ----------------------------------------------------------------------


def test_merge_keeps_lines_added_on_both_sides():
    ours = BASE + LISBON
    theirs = BASE.replace("- Ann lives in Porto\n", "- Ann lives in Porto\n" + REX)
    assert merge_lines(BASE, ours, theirs) == (
        "# Memory\n\n- Ann lives in Porto\n" + REX + "- Ann's cat is Miso\n" + LISBON
    )


def test_merge_a_line_removed_on_one_side_is_removed():
    without_cat = BASE.replace("- Ann's cat is Miso\n", "")
    assert merge_lines(BASE, without_cat, BASE + REX) == without_cat + REX
    assert merge_lines(BASE, BASE + LISBON, without_cat) == without_cat + LISBON


def test_merge_never_drops_a_line_reworded_after_the_snapshot():
    moved = BASE.replace("- Ann lives in Porto\n", "")  # the model removed it (listed)
    reworded = BASE.replace("Porto", "Lisbon since May")  # the owner corrected it meanwhile
    merged = merge_lines(BASE, moved, reworded)
    assert "- Ann lives in Lisbon since May\n" in merged and "Porto" not in merged
    assert "- Ann's cat is Miso\n" in merged


def test_merge_writes_a_fact_both_sides_added_once():
    theirs = BASE + "* ann's dog is  Rex\n"
    merged = merge_lines(BASE, BASE + REX + LISBON, theirs)
    assert merged == BASE + REX + LISBON


def test_merge_keeps_an_appended_line_when_the_model_reorganised_the_file():
    reorganised = "# Memory\n\n## Pets\n- Ann's cat is Miso\n\n## Places\n- Ann lives in Porto\n"
    merged = merge_lines(BASE, reorganised, BASE + REX)
    assert merged == reorganised + REX
    assert merged.count("Miso") == 1 and merged.count("Porto") == 1


def test_merge_trivial_cases():
    assert merge_lines(BASE, BASE, BASE + REX) == BASE + REX  # the model changed nothing
    assert merge_lines(BASE, BASE + REX, BASE) == BASE + REX  # nobody else did
    assert merge_lines("", LISBON, REX) == LISBON + REX  # both started a new file
    assert merge_lines(BASE, "", BASE) == ""  # everything removed, nothing added meanwhile


def test_the_memory_lock_covers_the_memory_folder(tmp_path):
    first = MemoryLock(tmp_path, DiskWriter())
    assert first.covers((tmp_path / "memory" / "2026-12-03.md").resolve())
    assert not first.covers((tmp_path / "notes.md").resolve())


async def test_a_log_rewritten_without_its_last_newline_still_gets_whole_lines(tmp_path):
    workspace = (tmp_path / "workspace").resolve()
    disk = DiskWriter()  # one disk for the store and the tools, as in the runtime
    store = MemoryStore(workspace, writer=disk)
    store.append_daily("- 08:00 first")
    log = store.daily_path(store.now().date())
    ctx = ToolContext(workspace, Trust.OWNER, "test:1", ToolsConfig(), (), disk, store.lock)
    tools = ToolRegistry(default_tools())
    shown = f"memory/{log.name}"
    assert "first" in await tools.execute("read_file", json.dumps({"path": shown}), ctx)
    content = "- 08:00 first\n- 09:00 second"  # the model left off the last newline
    result = await tools.execute("write_file", json.dumps({"path": shown, "content": content}), ctx)
    assert result.startswith("Wrote")
    store.append_daily("- 10:00 third")
    result = await tools.execute(
        "append_file", json.dumps({"path": shown, "content": "- 11:00 fourth"}), ctx
    )
    assert result == f"Appended 15 bytes to {shown}"
    assert log.read_text().splitlines() == [
        "- 08:00 first",
        "- 09:00 second",
        "- 10:00 third",
        "- 11:00 fourth",
    ]
    # Its own append does not make it current: the 10:00 line came from elsewhere, unseen.
    result = await tools.execute("write_file", json.dumps({"path": shown, "content": "x\n"}), ctx)
    assert result == f"Error: {shown} changed since you read it; read it again"
