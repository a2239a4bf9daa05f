"""The real `clawgate gateway` process against FakeTelegram and FakeLLM on loopback.

Stopped with SIGTERM while a turn runs, killed with SIGKILL while updates are fetched but
unanswered, and started twice on one data_dir. Each start that reaches the model pays
litellm's import (6-7 s), so there are four process starts in all.
"""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

from clawgate.agent.session import SessionStore, load_session
from clawgate.channels.telegram.journal import InboundJournal
from tests.fakes.llm import FakeLLM, gate, hang, text
from tests.fakes.telegram import FakeTelegram
from tests.harness import wait_until
from tests.process import ClawgateProcess, fake_model, fake_telegram, run_clawgate, write_config

OWNER = 1001
CHATS = (1001, 1002, 1003)
READY = "channel telegram ready"
START_TIMEOUT = 30.0  # the gateway is ready before any model call imports litellm
MODEL_TIMEOUT = 60.0  # litellm's import on the first call, with room for a loaded machine
EXIT_TIMEOUT = 25.0  # the 20 s shutdown grace, and a little more


def gateway_config(
    home: Path, telegram: FakeTelegram, llm: FakeLLM, chats: tuple[int, ...]
) -> Path:
    return write_config(
        home,
        # Generous: a request held by the test must not time out into an error reply.
        agent=fake_model(llm, request_timeout=60),
        telegram=fake_telegram(telegram, chats),
    )


def last_user_text(request: dict[str, Any]) -> str:
    users = [m for m in request["messages"] if m.get("role") == "user"]
    return str(users[-1]["content"])


def session_lines(home: Path, chat: int) -> list[dict[str, Any]]:
    path = home / "workspace" / "sessions" / f"telegram_{chat}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def messages_of(home: Path, chat: int) -> list[dict[str, Any]]:
    return [line for line in session_lines(home, chat) if "role" in line]


async def test_sigterm_finishes_the_turn_in_flight_and_a_second_gateway_is_refused(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    release = asyncio.Event()
    fake_llm.script(gate(release, text("Hello, Ann.")))
    config = gateway_config(tmp_path, telegram, fake_llm, (OWNER,))

    async with ClawgateProcess(tmp_path, "--config", str(config), "gateway") as gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        telegram.user_says(OWNER, "hi")
        await fake_llm.wait_for_requests(1, timeout=MODEL_TIMEOUT)

        # One gateway per data_dir: a second one refuses before it polls anything.
        calls_before = telegram.calls["getMe"]
        code, stderr = await run_clawgate(tmp_path, "--config", str(config), "gateway")
        assert code == 2
        [line] = [line for line in stderr.splitlines() if line.strip()]
        assert "another clawgate gateway" in line
        assert f"pid {gateway.process.pid}" in line
        assert telegram.calls["getMe"] == calls_before

        gateway.send_signal(signal.SIGTERM)
        await gateway.wait_for_log("shutting down", EXIT_TIMEOUT)
        assert telegram.sent == []  # the turn is still held by the model
        release.set()
        reply = await telegram.next_message(OWNER, timeout=EXIT_TIMEOUT)
        code = await gateway.wait(EXIT_TIMEOUT)

    assert code == 0, gateway.stderr
    assert "Traceback" not in gateway.stderr
    assert reply["text"] == "Hello, Ann."
    assert len(telegram.messages_to(OWNER)) == 1  # the process is gone: no more can come
    assert len(fake_llm.requests) == 1
    assert [(m["role"], m["content"]) for m in messages_of(tmp_path, OWNER)] == [
        ("user", "hi"),
        ("assistant", "Hello, Ann."),
    ]
    deliveries = [r for r in session_lines(tmp_path, OWNER) if r.get("type") == "delivery"]
    assert [r["status"] for r in deliveries] == ["sent"]


async def test_sigkill_with_updates_fetched_but_unanswered_loses_and_doubles_nothing(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    answering = False

    def model(body: dict[str, Any]) -> Any:
        # Before the crash every request hangs; after it, the reply names the message.
        return text(f"re: {last_user_text(body)}") if answering else hang()

    fake_llm.handler = model
    config = gateway_config(tmp_path, telegram, fake_llm, CHATS)
    sent_before = {chat: [f"{chat} first", f"{chat} second"] for chat in CHATS}
    update_ids: list[int] = []

    async with ClawgateProcess(tmp_path, "--config", str(config), "gateway") as crashed:
        await crashed.wait_for_log(READY, START_TIMEOUT)
        for chat in CHATS:
            update_ids += [telegram.user_says(chat, said) for said in sent_before[chat]]
        # Each chat's first message is in a turn, its second waits behind it.
        await fake_llm.wait_for_requests(len(CHATS), timeout=MODEL_TIMEOUT)
        # Confirmed to Telegram, so only the gateway's own disk can bring them back.
        await wait_until(lambda: telegram.confirmed_offset > update_ids[-1], timeout=10)
        assert set(update_ids) <= set(telegram.handed_out)
        assert telegram.sent == []
        crashed.send_signal(signal.SIGKILL)
        assert await crashed.wait(EXIT_TIMEOUT) == -signal.SIGKILL

    # Every session file loads, line by line, and holds the messages whose turn had begun.
    store = SessionStore(tmp_path / "workspace" / "sessions")
    keys = dict(store.list_keys())
    assert set(keys) == {f"telegram:{chat}" for chat in CHATS}
    for chat in CHATS:
        lines = session_lines(tmp_path, chat)  # json.loads of every line: none torn
        session = load_session(keys[f"telegram:{chat}"], f"telegram:{chat}")
        assert [m.content for m in session.messages] == [f"{chat} first"], lines

    sent_while_down = {chat: f"{chat} while down" for chat in CHATS}
    for chat in CHATS:
        update_ids.append(telegram.user_says(chat, sent_while_down[chat]))
    answering = True

    expected = {chat: [*sent_before[chat], sent_while_down[chat]] for chat in CHATS}
    async with ClawgateProcess(tmp_path, "--config", str(config), "gateway") as restarted:
        await restarted.wait_for_log(READY, START_TIMEOUT)
        replies = {
            chat: [
                (await telegram.next_message(chat, timeout=MODEL_TIMEOUT))["text"]
                for _ in expected[chat]
            ]
            for chat in CHATS
        }
        # A graceful stop runs whatever is still queued, so a duplicate would show below.
        restarted.send_signal(signal.SIGTERM)
        assert await restarted.wait(EXIT_TIMEOUT) == 0, restarted.stderr

    assert set(update_ids) <= set(telegram.handed_out)
    for chat in CHATS:
        assert replies[chat] == [f"re: {said}" for said in expected[chat]]
        assert [m["text"] for m in telegram.messages_to(chat)] == replies[chat]
        messages = messages_of(tmp_path, chat)
        users = [m for m in messages if m["role"] == "user"]
        assert [m["content"] for m in users] == expected[chat]
        message_ids = [m["message_id"] for m in users]
        assert len(set(message_ids)) == len(message_ids)
        assistants = [m["content"] for m in messages if m["role"] == "assistant"]
        assert assistants == replies[chat]
    # Nothing left for a third start to answer.
    journal = InboundJournal(tmp_path / "data" / "channels" / "telegram" / "journal.jsonl")
    assert await journal.load() == []
    assert "Traceback" not in crashed.stderr + restarted.stderr
