"""The attack suite (issue 13): each attack against a real `clawgate gateway` process, with
FakeTelegram and FakeLLM on loopback, and each found blocked.

The model is assumed fully compliant with an attacker (it calls whatever tool it is told
to), so what is tested is what the channel, command and tool layers let through. Each test
pays one process start and litellm's import on the first model call.
"""

from __future__ import annotations

import json
import os
import signal
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from clawgate.agent.commands import OWNER_ONLY
from clawgate.agent.llm import GENERIC_FAILURE
from clawgate.gateway.daemon.ratelimit import limit_notice
from clawgate.kernel.secrets import REDACTED
from tests.fakes.llm import FakeLLM, error, text, tool_call
from tests.fakes.telegram import TOKEN, FakeTelegram
from tests.process import ClawgateProcess, fake_model, fake_telegram, write_config

OWNER = 1001
GROUP = -100123
MEMBERS = (2001, 2002, 2003, 2004, 2005)
READY = "channel telegram ready"
START_TIMEOUT = 30.0
MODEL_TIMEOUT = 90.0  # litellm's import on the first call, on a loaded machine
EXIT_TIMEOUT = 25.0
PER_MINUTE = 5
API_KEY = "sk-test-secret"  # what tests.process.fake_model configures
# Never configured anywhere, caught by their shape alone.
SHAPED = (
    "7412345678:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw9",  # a Telegram bot token
    "sk-proj-Abcdefghijklmnop0123456789",  # an OpenAI project key
    "MTE5ODc2NTQzMjEwOTg3NjU0.GaBcDe.abcdefghijklmnopqrstuvwxyz012345",  # a Discord token
)
SECRETS = (API_KEY, TOKEN, *SHAPED)


def gateway_config(
    home: Path, telegram: FakeTelegram, llm: FakeLLM, extra: str = "", **tools: Any
) -> Path:
    tools = {"exec_approval": "never", **tools}  # tests/test_exec_approval.py asks
    sections = [
        f"[limits]\nmessages_per_minute = {PER_MINUTE}",
        "[cron]\nallow_from_groups = true",
        "[tools]\n" + "\n".join(f"{k} = {json.dumps(v)}" for k, v in tools.items()),
        extra,
    ]
    return write_config(
        home,
        agent=fake_model(llm, request_timeout=60),
        telegram=fake_telegram(telegram, (OWNER,), group_allow=[str(GROUP)], require_mention=False),
        extra="\n".join(sections),
    )


def member_says(telegram: FakeTelegram, member: int, said: str) -> int:
    return telegram.user_says(GROUP, said, user_id=member, chat_type="group")


async def replies_until(telegram: FakeTelegram, chat: int, last: str, timeout: float) -> list[str]:
    """Texts sent to `chat` up to and including the first that contains `last`."""
    texts: list[str] = []
    while not texts or last not in texts[-1]:
        texts.append((await telegram.next_message(chat, timeout=timeout))["text"])
    return texts


async def stop(gateway: ClawgateProcess) -> None:
    gateway.send_signal(signal.SIGTERM)
    assert await gateway.wait(EXIT_TIMEOUT) == 0, gateway.stderr
    assert "Traceback" not in gateway.stderr


def everything_written(home: Path) -> str:
    """Every file the gateway wrote under its workspace and data_dir, as one text."""
    parts = []
    for root in (home / "workspace", home / "data"):
        for path in sorted(root.rglob("*")):
            if path.is_file():
                parts.append(path.read_text("utf-8", errors="replace"))
    return "\n".join(parts)


def assert_no_secret(text: str, where: str) -> None:
    lowered = text.lower()
    for secret in SECRETS:
        assert secret.lower() not in lowered, f"{secret!r} (in some letter case) in {where}"


@contextmanager
def umask(value: int) -> Iterator[None]:
    previous = os.umask(value)
    try:
        yield
    finally:
        os.umask(previous)


async def test_credentials_echoed_by_the_provider_reach_no_chat_record_or_log(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    # A provider (or a proxy in front of it) that echoes the request's credentials, in
    # another letter case, in its error text.
    echoed = f"bad request from key {API_KEY.upper()} via bot{TOKEN.lower()}; " + " ".join(SHAPED)
    fake_llm.handler = lambda body: error(400, echoed)
    config = gateway_config(tmp_path, telegram, fake_llm)
    async with ClawgateProcess(tmp_path, "--config", str(config), "gateway") as gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        member_says(telegram, MEMBERS[0], "hello bot")
        group_reply = await telegram.next_message(GROUP, timeout=MODEL_TIMEOUT)
        telegram.user_says(OWNER, "hello")
        owner_reply = await telegram.next_message(OWNER, timeout=MODEL_TIMEOUT)
        await stop(gateway)

    # A shared chat learns nothing about the provider; the owner reads the cause, redacted.
    assert group_reply["text"] == GENERIC_FAILURE
    assert "rejected the request" in owner_reply["text"] and REDACTED in owner_reply["text"]
    assert len(fake_llm.requests) == 2
    sent = "\n".join(message["text"] for message in telegram.sent)
    assert_no_secret(sent, "a chat message")
    written = everything_written(tmp_path)
    assert "bad request from key" in written  # the records and the log kept the error...
    assert_no_secret(written, "the workspace or data_dir")  # ...without a credential
    assert_no_secret(gateway.stderr, "stderr")


async def test_shared_chats_cannot_flood_replay_a_backlog_or_schedule_fast_jobs(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    flooder, bystander, commander, scheduler, reader = MEMBERS
    # Sent while the gateway was down: ten minutes old when it starts.
    for i in range(3 * PER_MINUTE):
        member_says(telegram, flooder, f"while you were down {i}")
        telegram.updates[-1]["message"]["date"] -= 600
    fake_llm.handler = lambda body: text("ok")
    config = gateway_config(tmp_path, telegram, fake_llm)
    async with ClawgateProcess(tmp_path, "--config", str(config), "gateway") as gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        # The group's session answers in order: once the bystander's /help is answered,
        # everything queued before it has been answered or dropped.
        member_says(telegram, bystander, "/help")
        backlog = await replies_until(telegram, GROUP, "/new", MODEL_TIMEOUT)

        for _ in range(80):
            member_says(telegram, commander, "/status")
        member_says(telegram, bystander, "/help")
        statuses = await replies_until(telegram, GROUP, "/new", MODEL_TIMEOUT)

        # A model that obeys the group and schedules a job every second.
        fake_llm.script(tool_call("cron", action="add", message="spam", every=1), text("no"))
        member_says(telegram, scheduler, "remind us every second")
        job_reply = await telegram.next_message(GROUP, timeout=MODEL_TIMEOUT)

        shared = {"/model openai/expensive": "model", "/new": "new", "/compact": "compact"}
        refused = []
        for command in shared:
            member_says(telegram, reader, command)
            refused.append((await telegram.next_message(GROUP, timeout=MODEL_TIMEOUT))["text"])
        await stop(gateway)

    assert backlog.count("ok") == PER_MINUTE
    assert backlog.count(limit_notice(PER_MINUTE)) == 1
    assert sum("Session:" in reply for reply in statuses) == PER_MINUTE
    assert statuses.count(limit_notice(PER_MINUTE)) == 1
    assert job_reply["text"] == "no"
    results = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert "at most every 10 minutes" in results[-1]
    jobs = tmp_path / "workspace" / "cron" / "jobs.json"
    assert not jobs.exists() or json.loads(jobs.read_text())["jobs"] == []
    assert refused == [OWNER_ONLY[name] for name in shared.values()]
    # Neither the model nor the transcript changed: the next turn still uses the default.
    assert {request["model"] for request in fake_llm.requests} == {"fake-model"}
    assert not (tmp_path / "workspace" / "sessions" / "archive").exists() or not list(
        (tmp_path / "workspace" / "sessions" / "archive").glob("*.jsonl")
    )


async def test_owner_exec_ends_sees_no_secrets_and_leaves_private_files(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    fake_llm.script(
        tool_call("exec", command="yes"),
        text("stopped"),
        tool_call("exec", command="env"),
        text("shown"),
        tool_call("write_file", path="notes/todo.md", content="- milk"),
        text("saved"),
    )
    leaked = {"DATABASE_URL": "postgres://app:db-pass-1@127.0.0.1/app", "MYSQL_PWD": "pw-2"}
    config = gateway_config(tmp_path, telegram, fake_llm, exec_timeout=2)
    with umask(0o022):  # what most accounts have; the gateway must not rely on a tighter one
        gateway = ClawgateProcess(tmp_path, "--config", str(config), "gateway", env=leaked)
        await gateway.start()
    try:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        replies = []
        for said in ("run yes", "show env", "note milk"):
            telegram.user_says(OWNER, said)
            replies.append((await telegram.next_message(OWNER, timeout=MODEL_TIMEOUT))["text"])
        await stop(gateway)
    finally:
        await gateway.close()

    assert replies == ["stopped", "shown", "saved"]
    # Each tool result once, in the order the calls were made.
    by_call = {
        m["tool_call_id"]: m["content"]
        for request in fake_llm.requests
        for m in request["messages"]
        if m["role"] == "tool"
    }
    results = list(by_call.values())
    assert results[0].startswith("Error: command timed out after 2 s")
    assert "PATH=" in results[1]
    for name, value in leaked.items():
        assert name not in results[1] and value not in results[1]
    loose = [
        f"{path} {stat.filemode(path.stat().st_mode)}"
        for root in (tmp_path / "workspace", tmp_path / "data")
        for path in [root, *root.rglob("*")]
        if not path.is_symlink() and stat.S_IMODE(path.stat().st_mode) & 0o077
    ]
    assert loose == []
