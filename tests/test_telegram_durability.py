"""Telegram's delivery edge cases: an update python-telegram-bot cannot parse, polling that
keeps failing, and messages over the rate limit. The real PTB against FakeTelegram, the real
gateway, FakeLLM behind litellm."""

from __future__ import annotations

import errno
import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from clawgate.agent.runtime import AgentRuntime
from clawgate.channels.manager import ChannelStates
from clawgate.channels.telegram import create_channel
from clawgate.channels.telegram.journal import InboundJournal
from clawgate.channels.unstored import UNSTORED_NOTICE
from clawgate.gateway.daemon.gateway import Gateway
from clawgate.gateway.daemon.ratelimit import limit_notice
from clawgate.kernel.bus import ChatFacts, InboundMessage, MessageBus, Trust
from clawgate.kernel.config import AgentConfig, ChannelsConfig, Config, LimitsConfig
from clawgate.kernel.storage import DiskWriter
from tests.fakes.llm import FakeLLM, Reply, text
from tests.fakes.telegram import FakeTelegram
from tests.harness import make_config, wait_until
from tests.telegram_world import (
    GROUP,
    MENTION,
    OWNER,
    Sleeps,
    TelegramGateway,
    telegram_config,
    telegram_gateway_config,
)

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

# Generous: the first model call imports litellm, which takes seconds on a busy machine.
REPLY_TIMEOUT = 90


@pytest.fixture
def config(tmp_path: Path, agent_config: AgentConfig, telegram: FakeTelegram) -> Config:
    return telegram_gateway_config(tmp_path, agent_config, telegram)


def echo(body: dict[str, Any]) -> Reply:
    users = [m for m in body["messages"] if m.get("role") == "user"]
    return text(f"re: {users[-1]['content']}")


class Clock:
    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now


def journal_path(config: Config) -> Path:
    return config.data_dir / "channels" / "telegram" / "journal.jsonl"


UNPARSEABLE = {"message": {"message_id": 77, "date": "yesterday", "chat": {"id": OWNER}}}


async def test_an_update_ptb_cannot_parse_is_kept_confirmed_and_skipped(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    fake_llm.handler = echo
    caplog.set_level(logging.WARNING, logger="clawgate.channels.telegram")
    async with TelegramGateway(config) as gw:
        bad = telegram.raw_update(UNPARSEABLE)
        telegram.user_says(OWNER, "still there?")
        reply = await telegram.next_message(OWNER, timeout=REPLY_TIMEOUT)
        await wait_until(lambda: telegram.confirmed_offset > bad, timeout=10)
        assert gw.channel.failing() is None

    assert reply["text"] == "re: still there?"
    quarantine = journal_path(config).with_name("quarantine.jsonl")
    [kept] = [json.loads(line) for line in quarantine.read_text().splitlines()]
    assert kept["update"] == bad
    assert kept["raw"] == {"update_id": bad, **UNPARSEABLE}
    assert kept["error"]
    warnings = [r for r in caplog.records if "cannot be read" in r.getMessage()]
    assert len(warnings) == 1 and str(bad) in warnings[0].getMessage()

    # Nothing to replay after a restart, and the bad update is not fetched again.
    assert await InboundJournal(journal_path(config)).load() == []
    async with TelegramGateway(config):
        telegram.user_says(OWNER, "and now?")
        assert (await telegram.next_message(OWNER, timeout=REPLY_TIMEOUT))["text"] == "re: and now?"
    assert telegram.handed_out.count(bad) == 1
    assert len(quarantine.read_text().splitlines()) == 1


async def test_polling_failing_for_over_a_minute_shows_as_failing_with_its_error(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = echo
    clock = Clock()
    bus = MessageBus()
    states = ChannelStates()
    channel = create_channel(config.channels.telegram, bus, config, sleep=Sleeps(), clock=clock)
    runtime = AgentRuntime.build(
        config, outbox=bus.publish_outbound, channel_status=states.snapshot
    )
    gateway = Gateway([(runtime, bus)], [channel], bus, channel_states=states)
    await gateway.start()
    try:
        telegram.break_method("getUpdates", 502, "Bad Gateway")
        await wait_until(lambda: channel.polls_failed >= 2, timeout=10)
        assert states.snapshot()["telegram"]["state"] == "running"  # not yet a minute
        clock.now += 61
        report = states.snapshot()["telegram"]
        assert report["state"] == "failing"
        assert "Bad Gateway" in report["last_error"]
        assert gateway.manager.status()["telegram"] == report  # what status.json holds

        # /status says so too (sent on the bus: Telegram cannot bring it in right now).
        await bus.publish_inbound(
            InboundMessage(
                channel="telegram",
                chat_id=str(OWNER),
                message_id="0:1",
                sender_id=str(OWNER),
                sender_name="Ann",
                text="/status",
                trust=Trust.OWNER,
                facts=ChatFacts(private=True, user_id=str(OWNER)),
            )
        )
        status = await telegram.next_message(OWNER, timeout=REPLY_TIMEOUT)
        assert "Channel telegram: failing (polling failed: " in status["text"]
        assert "Bad Gateway" in status["text"]

        telegram.mend("getUpdates")
        await wait_until(lambda: states.snapshot()["telegram"]["state"] == "running", timeout=10)
        telegram.user_says(OWNER, "back?")
        assert (await telegram.next_message(OWNER, timeout=REPLY_TIMEOUT))["text"] == "re: back?"
    finally:
        await gateway.stop(grace=2)


async def test_a_group_member_over_the_rate_limit_is_kept_marked_never_answered_or_typed_for(
    tmp_path: Path, agent_config: AgentConfig, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = echo
    config = make_config(
        tmp_path,
        agent_config,
        channels=ChannelsConfig(telegram=telegram_config(telegram)),
        limits=LimitsConfig(messages_per_minute=2),
    )
    chat = str(GROUP)

    def member_says(said: str) -> int:
        return telegram.user_says(
            GROUP, f"{MENTION} {said}", user_id=3003, first_name="Bob", chat_type="supergroup"
        )

    async with TelegramGateway(config) as gw:
        for said in ("one", "two"):
            member_says(said)
            reply = await telegram.next_message(GROUP, timeout=REPLY_TIMEOUT)
            assert reply["text"].endswith(said)
        await gw.gateway.default.dispatcher.wait_idle(10)

        member_says("three")
        notice = await telegram.next_message(GROUP, timeout=REPLY_TIMEOUT)
        last = member_says("four")  # told once already: no second notice
        await wait_until(lambda: telegram.confirmed_offset > last, timeout=10)
        await wait_until(lambda: not gw.channel.journal.pending, timeout=10)
        assert await gw.gateway.default.dispatcher.wait_idle(10)
        typing = gw.channel._typing._tasks.get(chat)
        assert typing is None or typing.done()  # nobody is working on "three" or "four"

    assert notice["text"] == limit_notice(2)
    asked = [m["content"] for b in fake_llm.requests for m in b["messages"] if m["role"] == "user"]
    assert not any("three" in a or "four" in a for a in asked)
    # Not answered after a restart either (the notice said so), but not lost: kept, marked.
    assert await InboundJournal(journal_path(config)).load() == []
    session = config.workspace / "sessions" / f"telegram_{GROUP}.jsonl"
    lines = [json.loads(line) for line in session.read_text().splitlines()]
    kept = [
        (line["sender_name"], line["content"]) for line in lines if line.get("type") == "over_limit"
    ]
    assert kept == [("Bob", f"{MENTION} three"), ("Bob", f"{MENTION} four")]
    assert not any("three" in str(line.get("content")) for line in lines if line.get("role"))
    assert len(telegram.messages_to(GROUP)) == 3


class FillingJournal(DiskWriter):
    """While `full`, an append to the journal gets a third of its bytes down, then ENOSPC."""

    def __init__(self) -> None:
        super().__init__()
        self.full = False
        self.refused = 0
        self._writes = -1  # writes into the current journal append; -1: not a full one

    def append(self, path: Path, data: str | bytes, *, mode: int = 0o600) -> None:
        self._writes = 0 if self.full and path.name == "journal.jsonl" else -1
        super().append(path, data, mode=mode)

    def _write(self, fd: int, data: memoryview) -> int:
        if self._writes < 0:
            return super()._write(fd, data)
        self._writes += 1
        if self._writes > 1:
            self.refused += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return os.write(fd, data[: max(1, len(data) // 3)])


async def test_getupdates_never_confirms_an_update_the_journal_could_not_keep(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = echo
    writer = FillingJournal()
    async with TelegramGateway(config, writer=writer) as gw:
        telegram.user_says(OWNER, "first")
        assert (await telegram.next_message(OWNER, timeout=REPLY_TIMEOUT))["text"] == "re: first"
        writer.full = True
        held = telegram.user_says(OWNER, "while full")
        await wait_until(lambda: gw.channel.polls_failed >= 2, timeout=10)
        assert telegram.confirmed_offset <= held  # Telegram still holds it
        assert held not in gw.channel.journal.pending
        # The disk stays full: the sender hears so once, however often polling retries.
        told = await telegram.next_message(OWNER, timeout=REPLY_TIMEOUT)
        writer.full = False
        reply = await telegram.next_message(OWNER, timeout=REPLY_TIMEOUT)
        await wait_until(lambda: not gw.channel.journal.pending, timeout=10)

    assert writer.refused >= 2
    assert told["text"] == UNSTORED_NOTICE
    assert reply["text"] == "re: while full"
    lines = journal_path(config).read_bytes().split(b"\n")
    assert lines.pop() == b""
    [json.loads(line) for line in lines]  # whole lines only: nothing torn, nothing glued
    assert await InboundJournal(journal_path(config)).load() == []
    async with TelegramGateway(config):  # a restart replays nothing and answers nothing twice
        telegram.user_says(OWNER, "after")
        assert (await telegram.next_message(OWNER, timeout=REPLY_TIMEOUT))["text"] == "re: after"
    assert [m["text"] for m in telegram.messages_to(OWNER)] == [
        "re: first",
        UNSTORED_NOTICE,
        "re: while full",
        "re: after",
    ]
