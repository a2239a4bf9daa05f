"""A full disk under the Discord journal (issue #24 item 2), through the real `clawgate
gateway` process: a message that arrives while nothing can be written is kept and retried,
its sender told once, and answered once the disk has room; neither a later message nor a
restart moves the watermark past it. The full filesystem is a real one (tests/small_disk.py:
a tmpfs over `<data_dir>/channels/discord`, so the kernel itself says ENOSPC)."""

from __future__ import annotations

import errno
import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from clawgate.channels.journal import Journal
from clawgate.channels.unstored import UNSTORED_NOTICE, Unstored
from clawgate.kernel.bus import InboundMessage
from tests.discord_world import READY, GatewayHome
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import FakeLLM
from tests.harness import wait_until
from tests.small_disk import MountRefused, SmallDisk

START_TIMEOUT = 60.0
REPLY_TIMEOUT = 90.0  # the first model call imports litellm
STOP_TIMEOUT = 30.0


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[SmallDisk]:
    small = SmallDisk(tmp_path / "data" / "channels" / "discord")
    try:
        small.mount()
    except MountRefused as exc:
        if os.environ.get("CI") == "true":  # CI runs as root: there the test must run
            pytest.fail(str(exc))
        pytest.skip(str(exc))
    try:
        yield small
    finally:
        small.unmount()


async def test_a_discord_message_received_on_a_full_disk_is_kept_told_once_and_answered(
    tmp_path: Path, fake: FakeDiscord, fake_llm: FakeLLM, disk: SmallDisk
) -> None:
    home = GatewayHome(tmp_path, fake, fake_llm)
    disk.fill()  # before the journal exists: its first line needs a page the disk lacks
    async with home.gateway() as gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        lost = await home.say(home.owner_dm, "note-while-full")
        # Not dropped without a word: the write keeps failing, the owner is told once.
        told = await fake.next_message(home.owner_dm, REPLY_TIMEOUT)
        behind = await home.say(home.general, "note-behind-it")
        assert home.watermark(home.owner_dm) < lost.message_id
        disk.free()
        await wait_until(home.all_answered, timeout=REPLY_TIMEOUT)
        assert home.watermark(home.owner_dm) >= lost.message_id
        assert home.watermark(home.general) >= behind.message_id
        gateway.send_signal(signal.SIGTERM)
        assert await gateway.wait(STOP_TIMEOUT) == 0

    assert told.content == UNSTORED_NOTICE
    journal = Journal(disk.folder / "journal.jsonl", id_field="id")
    assert await journal.load() == []  # stored, then answered
    # A restart replays nothing and reads nothing again.
    async with home.gateway() as gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        await home.say(home.owner_dm, "note-after")
        await wait_until(home.all_answered, timeout=REPLY_TIMEOUT)
        gateway.send_signal(signal.SIGTERM)
        assert await gateway.wait(STOP_TIMEOUT) == 0
        assert "Traceback" not in gateway.stderr

    assert home.replies(home.owner_dm) == [UNSTORED_NOTICE, "re: note-while-full", "re: note-after"]
    assert home.replies(home.general) == ["re: note-behind-it"]


async def test_each_waiting_sender_is_told_once_per_outage_once_the_write_failed_twice() -> None:
    told: list[tuple[str, str]] = []

    async def tell(chat_id: str, text: str) -> None:
        told.append((chat_id, text))

    unstored = Unstored("test", tell)
    ann, bob = (InboundMessage(channel="test", chat_id=c, text="hi") for c in ("ann", "bob"))
    full = OSError(errno.ENOSPC, "No space left on device")
    await unstored.failed([ann], full)
    assert told == []  # one failure may be a passing blip
    await unstored.failed([ann, bob, None], full)  # None: seen, nothing to answer
    await unstored.failed([ann, bob], full)
    assert told == [("ann", UNSTORED_NOTICE), ("bob", UNSTORED_NOTICE)]
    assert unstored.delay() > 0
    unstored.stored()  # the outage is over; the next one is told again
    await unstored.failed([ann], full)
    await unstored.failed([ann], full)
    assert [chat for chat, _ in told] == ["ann", "bob", "ann"]
