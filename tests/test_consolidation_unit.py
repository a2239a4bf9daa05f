"""Issue 11, case 3: consolidation and the /new archive are one unit of work.

The process is killed at every write boundary of a consolidation and of a `/new` archive in
turn (a DiskWriter that dies at its Nth write; once through a real SIGKILL of an agent
process), then restarted as the gateway restarts: no HISTORY.md entry or day's-log line is
written twice, every message is accounted for, MEMORY.md keeps the fact, and `memory audit`
is clean. Then the audit's findings, one by one.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from datetime import datetime
from pathlib import Path

from typer.testing import CliRunner

from clawgate.agent.memory.audit import audit_sessions
from clawgate.agent.memory.entries import Span, history_entry, parse_entries
from clawgate.agent.memory.store import MemoryStore
from clawgate.agent.runtime import AgentRuntime
from clawgate.agent.session import (
    Archived,
    Consolidation,
    Message,
    SessionStore,
    load_session,
    read_key,
)
from clawgate.gateway.cli import app
from clawgate.gateway.cli.memory import split_entries
from clawgate.gateway.setup.onboard import onboard
from clawgate.kernel.config import AgentConfig, Config
from tests.dying_agent import (
    FACT,
    KEY,
    DyingDisk,
    Killed,
    answer,
    archive_run,
    prepare,
)
from tests.fakes.llm import FakeLLM
from tests.harness import make_config
from tests.process import child_env, fake_model, run_clawgate, write_config

ROOT = Path(__file__).resolve().parents[1]


def transcripts(config: Config) -> list[Path]:
    sessions = config.workspace / "sessions"
    return [*sessions.glob("*.jsonl"), *sessions.glob("archive/*.jsonl")]


def records(config: Config) -> list[Consolidation]:
    found = []
    for path in transcripts(config):
        found.extend(load_session(path, read_key(path) or path.stem).records_of(Consolidation))
    return found


def assert_one_unit(config: Config, where: str) -> None:
    """No entry twice, nothing unaccounted, the fact kept, the audit clean."""
    memory = config.workspace / "memory"
    history = (memory / "HISTORY.md").read_text(encoding="utf-8")
    entries = split_entries(history)
    daily = [
        line
        for path in memory.glob("[0-9]*-[0-9]*-[0-9]*.md")
        for line in path.read_text(encoding="utf-8").splitlines()
        if f"({KEY})" in line
    ]
    found = records(config)
    assert len(entries) == len(found) >= 1, (where, entries, found)
    assert len(daily) == len(entries), (where, daily)
    assert FACT.strip() in (memory / "MEMORY.md").read_text(encoding="utf-8"), where
    report = audit_sessions(config.workspace / "sessions")
    assert report.ok, (where, report.problems)
    assert report.pending_archive == 0, where


def fresh(tmp_path: Path, name: str, agent_config: AgentConfig) -> Config:
    home = tmp_path / name
    home.mkdir()
    agent_config.memory_window = 6
    agent_config.max_retries = 0
    return make_config(home, agent_config)


# -- a consolidation ----------------------------------------------------------------------


async def consolidation_run(config: Config, disk: DyingDisk) -> None:
    """The runtime starts; armed, a consolidation of `test:1` runs (killed somewhere)."""
    runtime = AgentRuntime.build(config, writer=disk)
    try:
        await runtime.start()
        session = await runtime.sessions.get(KEY)
        disk.armed = True
        runtime.consolidator.maybe_schedule(session)
        await runtime.consolidator.drain(60)
    finally:
        await runtime.close()


async def restart_and_retry(config: Config) -> None:
    """As the gateway restarts: start, then two more messages, whose turn schedules the next
    consolidation (over a range that no longer matches the one cut off)."""
    runtime = AgentRuntime.build(config)
    try:
        await runtime.start()
        session = await runtime.sessions.get(KEY)
        runtime.sessions.append(session, Message(role="user", content="and one more"))
        runtime.sessions.append(session, Message(role="assistant", content="noted"))
        runtime.consolidator.maybe_schedule(session)
        assert await runtime.consolidator.drain(60)
    finally:
        await runtime.close()


async def test_a_kill_at_every_write_of_a_consolidation_leaves_one_entry_per_record(
    tmp_path: Path, fake_llm: FakeLLM, agent_config: AgentConfig
) -> None:
    fake_llm.handler = answer
    dry = fresh(tmp_path, "dry", agent_config)
    await prepare(dry)
    counting = DyingDisk()
    await consolidation_run(dry, counting)
    writes = counting.writes
    assert ("write", "HISTORY.md") in writes and ("write", "MEMORY.md") in writes
    for at in range(1, len(writes) + 1):
        config = fresh(tmp_path, f"kill{at}", agent_config)
        await prepare(config)
        await consolidation_run(config, DyingDisk(at))
        await restart_and_retry(config)
        assert_one_unit(config, f"killed at write {at} of {len(writes)}: {writes[at - 1]}")


async def test_the_entry_and_its_log_line_are_durable_before_the_record(
    tmp_path: Path, fake_llm: FakeLLM, agent_config: AgentConfig
) -> None:
    fake_llm.handler = answer
    config = fresh(tmp_path, "order", agent_config)
    await prepare(config)
    disk = DyingDisk()
    await consolidation_run(config, disk)
    writes = disk.writes
    record = writes.index(("write", "test_1.jsonl"))
    day = next(name for kind, name in writes if name[:2] == "20" and name.endswith(".md"))
    assert writes.index(("write", "MEMORY.md")) < writes.index(("write", "HISTORY.md"))
    assert writes.index(("fsync", "HISTORY.md")) < record
    assert writes.index(("fsync", day)) < record
    assert writes[record + 1] == ("fsync", "test_1.jsonl")


# -- a /new archive ------------------------------------------------------------------------


async def test_a_kill_at_every_write_of_a_new_archive_leaves_one_entry_per_record(
    tmp_path: Path, fake_llm: FakeLLM, agent_config: AgentConfig
) -> None:
    fake_llm.handler = answer
    dry = fresh(tmp_path, "dry", agent_config)
    await prepare(dry)
    counting = DyingDisk()
    await archive_run(dry, counting)
    writes = counting.writes
    assert ("write", "HISTORY.md") in writes
    for at in range(1, len(writes) + 1):
        config = fresh(tmp_path, f"kill{at}", agent_config)
        await prepare(config)
        with contextlib.suppress(Killed):
            await archive_run(config, DyingDisk(at))
        await archive_run(config, DyingDisk())  # restarted; the channel re-delivers /new
        where = f"killed at write {at} of {len(writes)}: {writes[at - 1]}"
        assert_one_unit(config, where)
        # A kill before /new's own record lets the re-delivered /new archive again: only the
        # fresh, empty transcript, which has nothing to consolidate.
        archived = [
            load_session(path, KEY)
            for path in (config.workspace / "sessions" / "archive").glob("*.jsonl")
        ]
        assert [len(t.messages) for t in archived if t.messages] == [10], where
        assert all(any(True for _ in t.records_of(Archived)) for t in archived), where
        notes = list((config.workspace / "memory").glob("*-ann-planned-*.md"))
        assert len(notes) <= 1, (where, notes)


async def test_sigkill_of_an_agent_process_between_entry_and_record(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """A real kill -9 of an agent process right after HISTORY.md and the day's log were
    written, before the archive's consolidation record; the audit (the real CLI) sees it;
    a restart records the entry and writes nothing twice."""
    fake_llm.handler = answer
    home = tmp_path / "home"
    home.mkdir()
    config_path = write_config(home, agent={**fake_model(fake_llm), "memory_window": 6})
    onboard(home / "onboard.toml", workspace=home / "workspace")
    config = Config(workspace=home / "workspace", data_dir=home / "data")
    await prepare(config)
    # Where the record is: count the archive's writes in this process first.
    dry = Config(workspace=tmp_path / "dry" / "workspace", data_dir=tmp_path / "dry" / "data")
    await prepare(dry)
    counting = DyingDisk()
    await archive_run(dry.model_copy(update={"agent": load_agent(config_path)}), counting)
    history = counting.writes.index(("write", "HISTORY.md"))
    record = next(
        i + 1
        for i, (kind, name) in enumerate(counting.writes)
        if i > history and kind == "write" and name.endswith(".jsonl")
    )

    code = await child(home, config_path, record)
    assert code == -9  # SIGKILL
    history_text = (config.workspace / "memory" / "HISTORY.md").read_text(encoding="utf-8")
    [entry] = parse_entries(history_text)
    assert entry.span == Span(KEY, 1, 10)
    assert records(config) == []
    code, _ = await run_clawgate(home, "--config", str(config_path), "memory", "audit")
    assert code == 1  # the entry has no record yet

    assert await child(home, config_path, 0) == 0  # the restart
    assert_one_unit(config, "after a real SIGKILL")
    code, stderr = await run_clawgate(home, "--config", str(config_path), "memory", "audit")
    assert code == 0, stderr


def load_agent(config_path: Path) -> AgentConfig:
    from clawgate.kernel.config import load_config

    return load_config(config_path).agent


async def child(home: Path, config_path: Path, at: int) -> int:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.dying_agent",
        str(config_path),
        str(at),
        cwd=ROOT,
        env=child_env(home),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    assert b"Traceback" not in stderr, stderr.decode(errors="replace")
    return process.returncode


# -- the audit, both ways ------------------------------------------------------------------


async def audited(tmp_path: Path, ranges: list[tuple[int, int, str]], history: list[Span | str]):
    """A 10-message session `test:1` with consolidation records for `ranges` and HISTORY.md
    entries (a Span: a marked entry; a str: an entry as a person or an older version wrote)."""
    config = Config(workspace=tmp_path / "workspace", data_dir=tmp_path / "data")
    await prepare(config)
    sessions = SessionStore(config.workspace / "sessions")
    session = await sessions.get(KEY)
    for first, last, mode in ranges:
        sessions.append(session, Consolidation(from_seq=first, to_seq=last, mode=mode))
    store = MemoryStore(config.workspace)
    for item in history:
        if isinstance(item, Span):
            store.append_history(f"Messages {item.first}-{item.last}.", item.key, span=item)
        else:
            with store.history_path.open("a", encoding="utf-8") as handle:
                handle.write(item)
    return config, audit_sessions(config.workspace / "sessions")


def again(first: int, last: int) -> str:
    """A second entry for a range, as a retry without the range check wrote it."""
    return history_entry("Again.", KEY, datetime(2026, 12, 3, 9, 30), Span(KEY, first, last))


async def test_audit_is_clean_when_each_record_has_its_one_entry(tmp_path: Path) -> None:
    _, report = await audited(
        tmp_path,
        [(1, 4, "llm"), (5, 7, "raw"), (8, 9, "trimmed")],  # trimmed: a cron run, no entry
        [Span(KEY, 1, 4), Span(KEY, 5, 7)],
    )
    assert report.ok, report.problems
    assert (report.records, report.entries, report.unmarked) == (2, 2, 0)


async def test_audit_finds_a_record_without_an_entry(tmp_path: Path) -> None:
    _, report = await audited(tmp_path, [(1, 4, "llm"), (5, 7, "llm")], [Span(KEY, 1, 4)])
    assert report.problems == [
        "sessions/test_1.jsonl: consolidation test:1 #5-7 has no HISTORY.md entry"
    ]


async def test_audit_finds_an_entry_without_a_record(tmp_path: Path) -> None:
    _, report = await audited(tmp_path, [(1, 4, "llm")], [Span(KEY, 1, 4), Span(KEY, 5, 7)])
    assert report.problems == [
        "memory/HISTORY.md:3: entry test:1 #5-7 has no consolidation or archive record"
    ]


async def test_audit_finds_a_range_written_twice(tmp_path: Path) -> None:
    _, report = await audited(tmp_path, [(1, 4, "llm")], [Span(KEY, 1, 4), again(1, 4)])
    assert report.problems[0] == (
        "sessions/test_1.jsonl: consolidation test:1 #1-4 has 2 HISTORY.md entries (lines 1, 3)"
    )


async def test_audit_finds_overlapping_entries(tmp_path: Path) -> None:
    _, report = await audited(tmp_path, [(1, 4, "llm")], [Span(KEY, 1, 4), Span(KEY, 3, 6)])
    assert "memory/HISTORY.md:3: entry test:1 #3-6 overlaps test:1 #1-4 (line 1)" in (
        report.problems
    )


async def test_audit_finds_a_range_twice_in_a_days_log(tmp_path: Path) -> None:
    config, report = await audited(tmp_path, [(1, 4, "llm")], [Span(KEY, 1, 4)])
    assert report.ok
    [log] = (config.workspace / "memory").glob("20*.md")
    log.write_text(log.read_text() * 2)
    report = audit_sessions(config.workspace / "sessions")
    assert report.problems == [f"memory/{log.name}: range test:1 #1-4 has 2 lines"]


async def test_audit_pairs_older_unmarked_entries_by_key_and_skips_pruned_transcripts(
    tmp_path: Path,
) -> None:
    """Entries from before the markers count for their key's records; an entry whose
    transcript retention removed (seqs before the oldest kept one) is no finding."""
    config, report = await audited(
        tmp_path,
        [(1, 4, "llm")],
        ["[2026-01-02 10:00] (test:1) Written before the markers.\n\n"],
    )
    assert report.ok and report.unmarked == 1
    store = MemoryStore(config.workspace)
    store.append_history("Gone.", "test:9", span=Span("test:9", 1, 3))  # no transcript left
    report = audit_sessions(config.workspace / "sessions")
    assert report.ok and report.retired == 1, report.problems


def test_a_marker_survives_odd_keys_and_hand_edits() -> None:
    span = Span("cli:my notes <draft>", 41, 80)
    assert span.marker == "<!-- cli:my%20notes%20%3Cdraft%3E #41-80 -->"
    history = f"# My history\n\n[2026-12-03 09:30] (cli:x) Edited by hand. {span.marker}\n\n"
    [entry] = parse_entries(history)
    assert (entry.line, entry.span, entry.text) == (3, span, "Edited by hand.")


async def test_the_audit_command_prints_each_finding_and_exits_1(tmp_path: Path) -> None:
    config, _ = await audited(tmp_path, [(1, 4, "llm")], [Span(KEY, 1, 4), again(1, 4)])
    config_path = tmp_path / "config.toml"
    onboard(config_path, workspace=config.workspace)
    result = CliRunner().invoke(app, ["--config", str(config_path), "memory", "audit"])
    assert result.exit_code == 1
    assert "1 consolidation records, 2 HISTORY.md entries" in result.output
    assert "PROBLEM sessions/test_1.jsonl: consolidation test:1 #1-4 has 2 HISTORY.md" in (
        result.output
    )
