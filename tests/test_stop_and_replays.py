"""/stop with messages queued behind the stopped turn, and slash commands replayed after a
crash (issue #24 items 1 and 8), through the real `clawgate gateway` process.

/stop cancels the running turn only: the messages queued behind it still run, through a
SIGTERM whose grace a held turn outlives or a kill -9, and after the restart each is answered
once, the stopped one never again. Two /new whose replies a 429 wait held back are not run
again after a kill -9: the live conversation stays, and its stored reply is delivered.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from clawgate.channels.journal import Journal
from tests.discord_world import OWNER as DISCORD_OWNER
from tests.discord_world import READY as DISCORD_READY
from tests.discord_world import GatewayHome
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import FakeLLM, Reply, hang, text
from tests.fakes.telegram import FakeTelegram
from tests.harness import wait_until
from tests.memory_helpers import is_consolidation, save
from tests.process import ClawgateProcess, fake_model, fake_telegram, write_config

OWNER = 1001
READY = "channel telegram ready"
START_TIMEOUT = 60.0  # the daemon imports litellm at start: seconds on a busy machine
REPLY_TIMEOUT = 90.0
STOP_TIMEOUT = 60.0  # SIGTERM waits out the 3 s grace on a held turn
STOPS = pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill-9"])


def last_user_text(body: dict[str, Any]) -> str:
    users = [m for m in body["messages"] if m.get("role") == "user"]
    return str(users[-1]["content"]) if users else ""


class Model:
    """FakeLLM's handler: chat turns hang while `hold`, else answer "re: <last user text>";
    consolidations (the archive /new starts) save an entry."""

    def __init__(self, llm: FakeLLM) -> None:
        self.hold = True
        self.chats: list[str] = []  # the last user text of each chat request
        llm.handler = self

    def __call__(self, body: dict[str, Any]) -> Reply:
        if is_consolidation(body):
            return save("Ann talked.")
        said = last_user_text(body)
        self.chats.append(said)
        return hang() if self.hold else text(f"re: {said}")


def telegram_home(home: Path, telegram: FakeTelegram, llm: FakeLLM) -> Path:
    return write_config(
        home,
        # A held turn outlives a 3 s grace; 20 s of it would only be waited out.
        agent={**fake_model(llm, request_timeout=60), "shutdown_grace_seconds": 3},
        telegram=fake_telegram(telegram, [OWNER]),
    )


def texts_to(telegram: FakeTelegram, chat: int) -> list[str]:
    return [m["text"] for m in telegram.messages_to(chat)]


def session_lines(home: Path, chat: int) -> list[dict[str, Any]]:
    """The chat's live transcript; none until /new's fresh one has its first line."""
    path = home / "workspace" / "sessions" / f"telegram_{chat}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


async def pending(path: Path, id_field: str) -> list[int]:
    journal = Journal(path, id_field=id_field)
    return [record_id for record_id, _ in await journal.load()]


@STOPS
async def test_telegram_stop_leaves_the_queued_messages_to_run_through_a_restart(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM, stop: signal.Signals
) -> None:
    model = Model(fake_llm)
    config = telegram_home(tmp_path, telegram, fake_llm)
    async with ClawgateProcess(tmp_path, "--config", str(config), "gateway") as gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        telegram.user_says(OWNER, "A")
        await wait_until(lambda: model.chats == ["A"], REPLY_TIMEOUT)
        queued = [telegram.user_says(OWNER, said) for said in ("B", "C")]
        await wait_until(lambda: telegram.confirmed_offset > queued[-1], 20)
        telegram.user_says(OWNER, "/stop")
        assert (await telegram.next_message(OWNER, REPLY_TIMEOUT))["text"] == "Stopped."
        # B's turn runs (and hangs, past the grace); C waits behind it.
        await wait_until(lambda: model.chats == ["A", "B"], REPLY_TIMEOUT)
        gateway.send_signal(stop)
        code = await gateway.wait(STOP_TIMEOUT)
    assert code == (0 if stop == signal.SIGTERM else -signal.SIGKILL), gateway.stderr

    model.hold = False
    async with ClawgateProcess(tmp_path, "--config", str(config), "gateway") as gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        await wait_until(lambda: len(texts_to(telegram, OWNER)) >= 3, REPLY_TIMEOUT)
        gateway.send_signal(signal.SIGTERM)  # a graceful stop: a duplicate would show below
        assert await gateway.wait(STOP_TIMEOUT) == 0, gateway.stderr

    assert texts_to(telegram, OWNER) == ["Stopped.", "re: B", "re: C"]
    assert model.chats[2:] == ["B", "C"]  # the stopped A never ran again
    users = [line["content"] for line in session_lines(tmp_path, OWNER) if line.get("role")]
    assert [u for u in users if u in "ABC"] == ["A", "B", "C"]
    journal = tmp_path / "data" / "channels" / "telegram" / "journal.jsonl"
    assert await pending(journal, "update") == []


@pytest.mark.long
@STOPS
async def test_discord_stop_leaves_the_queued_messages_to_run_through_a_restart(
    tmp_path: Path, fake_llm: FakeLLM, stop: signal.Signals
) -> None:
    async with FakeDiscord() as fake:
        home = GatewayHome(tmp_path, fake, fake_llm)
        home.hold = True
        async with home.gateway() as gateway:
            await gateway.wait_for_log(DISCORD_READY, START_TIMEOUT)
            await home.say(home.owner_dm, "note-A")
            await wait_until(lambda: len(fake_llm.requests) == 1, REPLY_TIMEOUT)
            queued = [await home.say(home.owner_dm, note) for note in ("note-B", "note-C")]
            await wait_until(lambda: home.watermark(home.owner_dm) >= queued[-1].message_id, 20)
            await fake.user_says(home.owner_dm, "/stop", author_id=DISCORD_OWNER, username="ann")
            await wait_until(lambda: home.replies(home.owner_dm) == ["Stopped."], REPLY_TIMEOUT)
            await wait_until(lambda: len(fake_llm.requests) == 2, REPLY_TIMEOUT)  # B's turn
            gateway.send_signal(stop)
            code = await gateway.wait(STOP_TIMEOUT)
        assert code == (0 if stop == signal.SIGTERM else -signal.SIGKILL), gateway.stderr

        home.hold = False
        async with home.gateway() as gateway:
            await gateway.wait_for_log(DISCORD_READY, START_TIMEOUT)
            await wait_until(lambda: len(home.replies(home.owner_dm)) >= 3, REPLY_TIMEOUT)
            gateway.send_signal(signal.SIGTERM)
            assert await gateway.wait(STOP_TIMEOUT) == 0, gateway.stderr

        assert home.replies(home.owner_dm) == ["Stopped.", "re: note-B", "re: note-C"]
        asked = [last_user_text(body) for body in fake_llm.requests[2:]]
        assert asked == ["note-B", "note-C"]  # the stopped note-A never ran again
        journal = tmp_path / "data" / "channels" / "discord" / "journal.jsonl"
        assert await pending(journal, "id") == []


async def test_two_new_replayed_after_a_kill_during_a_rate_limit_wait_run_once(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    model = Model(fake_llm)
    model.hold = False
    config = telegram_home(tmp_path, telegram, fake_llm)
    sessions = tmp_path / "workspace" / "sessions"
    async with ClawgateProcess(tmp_path, "--config", str(config), "gateway") as gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        # The reply to "M1" meets a 429 and waits its minute: the chat's replies queue behind.
        telegram.fail_next("sendMessage", 429, "Too Many Requests: retry after 60", 60)
        telegram.user_says(OWNER, "M1")
        await gateway.wait_for_log("retry 1 in 60 s", REPLY_TIMEOUT)
        telegram.user_says(OWNER, "/new")
        await wait_until(lambda: len(list((sessions / "archive").glob("*.jsonl"))) == 1, 20)
        telegram.user_says(OWNER, "/new")
        await wait_until(lambda: len(list((sessions / "archive").glob("*.jsonl"))) == 2, 20)
        last = telegram.user_says(OWNER, "M2")
        await wait_until(
            lambda: any(line.get("content") == "re: M2" for line in session_lines(tmp_path, OWNER)),
            REPLY_TIMEOUT,
        )
        await wait_until(lambda: telegram.confirmed_offset > last, 20)
        assert telegram.sent == []
        gateway.send_signal(signal.SIGKILL)
        assert await gateway.wait(STOP_TIMEOUT) == -signal.SIGKILL

    chats_before = len(model.chats)
    async with ClawgateProcess(tmp_path, "--config", str(config), "gateway") as gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        await wait_until(lambda: len(texts_to(telegram, OWNER)) >= 1, REPLY_TIMEOUT)
        gateway.send_signal(signal.SIGTERM)  # a graceful stop: a stray reply would show below
        assert await gateway.wait(STOP_TIMEOUT) == 0, gateway.stderr

    # The stored reply to M2 went out, from the transcript (no new model call); neither /new
    # ran again: no stray notice, the live conversation not archived.
    assert texts_to(telegram, OWNER) == ["re: M2"]
    assert model.chats[chats_before:] == []
    assert len(list((sessions / "archive").glob("*.jsonl"))) == 2
    live = [line["content"] for line in session_lines(tmp_path, OWNER) if line.get("role")]
    assert live == ["M2", "re: M2"]
    journal = tmp_path / "data" / "channels" / "telegram" / "journal.jsonl"
    assert await pending(journal, "update") == []
