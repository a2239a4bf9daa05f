"""A disk that fills part-way through a write: write(2) returns a short count, the next one
ENOSPC. Sessions, the Telegram journal and its compaction must neither keep nor answer a
record whose line is a fragment, never glue the next record onto one, and lose nothing
that was acknowledged - first through the DiskWriter's `_write` seam, then on a real tmpfs
of 64 KiB filled to the brim (where the test runner may mount one).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clawgate.agent.session import Message, SessionStore, load_session, session_filename
from clawgate.channels.telegram.journal import InboundJournal
from clawgate.kernel.bus import InboundMessage, OutboundMessage, Trust
from clawgate.kernel.config import Config
from clawgate.kernel.storage import DiskWriter
from tests.fakes.llm import FakeLLM, Reply, text
from tests.harness import Harness, make_config


class FillingDisk(DiskWriter):
    """Writes under `paths` go down `step` bytes at a time until `room` bytes are used, then
    fail with ENOSPC. `lose_newline=True`: every write there stops one byte short of its end
    (the record whole but for its newline) before the ENOSPC."""

    def __init__(self) -> None:
        super().__init__()
        self.paths: list[Path] = []
        self.room = 0
        self.step = 1
        self.lose_newline = False
        self.short_writes = 0
        self.seen: list[Path] = []
        self._fds: dict[int, Path] = {}

    def fill(self, *paths: Path, room: int = 0, step: int = 7, lose_newline: bool = False) -> None:
        self.paths, self.room, self.step, self.lose_newline = list(paths), room, step, lose_newline

    def clear(self) -> None:
        self.paths = []

    def append(self, path: Path, data: str | bytes, *, mode: int = 0o600) -> None:
        self.seen.append(path)
        self._current = path
        super().append(path, data, mode=mode)

    def _write(self, fd: int, data: memoryview) -> int:
        if not any(self._current == p or self._current.is_relative_to(p) for p in self.paths):
            return super()._write(fd, data)
        if self.lose_newline:
            if len(data) <= 1:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            self.short_writes += 1
            return os.write(fd, data[:-1])
        if self.room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        count = min(len(data), self.step, self.room)
        self.room -= count
        self.short_writes += count < len(data)
        return os.write(fd, data[:count])


def whole_lines(path: Path) -> list[dict[str, Any]]:
    """Every line of a JSONL file, parsed: a torn or glued line fails the test."""
    raw = path.read_bytes()
    assert raw.endswith(b"\n"), f"{path.name} ends mid-line"
    return [json.loads(line) for line in raw.split(b"\n")[:-1]]


def last_user(body: dict[str, Any]) -> str:
    return [m for m in body["messages"] if m.get("role") == "user"][-1]["content"]


def echo(body: dict[str, Any]) -> Reply:
    return text(f"re: {last_user(body)}")


async def ask(gw: Harness, said: str) -> OutboundMessage:
    # Generous: the first model call imports litellm, which takes seconds on a busy machine.
    await gw.channel.say(said)
    return await gw.channel.next_reply("1", timeout=90)


def session_path(config: Config, key: str) -> Path:
    return config.workspace / "sessions" / f"{session_filename(key)}.jsonl"


def inbound(update_id: int) -> InboundMessage:
    return InboundMessage(
        channel="telegram",
        chat_id="1001",
        message_id=f"{update_id}:{update_id}",
        sender_id="1001",
        sender_name="Ann",
        text=f"message {update_id}",
        trust=Trust.OWNER,
    )


# -- sessions ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "lose_newline", [False, True], ids=["short-then-ENOSPC", "all-but-newline"]
)
async def test_a_session_line_the_disk_cut_short_is_neither_kept_nor_answered(
    tmp_path: Path, fake_llm: FakeLLM, agent_config: Any, lose_newline: bool
) -> None:
    fake_llm.handler = echo
    writer = FillingDisk()
    config = make_config(tmp_path, agent_config)
    path = session_path(config, "test:1")
    async with Harness(config, writer=writer) as gw:
        assert (await ask(gw, "before")).text == "re: before"
        writer.fill(path, room=30, step=7, lose_newline=lose_newline)
        refused = await ask(gw, "during")
        assert writer.short_writes
        session = await gw.runtime.sessions.get("test:1")
        assert "during" not in [m.content for m in session.messages]
        writer.clear()
        assert (await ask(gw, "after")).text == "re: after"

    assert refused.is_error and refused.text.startswith("I can't save messages right now")
    assert "during" not in [last_user(b) for b in fake_llm.requests]

    # A restart reads the file afresh: nothing lost, nothing glued, no ghost of "during".
    assert all("during" not in json.dumps(line) for line in whole_lines(path))
    reloaded = load_session(path, "test:1")
    assert [(m.role, m.content) for m in reloaded.messages] == [
        ("user", "before"),
        ("assistant", "re: before"),
        ("user", "after"),
        ("assistant", "re: after"),
    ]
    assert [m.seq for m in reloaded.messages] == [1, 2, 3, 4]
    async with Harness(config) as gw:
        assert (await ask(gw, "and now?")).text == "re: and now?"
    history = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] == "user"]
    assert history == ["before", "after", "and now?"]


async def test_a_session_header_the_disk_refused_is_written_again(tmp_path: Path) -> None:
    writer = FillingDisk()
    store = SessionStore(tmp_path / "sessions", writer=writer)
    session = await store.get("test:1")
    writer.fill(store.path_for("test:1"), room=10)
    with pytest.raises(OSError):
        store.append(session, Message(role="user", content="first"))
    writer.clear()
    store.append(session, Message(role="user", content="second"))

    header, message = whole_lines(store.path_for("test:1"))
    assert (header["type"], header["key"]) == ("session", "test:1")
    assert (message["seq"], message["content"]) == (1, "second")


# -- the Telegram journal ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "lose_newline", [False, True], ids=["short-then-ENOSPC", "all-but-newline"]
)
async def test_the_journal_mark_moves_only_after_a_whole_batch_is_down(
    tmp_path: Path, lose_newline: bool
) -> None:
    writer = FillingDisk()
    path = tmp_path / "journal.jsonl"
    journal = InboundJournal(path, writer=writer)
    await journal.record([(1, inbound(1))])

    writer.fill(path, room=40, step=9, lose_newline=lose_newline)
    with pytest.raises(OSError):
        await journal.record([(2, inbound(2)), (3, inbound(3))])
    assert writer.short_writes
    # The next getUpdates asks from high + 1: updates 2 and 3 are not confirmed.
    assert journal.high == 1
    assert sorted(journal.pending) == [1]
    with pytest.raises(OSError):
        await journal.answered([1])
    assert sorted(journal.pending) == [1]

    writer.clear()
    await journal.record([(2, inbound(2)), (3, inbound(3))])
    await journal.answered([1])

    whole_lines(path)
    reloaded = InboundJournal(path)
    assert [(u, m.text) for u, m in await reloaded.load()] == [
        (2, "message 2"),
        (3, "message 3"),
    ]
    assert reloaded.high == 3


async def test_a_compaction_the_disk_cut_short_keeps_the_old_journal(tmp_path: Path) -> None:
    writer = FillingDisk()
    path = tmp_path / "journal.jsonl"
    journal = InboundJournal(path, writer=writer, compact_after=4)
    await journal.record((u, inbound(u)) for u in range(1, 7))
    temp = path.with_name(f".{path.name}.compacting")
    writer.fill(temp, room=100, step=13)
    before = path.read_bytes()

    await journal.answered([1, 2, 3, 4])  # over the threshold: compaction is tried, and fails

    assert temp in writer.seen and writer.short_writes
    assert not temp.exists()
    assert path.read_bytes().startswith(before)  # only the answered line was added
    assert [u for u, _ in await InboundJournal(path).load()] == [5, 6]

    writer.clear()
    await journal.record((u, inbound(u)) for u in (7, 8, 9))
    for update_id in (5, 6, 7, 8):  # the retry waits for compact_after more lines
        await journal.answered([update_id])
    assert whole_lines(path)[0] == {"high": 9}
    reloaded = InboundJournal(path)
    assert [u for u, _ in await reloaded.load()] == [9]
    assert reloaded.high == 9


class LyingDisk(DiskWriter):
    """Reports every byte of the compacted journal written, keeps only half of them."""

    def append(self, path: Path, data: str | bytes, *, mode: int = 0o600) -> None:
        raw = data.encode() if isinstance(data, str) else data
        if path.name.endswith(".compacting"):
            raw = raw[: len(raw) // 2]
        super().append(path, raw, mode=mode)


async def test_a_compaction_is_checked_before_it_replaces_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    journal = InboundJournal(path, writer=LyingDisk(), compact_after=4)
    await journal.record((u, inbound(u)) for u in range(1, 9))
    await journal.answered([1, 2, 3, 4, 5])

    lines = whole_lines(path)
    assert "high" not in lines[0] and lines[0]["update"] == 1  # not compacted
    assert [u for u, _ in await InboundJournal(path).load()] == [6, 7, 8]


# -- a real small filesystem ------------------------------------------------------------------


@contextlib.contextmanager
def small_filesystem(where: Path, size: str = "64k") -> Iterator[Path]:
    where.mkdir()
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False, timeout=10)


def fill_up(folder: Path) -> Path:
    """Take all but a few hundred bytes of the filesystem holding `folder`."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with contextlib.suppress(OSError):
            while os.write(fd, b"x" * 4096):
                pass
        stats = os.statvfs(folder)
        assert stats.f_bavail * stats.f_frsize < 4096
        os.ftruncate(fd, os.fstat(fd).st_size - 3000)  # room for a few records, not many
    finally:
        os.close(fd)
    return filler


async def test_a_full_tmpfs_loses_no_session_message_and_glues_no_line(tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "small") as root:
        store = SessionStore(root / "sessions")
        session = await store.get("test:1")
        store.append(session, Message(role="user", content="hello"))
        filler = fill_up(root)
        kept: list[str] = ["hello"]
        with pytest.raises(OSError):
            for number in range(1000):
                content = f"message {number} " + "y" * (number % 97)
                store.append(session, Message(role="user", content=content))
                kept.append(content)
        assert [m.content for m in session.messages] == kept
        filler.unlink()
        store.append(session, Message(role="user", content="after"))
        kept.append("after")

        path = store.path_for("test:1")
        whole_lines(path)
        reloaded = load_session(path, "test:1")
        assert [m.content for m in reloaded.messages] == kept
        assert [m.seq for m in reloaded.messages] == list(range(1, len(kept) + 1))


async def test_a_full_tmpfs_never_lets_the_journal_confirm_what_it_cannot_replay(
    tmp_path: Path,
) -> None:
    with small_filesystem(tmp_path / "small") as root:
        path = root / "telegram" / "journal.jsonl"
        journal = InboundJournal(path, compact_after=3)
        await journal.record([(1, inbound(1))])
        filler = fill_up(root)
        recorded = [1]
        with pytest.raises(OSError):
            for update_id in range(2, 1000):
                await journal.record([(update_id, inbound(update_id))])
                recorded.append(update_id)
        assert journal.high == recorded[-1]  # nothing past the last whole record
        # Answering on a full disk: compaction cannot fit its new file and keeps the old one.
        with contextlib.suppress(OSError):
            await journal.answered(recorded[:-1])
        filler.unlink()
        failed = recorded[-1] + 1
        await journal.record([(failed, inbound(failed))])  # fetched again, now it fits
        recorded.append(failed)

        whole_lines(path)
        reloaded = InboundJournal(path)
        replay = [u for u, _ in await reloaded.load()]
        assert replay == [u for u in recorded if u in journal.pending]
        assert replay[-2:] == recorded[-2:]
        assert reloaded.high == failed
