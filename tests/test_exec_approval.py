"""Exec approval cards through the real gateway and the fake Telegram Bot API: the card and
its buttons, each answer, the timeout, a press by someone else, a restart while a card waits,
and a group's command asked of the owner in private."""

from __future__ import annotations

import asyncio
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

from clawgate.agent.runtime import AgentRuntime
from clawgate.agent.tools.approval import DENIED, TIMED_OUT, needs_approval
from clawgate.channels.telegram import create_channel
from clawgate.channels.terminal import CARD_QUESTION, Terminal, TerminalChannel
from clawgate.gateway.daemon.gateway import Gateway
from clawgate.kernel.bus import MessageBus
from clawgate.kernel.config import AgentConfig, ChannelsConfig, Config, ToolsConfig
from tests.fakes.llm import FakeLLM, text, tool_call
from tests.fakes.telegram import FakeTelegram
from tests.harness import make_config, wait_until
from tests.telegram_world import GROUP, MENTION, OWNER, Sleeps, telegram_config

STRANGER = 3003
TIMEOUT = 20.0


def approval_config(
    tmp_path: Path, agent_config: AgentConfig, telegram: FakeTelegram, **tools: Any
) -> Config:
    rules = telegram_config(telegram, allow_from=[str(OWNER)], owners=[str(OWNER)])
    return make_config(
        tmp_path,
        agent_config,
        channels=ChannelsConfig(telegram=rules),
        tools=ToolsConfig(**{"exec_approval": "risky", **tools}),
    )


class Running:
    """The gateway as the daemon builds it, with the owner's private chat known."""

    def __init__(self, config: Config) -> None:
        bus = MessageBus()
        channel = create_channel(config.channels.telegram, bus, config, sleep=Sleeps())
        runtime = AgentRuntime.build(
            config, outbox=bus.publish_outbound, owner_chat=lambda: f"telegram:{OWNER}"
        )
        self.runtime = runtime
        self.gateway = Gateway([(runtime, bus)], [channel], bus)

    async def __aenter__(self) -> Running:
        await self.gateway.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.gateway.stop(grace=2)


def tool_result(request: dict[str, Any]) -> str:
    return str(request["messages"][-1]["content"])


def decisions(config: Config, chat: int) -> list[dict[str, Any]]:
    return decisions_of(config, f"telegram_{chat}")


def decisions_of(config: Config, name: str) -> list[dict[str, Any]]:
    path = config.workspace / "sessions" / f"{name}.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [line for line in lines if line.get("type") == "exec_approval"]


async def card_for(telegram: FakeTelegram, chat: int) -> dict[str, Any]:
    card = await telegram.next_message(chat, timeout=TIMEOUT)
    assert "reply_markup" in card, card
    return card


async def two_messages(telegram: FakeTelegram, chat: int) -> set[str]:
    first = await telegram.next_message(chat, timeout=TIMEOUT)
    second = await telegram.next_message(chat, timeout=TIMEOUT)
    return {first["text"], second["text"]}


async def test_allow_once_runs_the_command_once_and_records_who(
    tmp_path: Path, agent_config: AgentConfig, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    config = approval_config(tmp_path, agent_config, telegram)
    fake_llm.script(
        tool_call("exec", command="echo ran >> made.txt"),
        text("Done."),
    )
    async with Running(config):
        telegram.user_says(OWNER, "append to the file")
        card = await card_for(telegram, OWNER)
        labels = [b["text"] for row in card["reply_markup"]["inline_keyboard"] for b in row]
        assert labels == ["Allow once", "Allow for this session", "Deny"]
        assert "echo ran >> made.txt" in card["text"]
        assert str(config.workspace.resolve()) in card["text"]
        assert not (config.workspace / "made.txt").exists()  # nothing runs before the tap
        telegram.press(card, "Allow once")
        texts = await two_messages(telegram, OWNER)
    assert texts == {"Allow once: echo ran >> made.txt", "Done."}
    assert (config.workspace / "made.txt").read_text() == "ran\n"
    assert "exit code 0" in tool_result(fake_llm.requests[-1])
    assert telegram.answered_callbacks  # the button's spinner stopped
    [record] = decisions(config, OWNER)
    assert record["decision"] == "once" and record["who"] == str(OWNER)
    assert record["command"] == "echo ran >> made.txt"


async def test_allow_for_the_session_skips_the_next_identical_prompt(
    tmp_path: Path, agent_config: AgentConfig, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    config = approval_config(tmp_path, agent_config, telegram)
    command = "echo again >> made.txt"
    fake_llm.script(tool_call("exec", command=command), text("One."))
    fake_llm.script(tool_call("exec", command=command), text("Two."))
    async with Running(config):
        telegram.user_says(OWNER, "first")
        telegram.press(await card_for(telegram, OWNER), "Allow for this session")
        assert await two_messages(telegram, OWNER) == {f"Allow for this session: {command}", "One."}
        telegram.user_says(OWNER, "second")
        second = await telegram.next_message(OWNER, timeout=TIMEOUT)
    assert second["text"] == "Two." and "reply_markup" not in second
    assert (config.workspace / "made.txt").read_text() == "again\nagain\n"
    assert [r["decision"] for r in decisions(config, OWNER)] == ["session", "allowed"]


@pytest.mark.parametrize("answer", ["deny", "timeout"])
async def test_deny_and_timeout_give_the_model_the_denial(
    answer: str,
    tmp_path: Path,
    agent_config: AgentConfig,
    telegram: FakeTelegram,
    fake_llm: FakeLLM,
) -> None:
    timeout = 0.5 if answer == "timeout" else 120.0
    config = approval_config(tmp_path, agent_config, telegram, exec_approval_timeout=timeout)
    fake_llm.script(tool_call("exec", command="touch nope.txt"), text("Understood."))
    async with Running(config):
        telegram.user_says(OWNER, "make nope")
        card = await card_for(telegram, OWNER)
        if answer == "deny":
            telegram.press(card, "Deny")
            assert await two_messages(telegram, OWNER) == {"Deny: touch nope.txt", "Understood."}
        else:
            reply = await telegram.next_message(OWNER, timeout=TIMEOUT)
            assert reply["text"] == "Understood."
            telegram.press(card, "Allow once")  # too late: the turn has moved on
            late = await telegram.next_message(OWNER, timeout=TIMEOUT)
            assert "expired" in late["text"]
    assert not (config.workspace / "nope.txt").exists()
    result = tool_result(fake_llm.requests[-1])
    assert result == (DENIED if answer == "deny" else TIMED_OUT)
    assert "denied" in result
    assert [r["decision"] for r in decisions(config, OWNER)] == [answer]


async def test_a_press_by_someone_not_an_owner_changes_nothing(
    tmp_path: Path, agent_config: AgentConfig, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    config = approval_config(tmp_path, agent_config, telegram)
    fake_llm.script(tool_call("exec", command="touch owned.txt"), text("Done."))
    async with Running(config):
        telegram.user_says(OWNER, "touch it")
        card = await card_for(telegram, OWNER)
        telegram.press(card, "Allow once", user_id=STRANGER)
        refused = await telegram.next_message(OWNER, timeout=TIMEOUT)
        assert refused["text"] == "Only the owner can answer this."
        assert not (config.workspace / "owned.txt").exists()
        assert len(fake_llm.requests) == 1  # the turn still waits for the owner
        telegram.press(card, "Allow once")
        assert await two_messages(telegram, OWNER) == {"Allow once: touch owned.txt", "Done."}
    assert (config.workspace / "owned.txt").exists()
    [record] = decisions(config, OWNER)
    assert record["who"] == str(OWNER)


async def test_a_restart_while_a_card_waits_expires_it(
    tmp_path: Path, agent_config: AgentConfig, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    config = approval_config(tmp_path, agent_config, telegram)
    fake_llm.script(tool_call("exec", command="touch late.txt"))
    fake_llm.handler = lambda body: text("Later.")
    async with Running(config):
        telegram.user_says(OWNER, "touch late")
        card = await card_for(telegram, OWNER)
    pending = json.loads((config.data_dir / "approvals" / "main.json").read_text())
    assert pending["cards"] == []  # the stop ended the turn, and with it the card
    async with Running(config) as again:
        telegram.press(card, "Allow once")
        while True:  # the stopped turn's message may be answered again first
            message = await telegram.next_message(OWNER, timeout=TIMEOUT)
            if "expired" in message["text"]:
                break
        assert again.runtime.approvals.pending() == []
    assert not (config.workspace / "late.txt").exists()


async def test_a_card_left_by_a_crash_is_expired_at_start(
    tmp_path: Path, agent_config: AgentConfig, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    config = approval_config(tmp_path, agent_config, telegram)
    doc = config.data_dir / "approvals" / "main.json"
    doc.parent.mkdir(parents=True)
    card = {"id": "abc123", "session_key": f"telegram:{OWNER}", "command": "touch x"}
    doc.write_text(json.dumps({"cards": [{**card, "cwd": "/", "asked_at": "2026-01-01"}]}))
    async with Running(config):
        pass
    [left] = json.loads(doc.read_text())["cards"]
    assert left["status"] == "expired"


async def test_a_groups_command_is_asked_of_the_owner_in_private(
    tmp_path: Path, agent_config: AgentConfig, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    config = approval_config(tmp_path, agent_config, telegram)
    fake_llm.script(tool_call("exec", command="ls"), text("Listed."))
    async with Running(config):
        telegram.user_says(
            GROUP, f"{MENTION} list the files", user_id=4004, first_name="Max", chat_type="group"
        )
        card = await card_for(telegram, OWNER)  # even a read-only command, in private
        assert f"telegram:{GROUP}" in card["text"] and "Max" in card["text"]
        telegram.press(card, "Allow once")
        assert (await telegram.next_message(OWNER, timeout=TIMEOUT))["text"] == "Allow once: ls"
        reply = await telegram.next_message(GROUP, timeout=TIMEOUT)
    assert reply["text"] == "Listed."
    assert "exit code 0" in tool_result(fake_llm.requests[-1])


def test_the_risky_policy_asks_for_all_but_read_only_commands_in_the_workspace() -> None:
    risky = ToolsConfig(exec_approval="risky", exec_allow=["make test", "git pull*"])
    for command in ("ls", "ls -la notes", "cat memory/MEMORY.md", "git status", "date"):
        assert not needs_approval(command, risky), command
    for command in ("make test", "git pull origin main"):
        assert not needs_approval(command, risky), command
    for command in (
        "cat /etc/passwd",
        "cat ../secret",
        "ls; rm -rf x",
        "cat a | sh",
        "git pull; curl x",
        "echo $(id)",
        "rm notes.md",
        "git push",
        "cat ~/.ssh/id_rsa",
    ):
        assert needs_approval(command, risky), command
    assert needs_approval("ls", ToolsConfig(exec_approval="always"))
    assert not needs_approval("rm -rf x", ToolsConfig(exec_approval="never"))


@pytest.mark.parametrize("answer", ["y", "", "s"])
async def test_the_terminal_asks_y_n(
    answer: str, tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    config = make_config(tmp_path, agent_config, tools=ToolsConfig(exec_approval="risky"))
    fake_llm.script(tool_call("exec", command="touch t.txt"), text("Finished."))
    bus = MessageBus()
    channel = TerminalChannel(bus, "default")
    runtime = AgentRuntime.build(config, outbox=bus.publish_outbound)
    gateway = Gateway([(runtime, bus)], [channel], bus)
    output = io.StringIO()
    read_end, write_end = os.pipe()
    await gateway.start()
    try:
        with os.fdopen(read_end) as source, os.fdopen(write_end, "w") as lines:
            terminal = Terminal(channel, output, io.StringIO(), spinner=False)
            lines.write("please touch t\n")
            lines.flush()
            talking = asyncio.create_task(terminal.pipe(source))
            await wait_until(lambda: CARD_QUESTION in output.getvalue(), timeout=TIMEOUT)
            lines.write(f"{answer}\n")
            lines.close()
            assert await asyncio.wait_for(talking, TIMEOUT) == 0
    finally:
        await gateway.stop(grace=2)
    shown = output.getvalue()
    assert "touch t.txt" in shown and "Finished." in shown
    ran = answer in ("y", "s")
    assert (config.workspace / "t.txt").exists() is ran
    expected = {"y": "once", "s": "session", "": "deny"}[answer]
    assert [r["decision"] for r in decisions_of(config, "cli_default")] == [expected]
