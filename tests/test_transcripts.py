"""Issue 29: search across past conversations (agent/memory/transcripts.py): incremental
indexing by byte offset, the archive move, results naming conversation, time and speaker,
the trust rules, the memory_search tool, batch, CLI and auto-recall options, and a
transcript of 100,000 messages growing by one (only its bytes are read)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from typer.testing import CliRunner

from clawgate.agent.memory.batch import run_batch
from clawgate.agent.memory.index import MemoryIndex
from clawgate.agent.memory.lock import MemoryLock
from clawgate.agent.memory.recall import recall_part
from clawgate.agent.memory.search import MemorySearch
from clawgate.agent.memory.transcripts import TranscriptIndex
from clawgate.agent.session import Message, SessionStore, State
from clawgate.agent.tools.base import ToolContext
from clawgate.agent.tools.memory_tools import memory_tools
from clawgate.agent.tools.registry import ToolRegistry
from clawgate.gateway.cli import app
from clawgate.gateway.setup.onboard import onboard
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import MemoryConfig, MemorySearchConfig, ToolsConfig
from clawgate.kernel.storage import DiskWriter

GROUP = "telegram:-100700"
PRIVATE = "telegram:1001"


async def _conversations(workspace: Path) -> SessionStore:
    """A group where Maya names her dentist, and the owner's private chat."""
    sessions = SessionStore(workspace / "sessions")
    group = await sessions.get(GROUP)
    sessions.append(group, State(trust=Trust.GROUP.value))
    for text in ("[Tom] long day at work", "[Maya] I switched dentists, Dr Haddad now"):
        sessions.append(group, Message(role="user", content=text))
    sessions.append(group, Message(role="assistant", content="Noted, Dr Haddad it is."))
    private = await sessions.get(PRIVATE)
    sessions.append(private, State(trust=Trust.OWNER.value))
    sessions.append(private, Message(role="user", content="remind me about the Lisbon trip"))
    await sessions.flush()
    return sessions


async def test_indexing_reads_only_what_was_appended(tmp_path):
    workspace = tmp_path / "ws"
    sessions = await _conversations(workspace)
    index = TranscriptIndex.for_workspace(workspace, tmp_path / "data")
    try:
        first = await index.refresh()
        assert (first.files, first.messages_added) == (2, 4)
        group_file = workspace / "sessions" / "telegram_-100700.jsonl"
        before = group_file.stat().st_size
        group = await sessions.get(GROUP)
        sessions.append(group, Message(role="user", content="[Ann] the ferry to Skye is booked"))
        await sessions.flush()
        # A line still being written (no newline yet) waits for its end.
        with group_file.open("ab") as handle:
            handle.write(b'{"seq": 99, "role": "user", "content": "[Ann] torn')
        more = await index.refresh()
        grown = group_file.stat().st_size
        assert more.messages_added == 1
        assert more.bytes_read < grown - before  # the torn tail is not consumed
        assert (await index.refresh()).bytes_read == 0
        with group_file.open("ab") as handle:
            handle.write(b' line"}\n')
        assert (await index.refresh()).messages_added == 1

        hits = await index.search("ferry Skye", Trust.OWNER)
        assert [(h.session, h.speaker) for h in hits][:1] == [(GROUP, "Ann")]
        assert hits[0].timestamp.startswith("20") and hits[0].seq > 0
        (dentist,) = [
            h for h in await index.search("Maya dentist", Trust.OWNER) if h.speaker == "Maya"
        ]
        assert "Dr Haddad" in dentist.snippet and dentist.session == GROUP

        # /new moves the transcript to the archive: found there, not read again (what is
        # read is the fresh transcript that took its name: its header and state).
        archived = await sessions.archive(await sessions.get(GROUP))
        assert archived is not None
        moved = await index.refresh()
        assert moved.bytes_read == group_file.stat().st_size < archived.stat().st_size
        assert moved.messages_added == 0
        hits = await index.search("Maya dentist", Trust.OWNER)
        assert hits[0].path == f"sessions/archive/{archived.name}" and hits[0].speaker == "Maya"

        # A transcript replaced by a shorter file is read again from its start.
        private = workspace / "sessions" / "telegram_1001.jsonl"
        private.write_text(
            json.dumps({"type": "session", "key": PRIVATE})
            + "\n"
            + json.dumps({"seq": 1, "role": "user", "content": "Porto", "timestamp": "x"})
            + "\n"
        )
        await index.refresh()
        assert await index.search("Lisbon trip", Trust.OWNER) == []
        assert (await index.search("Porto", Trust.OWNER))[0].session == PRIVATE
    finally:
        await index.close()


async def test_only_the_owner_searches_transcripts(tmp_path):
    workspace = (tmp_path / "ws").resolve()
    await _conversations(workspace)
    (workspace / "memory").mkdir()
    search = MemorySearch(
        MemoryIndex.for_workspace(workspace, tmp_path / "data", None),
        MemorySearchConfig(),
        transcripts=TranscriptIndex.for_workspace(workspace, tmp_path / "data"),
    )
    registry = ToolRegistry(memory_tools(search))
    disk = DiskWriter()
    call = json.dumps({"query": "Maya dentist", "sessions": True})
    try:
        assert search.transcripts is not None
        # A member of the group, or another chat, never reaches a transcript: not the
        # group's own, not another chat's.
        for trust in (Trust.GROUP, Trust.ALLOWED):
            assert await search.transcripts.search("Maya dentist", trust) == []
            ctx = ToolContext(
                workspace, trust, GROUP, ToolsConfig(), (), disk, MemoryLock(workspace, disk)
            )
            assert (await registry.execute("memory_search", call, ctx)).startswith(
                "Error: unknown tool"
            )
        owner = ToolContext(
            workspace, Trust.OWNER, PRIVATE, ToolsConfig(), (), disk, MemoryLock(workspace, disk)
        )
        found = await registry.execute("memory_search", call, owner)
        assert "Past conversations:" in found
        assert f"- {GROUP}, " in found and ", Maya (score" in found and "Dr Haddad" in found
        # Without `sessions` the tool searches memory files only.
        plain = await registry.execute("memory_search", '{"query": "Maya dentist"}', owner)
        assert "Dr Haddad" not in plain

        # Auto-recall leaves transcripts out unless memory.recall_sessions is on.
        default = recall_part(search, MemoryConfig())
        assert await default(Trust.OWNER, "Maya dentist Haddad") is None
        part = recall_part(search, MemoryConfig(recall_sessions=True))
        recalled = await part(Trust.OWNER, "Maya dentist Haddad")
        assert recalled is not None and f"[{GROUP} " in recalled.text and "Maya]" in recalled.text
        assert await part(Trust.GROUP, "Maya dentist Haddad") is None

        # The batch interface: unchanged without "sessions", transcript hits with it.
        out = io.StringIO()
        lines = [
            json.dumps({"q": "Maya dentist"}),
            json.dumps({"q": "Maya dentist", "sessions": True}),
            json.dumps({"q": "Maya dentist", "sessions": "yes"}),
        ]
        assert await run_batch(search, lines, out) == 1
        plain_line, with_sessions, bad = (json.loads(x) for x in out.getvalue().splitlines())
        assert plain_line == []
        assert with_sessions[0]["session"] == GROUP and with_sessions[0]["speaker"] == "Maya"
        assert set(with_sessions[0]) == {
            "session",
            "timestamp",
            "speaker",
            "seq",
            "path",
            "score",
            "snippet",
        }
        assert "error" in bad
    finally:
        await search.close()


def test_cli_memory_search_sessions(tmp_path):
    config_path = tmp_path / "config.toml"
    workspace = tmp_path / "ws"
    onboard(config_path, workspace=workspace)
    import asyncio

    asyncio.run(_conversations(workspace))
    runner = CliRunner()
    base = ["--config", str(config_path), "memory", "search", "Maya dentist"]
    plain = runner.invoke(app, [*base, "--json"])
    assert plain.exit_code == 0, plain.output
    assert not any("session" in hit for hit in json.loads(plain.stdout))
    found = runner.invoke(app, [*base, "--json", "--sessions"])
    assert found.exit_code == 0, found.output
    said = [hit for hit in json.loads(found.stdout) if "session" in hit]
    assert said[0]["session"] == GROUP and said[0]["speaker"] == "Maya"
    table = runner.invoke(app, [*base, "--sessions"])
    assert table.exit_code == 0 and GROUP in table.stdout and "Maya" in table.stdout


async def test_a_transcript_of_100000_messages_grows_without_being_read_again(tmp_path):
    sessions = tmp_path / "ws" / "sessions"
    sessions.mkdir(parents=True)
    path = sessions / "telegram_-100700.jsonl"
    lines = [json.dumps({"type": "session", "key": GROUP})]
    for seq in range(1, 100_001):
        content = f"[Tom] weekly budget review number {seq}" if seq % 2 else f"Noted {seq}."
        role = "user" if seq % 2 else "assistant"
        lines.append(json.dumps({"seq": seq, "role": role, "content": content, "timestamp": "t"}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    index = TranscriptIndex.for_workspace(tmp_path / "ws", tmp_path / "data")
    try:
        assert (await index.refresh()).messages_added == 100_000
        appended = (
            json.dumps(
                {
                    "seq": 100_001,
                    "role": "user",
                    "content": "[Maya] the kayak is in Oban",
                    "timestamp": "t",
                }
            )
            + "\n"
        )
        with path.open("a", encoding="utf-8") as handle:
            handle.write(appended)
        grown = await index.refresh()
        assert (grown.bytes_read, grown.messages_added) == (len(appended.encode()), 1)
        (hit,) = await index.search("kayak Oban", Trust.OWNER, 1)
        assert (hit.session, hit.speaker, hit.seq) == (GROUP, "Maya", 100_001)
        assert len(await index.search("budget review", Trust.OWNER, 6)) == 6
    finally:
        await index.close()
