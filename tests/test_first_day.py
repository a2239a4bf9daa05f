"""A newcomer's whole first day (issue 15), every step the real console script from an empty
HOME against the loopback fakes: interactive onboard on a pty, the gateway, pairing as the
owner by following the bot's own reply, an answer, a group found through its logged id and
let in with `clawgate groups allow`, a member's `/model` refused, and the terminal's `/stop`
cancelling a slow turn beside the running gateway."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import socket
import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests import forked
from tests.discord_world import READY as DISCORD_READY
from tests.discord_world import GatewayHome
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import FakeLLM, Reply, error, gate, text, tool_call, unsupported_temperature
from tests.fakes.telegram import BOT_USERNAME, TOKEN, FakeTelegram
from tests.harness import wait_until
from tests.process import (
    CLAWGATE,
    ClawgateProcess,
    fake_model,
    fake_telegram,
    start_clawgate,
    write_config,
)
from tests.pty_terminal import Terminal

NEWCOMER = 4242  # writes to the bot first, so becomes its owner
STRANGER = "310000000000000077"  # a Discord user nobody let in
MEMBER = 5005
GROUP = -100777
MENTION = f"@{BOT_USERNAME}"
START_TIMEOUT = 60.0
REPLY_TIMEOUT = 120.0  # the first model call of a fresh process, on a loaded machine
EXIT_TIMEOUT = 40.0

ANSWERS = {
    "Reply with: ok": "ok",  # onboard's live check of the model
    "what can you do?": "I can read, write and remember.",
    "anyone here?": "Hello, group.",
}
HELD = "tell me a long story"
README = Path(__file__).parent.parent / "README.md"


def before_onboard(home: Path, telegram: FakeTelegram) -> Path:
    """All a newcomer has before onboard is nothing; the fake's address stands in for
    api.telegram.org, which a real bot needs no line for."""
    path = home / ".clawgate" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(
        "[channels.telegram]\n"
        f'base_url = "{telegram.base_url}"\n'
        f'base_file_url = "{telegram.base_file_url}"\n'
        "poll_timeout = 1\n"
    )
    return path


def quick_start_steps() -> list[str]:
    """The clawgate subcommands the README's quick start runs, in order."""
    block = README.read_text(encoding="utf-8").split("<!-- run-command -->", 1)[1]
    command = block.split("```")[1]
    return re.findall(r"clawgate (\w+)", command)


def last_user_text(body: dict[str, Any]) -> str:
    said = [m for m in body.get("messages", []) if m.get("role") == "user"]
    content = said[-1].get("content") if said else ""
    return content if isinstance(content, str) else ""


def model(never: asyncio.Event) -> Any:
    def answer(body: dict[str, Any]) -> Reply:
        if any(t["function"]["name"] == "save_memory" for t in body.get("tools") or []):
            return tool_call("save_memory", history_entry="A first day.")
        said = last_user_text(body)
        if said.endswith(HELD):
            return gate(never, text("Too late."))
        for question, reply in ANSWERS.items():
            if said.endswith(question):
                return text(reply)
        return text(f"(unexpected: {said!r})")

    return answer


async def run_cli(home: Path, *args: str) -> tuple[int, str]:
    """A `clawgate ...` command as typed in a terminal: (exit code, what it showed)."""
    terminal = await Terminal().start(home, *args)
    try:
        return await terminal.exit_code(REPLY_TIMEOUT), terminal.seen
    finally:
        await terminal.close()


@asynccontextmanager
async def gateway(home: Path) -> AsyncIterator[ClawgateProcess]:
    """`clawgate gateway` with no flags: the config onboard wrote under ~/.clawgate."""
    async with ClawgateProcess(home, "gateway") as running:
        await running.wait_for_log("gateway running", START_TIMEOUT)
        yield running
        running.send_signal(signal.SIGTERM)
        assert await running.wait(EXIT_TIMEOUT) == 0, running.stderr


async def onboard(home: Path, fake_llm: FakeLLM) -> str:
    """Answers onboard's questions as a newcomer would; returns its closing advice."""
    term = await Terminal().start(home, "onboard")
    try:
        await term.expect(r"Model, as provider/name.*: ")
        term.type("openai/fake-model")
        await term.expect(r"API base URL.*: ")
        term.type(fake_llm.url)
        await term.expect(r"API key \(input hidden.*: ")
        term.type("sk-first-day")
        await term.expect(r"model: openai/fake-model answered")
        await term.expect(r"Telegram bot token.*: ")
        term.type(TOKEN)
        await term.expect(r"telegram: getMe ok: @claw_test_bot")
        await term.expect(r"Discord bot token.*: ")
        term.type("")  # skipped
        advice = await term.expect(r"Start the gateway:(.|\n)*pairing approve CODE --owner")
        assert await term.exit_code() == 0, term.seen
    finally:
        await term.close()
    assert "sk-first-day" not in term.seen, "the key was echoed"
    return advice


async def test_the_first_day(tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram) -> None:
    # The README's quick start is this test's first two steps.
    assert quick_start_steps() == ["onboard", "gateway"]
    home = tmp_path
    never = asyncio.Event()  # the held reply is never released
    fake_llm.handler = model(never)
    config_path = before_onboard(home, telegram)

    # 1. Onboard, asked in a terminal.
    advice = await onboard(home, fake_llm)
    assert re.search(r"`\S*clawgate gateway`", advice), advice
    saved = tomllib.loads(config_path.read_text())
    assert saved["agent"]["model"] == "openai/fake-model"
    assert saved["channels"]["telegram"]["enabled"] is True
    assert not saved["channels"].get("discord", {}).get("enabled")

    async with gateway(home) as first:
        # 2-3. The newcomer writes first and follows the bot's own instructions.
        telegram.user_says(NEWCOMER, "hello", username="newcomer")
        pairing = (await telegram.next_message(NEWCOMER, timeout=REPLY_TIMEOUT))["text"]
        # The README's install leaves clawgate in .venv/bin, not on PATH: the bot names the
        # path the gateway runs from, so the line works as pasted.
        [command] = re.findall(r"^\S*clawgate pairing approve .*$", pairing, re.MULTILINE)
        assert command.startswith(f"{CLAWGATE} pairing approve "), command
        code, shown = await run_cli(home, *command.split()[1:])
        assert code == 0, shown
        assert f"approved telegram user {NEWCOMER} (@newcomer) as an owner" in shown
        told = await telegram.next_message(NEWCOMER, timeout=REPLY_TIMEOUT)
        assert told["text"] == "You are now the owner of this assistant. Send your message again."

        # 4. The owner is answered by the model.
        telegram.user_says(NEWCOMER, "what can you do?", username="newcomer")
        answer = await telegram.next_message(NEWCOMER, timeout=REPLY_TIMEOUT)
        assert answer["text"] == "I can read, write and remember."

        # 5. A group nobody allowed: the mention is logged with the id to allow.
        telegram.user_says(
            GROUP,
            f"{MENTION} is this thing on?",  # never answered, not even after the allow
            user_id=MEMBER,
            first_name="Bob",
            chat_type="supergroup",
        )
        logged = await first.wait_for_log(f"mentioned in group {GROUP}", REPLY_TIMEOUT)
        assert f"clawgate groups allow {GROUP}" in logged
    assert telegram.messages_to(GROUP) == [], "a group not allowed is not answered"

    code, listed = await run_cli(home, "groups")
    assert code == 0, listed
    assert re.search(rf"telegram\W+{GROUP}\W.*Bob \(id {MEMBER}\)", listed), listed
    code, shown = await run_cli(home, "groups", "allow", str(GROUP))
    assert code == 0, shown
    assert f"added {GROUP} to [channels.telegram] group_allow" in shown
    assert "restart the gateway to apply it" in shown, "which the next step does"

    async with gateway(home):
        telegram.user_says(
            GROUP,
            f"{MENTION} anyone here?",
            user_id=MEMBER,
            first_name="Bob",
            chat_type="supergroup",
        )
        hello = await telegram.next_message(GROUP, timeout=REPLY_TIMEOUT)
        assert hello["text"] == "Hello, group."

        # 6. A member may not switch the owner's model.
        asked = len(fake_llm.requests)
        telegram.user_says(
            GROUP,
            "/model openai/expensive",
            user_id=MEMBER,
            first_name="Bob",
            chat_type="supergroup",
        )
        refusal = await telegram.next_message(GROUP, timeout=REPLY_TIMEOUT)
        assert refusal["text"] == "Only the owner can change the model here."
        assert len(fake_llm.requests) == asked, "the refused switch was not checked live"

        # 7. The terminal beside the gateway (it holds the workspace lock, so the terminal
        # talks through its control socket): a slow turn cancelled with /stop.
        terminal = await Terminal().start(home, "agent")
        try:
            await terminal.expect(r"you> ", REPLY_TIMEOUT)
            held = len(fake_llm.requests)
            terminal.type(HELD)
            await fake_llm.wait_for_requests(held + 1, timeout=REPLY_TIMEOUT)
            terminal.type("/stop")
            await terminal.expect(r"Stopped\.", REPLY_TIMEOUT)
            await terminal.expect(r"you> ", REPLY_TIMEOUT)
            terminal.keys("\x04")  # Ctrl-D quits
            assert await terminal.exit_code(EXIT_TIMEOUT) == 0, terminal.seen
        finally:
            await terminal.close()
        assert "Too late." not in terminal.seen
    session = home / ".clawgate" / "workspace" / "sessions" / "cli_default.jsonl"
    said = [json.loads(line) for line in session.read_text(encoding="utf-8").splitlines()]
    said = [(r["role"], r["content"]) for r in said if "role" in r]
    assert said == [("user", HELD)], "the stopped turn left no reply behind"
    assert fake_llm.unscripted == 0
    assert not any("(unexpected" in m["text"] for m in telegram.sent), telegram.sent


# -- Issue 35: onboard accounts for every answer, stops at Ctrl-C, asks nothing on day two --

WRONG_KEY = "The model provider rejected the API key"


async def model_answers(term: Terminal, fake_llm: FakeLLM, key: str) -> None:
    await term.expect(r"Model, as provider/name.*: ")
    term.type("openai/fake-model")
    await term.expect(r"API base URL.*: ")
    term.type(fake_llm.url)
    await term.expect(r"API key \(input hidden.*: ")
    term.type(key)


async def test_onboard_asks_again_as_often_as_asked_and_sums_up_every_answer(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    # Item 6: after the third failed check a "Y" dropped every answer without a word.
    config_path = before_onboard(tmp_path, telegram)
    fake_llm.script(*[error(401, "Incorrect API key provided")] * 3, text("ok"))
    term = await Terminal().start(tmp_path, "onboard")
    try:
        for attempt in range(3):
            await model_answers(term, fake_llm, f"sk-wrong-{attempt}")
            await term.expect(r"Try other model settings\? \[Y/n\]: ")
            term.type("y")
        await model_answers(term, fake_llm, "sk-right")
        await term.expect(r"model: openai/fake-model answered")
        await term.expect(r"Telegram bot token.*: ")
        term.type("654321:not-the-token")
        await term.expect(r"Try another token\? \[Y/n\]: ")
        term.type("n")
        await term.expect(r"Save these telegram settings anyway\? \[y/N\]: ")
        term.type("")
        await term.expect(r"Discord bot token.*: ")
        term.type("")
        assert await term.exit_code(REPLY_TIMEOUT) == 0, term.seen
    finally:
        await term.close()
    seen = term.seen.replace("\r\n", "\n")
    assert seen.count(WRONG_KEY) == 3, "each failed check is shown once"
    assert "nothing is written" not in seen and "nothing was written" not in seen
    assert f"saved in {config_path}:\n  agent.model = openai/fake-model\n" in seen
    assert "not saved:\n  telegram: not saved (its check failed: the token was rejected" in seen
    assert "Ready to chat in the terminal" in seen
    saved = tomllib.loads(config_path.read_text())
    assert saved["agent"]["api_key"] == "sk-right"
    assert not saved["channels"]["telegram"].get("enabled")


async def test_onboard_never_calls_a_rejected_key_ready(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config_path = before_onboard(tmp_path, telegram)
    fake_llm.script(error(401, "Incorrect API key provided"))
    term = await Terminal().start(tmp_path, "onboard")
    try:
        await model_answers(term, fake_llm, "sk-wrong")
        await term.expect(r"Try other model settings\? \[Y/n\]: ")
        term.type("n")
        await term.expect(r"Save these model settings anyway\? \[y/N\]: ")
        term.type("y")
        await term.expect(r"Telegram bot token.*: ")
        term.type(TOKEN)
        await term.expect(r"telegram: getMe ok")
        await term.expect(r"Discord bot token.*: ")
        term.type("")
        assert await term.exit_code(REPLY_TIMEOUT) == 0, term.seen
    finally:
        await term.close()
    seen = term.seen.replace("\r\n", "\n")
    asked, summary = seen.split("saved although the check failed:")
    assert asked.count(WRONG_KEY) == 1, "the failed check is shown once"
    assert WRONG_KEY in summary
    assert "saved although the check failed:\n  model: saved, but its check failed: " in seen
    assert "Not ready: a saved setting failed its check" in seen
    assert "Ready" not in seen.replace("Not ready", "")
    assert tomllib.loads(config_path.read_text())["agent"]["api_key"] == "sk-wrong"


async def test_ctrl_c_at_a_yes_no_question_stops_onboard(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config_path = before_onboard(tmp_path, telegram)
    before = config_path.read_text()
    fake_llm.script(error(401, "Incorrect API key provided"))
    term = await Terminal().start(tmp_path, "onboard")
    try:
        await model_answers(term, fake_llm, "sk-wrong")
        await term.expect(r"Try other model settings\? \[Y/n\]: ")
        term.keys("\x03")
        assert await term.exit_code(EXIT_TIMEOUT) != 0, term.seen
    finally:
        await term.close()
    assert config_path.read_text() == before, "stopped before the answers were saved"


async def test_day_two_onboard_asks_nothing_when_the_config_works(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    fake_llm.handler = lambda body: text("ok")
    config_path = before_onboard(tmp_path, telegram)
    await onboard(tmp_path, fake_llm)
    written = config_path.read_text()
    code, shown = await run_cli(tmp_path, "onboard")  # `onboard && gateway`, the next day
    assert code == 0, shown
    assert "Model, as provider/name" not in shown
    assert "is complete and its checks pass: nothing to ask" in shown
    assert re.search(r"Start the gateway with `\S*clawgate gateway`", shown), shown
    assert config_path.read_text() == written


async def test_a_discord_stranger_is_listed_by_name_and_told_once_approved(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    # Issue 35: Discord pairing requests had no username, every start warned about the voice
    # libraries (PyNaCl, davey) the bot never uses, and approving told the person nothing.
    async with FakeDiscord() as discord:
        home = GatewayHome(tmp_path, discord, fake_llm)
        stranger = discord.dm_channel(STRANGER, "zoe")
        async with home.gateway() as running:
            await running.wait_for_log(DISCORD_READY, START_TIMEOUT)
            await discord.user_says(stranger, "hello?", author_id=STRANGER, username="zoe")
            await wait_until(lambda: home.replies(stranger), timeout=REPLY_TIMEOUT)
            [pairing] = home.replies(stranger)
            code, listed = await run_cli(home.home, "--config", str(home.config), "pairing", "list")
            assert code == 0, listed
            assert re.search(rf"discord\W+{STRANGER}\W+zoe\W", listed), listed
            [command] = re.findall(r"^\S*clawgate pairing approve .*$", pairing, re.MULTILINE)
            args = ["--config", str(home.config), *command.split()[1:]]
            code, shown = await run_cli(home.home, *args)
            assert code == 0, shown
            await wait_until(lambda: len(home.replies(stranger)) == 2, timeout=REPLY_TIMEOUT)
            running.send_signal(signal.SIGTERM)
            assert await running.wait(EXIT_TIMEOUT) == 0, running.stderr
    assert home.replies(stranger)[1] == (
        "You can chat with this assistant now. Send your message again."
    )
    assert "voice will NOT be supported" not in running.stderr


# -- Round 3 (issue 35): the model settings people use, one config loader, doctor's keys ---


async def output(home: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """`clawgate *args` run to the end without a terminal: (exit code, stdout and stderr)."""
    child = await start_clawgate(home, *args, env=env, merge_stderr=True)
    try:
        raw, _ = await asyncio.wait_for(child.communicate(), REPLY_TIMEOUT)
    finally:
        if child.returncode is None:  # timed out: a command that should have ended
            child.kill()
            await child.wait()
    assert child.returncode is not None
    return child.returncode, raw.decode(errors="replace")


# OpenAI's reasoning models go through litellm (agent/llm/routing.py): the child is forked
# from a zygote that has imported it (~4 s of CPU a child otherwise).
THROUGH_LITELLM = {forked.LITELLM: "1"}


def refuses_temperature(body: dict[str, Any]) -> Reply:
    """A provider whose every model takes only its own temperature, as OpenAI's reasoning
    models do; litellm refuses gpt-5's and o3-mini's other values before sending."""
    sent = body.get("temperature")
    return text("ok") if sent in (None, 1) else unsupported_temperature(sent)


@pytest.mark.long
async def test_current_openai_models_pass_onboard_and_answer(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = refuses_temperature
    code, shown = await output(
        tmp_path,
        "onboard",
        "--yes",
        "--model",
        "openai/gpt-5",
        "--api-base",
        fake_llm.url,
        "--api-key",
        "sk-first-day",
        env=THROUGH_LITELLM,
    )
    assert code == 0, shown
    assert "agent.model = openai/gpt-5" in shown
    code, shown = await output(tmp_path, "agent", "-m", "hello", env=THROUGH_LITELLM)
    assert code == 0, shown
    assert "ok" in shown
    assert all("temperature" not in body for body in fake_llm.requests)


async def test_a_temperature_the_model_refuses_names_the_setting(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = refuses_temperature
    config = write_config(
        tmp_path, agent={**fake_model(fake_llm, 60), "model": "openai/o3-mini", "temperature": 0.7}
    )
    code, shown = await output(
        tmp_path, "--config", str(config), "agent", "-m", "hi", env=THROUGH_LITELLM
    )
    assert code == 1, shown
    assert "agent.temperature" in shown
    assert "try again in a moment" not in shown
    assert "Traceback" not in shown


async def test_onboard_checks_with_the_environment_overrides(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = lambda body: text("ok")
    with socket.socket() as sock:  # a loopback port nothing listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    overrides = {"CLAWGATE_AGENT__API_KEY": "sk-from-env", "CLAWGATE_AGENT__API_BASE": fake_llm.url}
    code, shown = await output(
        tmp_path,
        "onboard",
        "--yes",
        "--model",
        "openai/fake-model",
        "--api-base",
        dead,  # the file's value; the environment's wins, as it does for the gateway
        env=overrides,
    )
    assert code == 0, shown
    assert "No API key" not in shown
    assert len(fake_llm.requests) == 1
    saved = tomllib.loads((tmp_path / ".clawgate" / "config.toml").read_text())
    assert "api_key" not in saved["agent"], "the key stays in the environment"


async def test_doctor_refuses_a_cloud_model_without_a_key(tmp_path: Path) -> None:
    async def onboard_then_doctor(
        home: Path, *flags: str, env: dict[str, str] | None = None
    ) -> str:
        code, shown = await output(home, "onboard", "--yes", "--no-check", *flags)
        assert code == 0, shown
        code, shown = await output(home, "doctor", env=env)
        assert code == (1 if "✗" in shown else 0), shown
        return shown

    shown = await onboard_then_doctor(tmp_path, "--model", "openai/gpt-4o-mini")
    [line] = [line for line in shown.splitlines() if "gpt-4o-mini" in line]
    assert line.startswith("✗") and "no API key" in line, shown
    assert "OPENAI_API_KEY" in line and "CLAWGATE_AGENT__API_KEY" in line

    shown = await onboard_then_doctor(tmp_path, env={"OPENAI_API_KEY": "sk-provider"})
    assert "✗" not in shown, shown
    assert re.search(r"✓ model openai/gpt-4o-mini .*OPENAI_API_KEY", shown), shown

    # A variable named by api_key_env and not set: every line about the key names it.
    shown = await onboard_then_doctor(
        tmp_path, "--api-key-env", "MY_OPENAI_KEY", env={"OPENAI_API_KEY": "sk-provider"}
    )
    lines = [line for line in shown.splitlines() if "api key" in line.lower()]
    assert any(line.startswith("✗") for line in lines), shown
    assert all("MY_OPENAI_KEY" in line for line in lines), shown

    # A local model needs none.
    local = tmp_path / "local"
    local.mkdir()
    shown = await onboard_then_doctor(local, "--model", "ollama/llama3.1")
    assert "✗" not in shown, shown


async def test_the_gateway_does_not_start_without_the_models_key(
    tmp_path: Path, telegram: FakeTelegram
) -> None:
    before_onboard(tmp_path, telegram)
    flags = ("--model", "openai/gpt-4o-mini", "--telegram-token", TOKEN)
    code, shown = await output(tmp_path, "onboard", "--yes", "--no-check", *flags)
    assert code == 0, shown
    code, shown = await output(tmp_path, "gateway")
    assert code == 2, shown
    assert "not ready to start" in shown
    assert "agent.model openai/gpt-4o-mini: no API key" in shown
    assert "OPENAI_API_KEY" in shown


async def test_a_model_without_its_provider_is_asked_again(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    code, shown = await output(tmp_path, "onboard", "--yes", "--model", "gpt-4o-mini")
    assert code == 2, shown
    assert "'gpt-4o-mini' names no provider: write it as provider/name" in shown
    fake_llm.handler = lambda body: text("ok")
    term = await Terminal().start(tmp_path, "onboard")
    try:
        await term.expect(r"Model, as provider/name.*: ")
        term.type("gpt-4o-mini")
        await term.expect(r"names no provider: write it as provider/name")
        await term.expect(r"Model, as provider/name: ")
        term.type("openai/fake-model")
        await term.expect(r"API base URL.*: ")
        term.type(fake_llm.url)
        await term.expect(r"API key \(input hidden.*: ")
        term.type("sk-first-day")
        await term.expect(r"model: openai/fake-model answered")
        await term.expect(r"Telegram bot token.*: ")
        term.type("")
        await term.expect(r"Discord bot token.*: ")
        term.type("")
        assert await term.exit_code() == 0, term.seen
    finally:
        await term.close()
    assert [body["model"] for body in fake_llm.requests] == ["fake-model"]


async def test_a_blank_message_costs_no_model_call(tmp_path: Path, fake_llm: FakeLLM) -> None:
    config = write_config(tmp_path, agent=fake_model(fake_llm))
    code, shown = await output(tmp_path, "--config", str(config), "agent", "-m", "  \t  ")
    assert code == 0, shown
    assert "Traceback" not in shown and "Error" not in shown, shown
    assert fake_llm.requests == []


async def test_a_dashboard_port_in_use_names_the_setting(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = write_config(
            tmp_path,
            agent=fake_model(fake_llm),
            telegram=fake_telegram(telegram, (NEWCOMER,)),
            extra=f"[dashboard]\nport = {port}",
        )
        async with ClawgateProcess(tmp_path, "--config", str(config), "gateway") as running:
            line = await running.wait_for_log("dashboard: cannot listen", START_TIMEOUT)
            await running.wait_for_log("gateway running", START_TIMEOUT)
            running.send_signal(signal.SIGTERM)
            assert await running.wait(EXIT_TIMEOUT) == 0, running.stderr
    assert f"127.0.0.1:{port}" in line
    assert "set [dashboard] port (or CLAWGATE_DASHBOARD__PORT) to a free one" in line
