"""Owner-first pairing as a newcomer meets it: the real gateway and python-telegram-bot
against FakeTelegram, the stranger's reply read off the fake, and `clawgate pairing` run
through the real CLI, as the person at the terminal would."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from clawgate.channels.pairing import PairingStore
from clawgate.kernel.config import AgentConfig, ChannelsConfig, Config, TelegramConfig
from tests.fakes.llm import FakeLLM, text
from tests.fakes.telegram import FakeTelegram
from tests.harness import make_config, wait_until
from tests.telegram_world import OWNER, TelegramGateway, telegram_config

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

Cli = Callable[..., Result]


def gateway_config(
    tmp_path: Path, agent_config: AgentConfig, telegram: FakeTelegram, owners: list[str]
) -> Config:
    channels = ChannelsConfig(telegram=telegram_config(telegram, allow_from=owners))
    return make_config(tmp_path, agent_config, channels=channels)


def cli_for(tmp_path: Path, config: Config, monkeypatch: pytest.MonkeyPatch) -> Cli:
    """`clawgate --config <file naming the same data dir and owners> ...`, in process (call
    it through asyncio.to_thread while a gateway runs: it must not stall the bot's polling)."""
    from clawgate.gateway.cli import app

    for name in list(os.environ):
        if name.startswith("CLAWGATE_"):
            monkeypatch.delenv(name)
    path = tmp_path / "cli.toml"
    bot = config.channels.telegram
    allow = ", ".join(f'"{entry}"' for entry in bot.allow_from)
    # The bot's own settings too, as the owner's config has them: approving tells the person.
    token = bot.token.get_secret_value() if bot.token is not None else ""
    path.write_text(
        f'workspace = "{config.workspace}"\ndata_dir = "{config.data_dir}"\n'
        f"[channels.telegram]\nenabled = true\nallow_from = [{allow}]\n"
        f'token = "{token}"\nbase_url = "{bot.base_url}"\nbase_file_url = "{bot.base_file_url}"\n'
    )
    runner = CliRunner()

    def run(*args: str) -> Result:
        return runner.invoke(app, ["--config", str(path), *args])

    return run


def command_in(reply: str) -> list[str]:
    """The `clawgate ...` line the bot told the stranger to have run, as argv."""
    [line] = [line for line in reply.splitlines() if line.startswith("clawgate ")]
    return shlex.split(line)[1:]


def code_in(reply: str) -> str:
    found = re.search(r"Pairing code: (\w{8})", reply)
    assert found is not None, reply
    return found.group(1)


async def test_a_stranger_following_the_bots_instructions_becomes_the_owner(
    tmp_path: Path,
    agent_config: AgentConfig,
    telegram: FakeTelegram,
    fake_llm: FakeLLM,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = gateway_config(tmp_path, agent_config, telegram, owners=[])
    cli = cli_for(tmp_path, config, monkeypatch)
    before = cli("pairing", "list").stdout
    assert "telegram has no owner yet: send the bot a private message" in before
    async with TelegramGateway(config):
        telegram.user_says(4242, "hello", username="newcomer")
        reply = (await telegram.next_message(4242))["text"]
        assert "no owner yet" in reply and "owner" in reply.splitlines()[-3]

        listed = await asyncio.to_thread(cli, "pairing", "list")
        assert listed.exit_code == 0, listed.output
        assert "telegram has no owner yet" in listed.stdout
        assert "clawgate pairing approve CODE` makes that person the owner" in listed.stdout

        approved = await asyncio.to_thread(cli, *command_in(reply))
        assert approved.exit_code == 0, approved.output
        assert "approved telegram user 4242 (@newcomer) as an owner" in approved.stdout
        # Issue 35: the first message got the code, not an answer; nothing said so.
        told = await telegram.next_message(4242)
        assert told["text"] == "You are now the owner of this assistant. Send your message again."
        assert 'told them: "You are now the owner' in approved.stdout

        fake_llm.script(text("Hello, owner."))
        telegram.user_says(4242, "who am I to you?", username="newcomer")
        answer = await telegram.next_message(4242, timeout=60)
    assert answer["text"] == "Hello, owner."
    assert "(trust: owner)" in (fake_llm.last_system_prompt() or "")


def test_the_first_approval_defaults_to_owner_and_says_so(
    tmp_path: Path, agent_config: AgentConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = make_config(tmp_path, agent_config)
    cli = cli_for(tmp_path, config, monkeypatch)
    store = PairingStore(config.data_dir / "pairing.json")
    first, second, third = (store.request("telegram", uid, None) or "" for uid in "123")

    plain = cli("pairing", "approve", first, "--allowed")
    assert plain.exit_code == 0, plain.output
    assert plain.stdout.strip() == "approved telegram user 1 as an allowed user; they can chat now"

    owner = cli("pairing", "approve", second)
    assert owner.exit_code == 0, owner.output
    assert owner.stdout.strip() == (
        "approved telegram user 2 as the owner (the first approval makes the owner; "
        "`clawgate pairing demote 2` makes them a plain user); they can chat now"
    )
    assert "has no owner" not in cli("pairing", "list").stdout

    # With an owner in place the next approval is a plain user again.
    later = cli("pairing", "approve", third)
    assert later.stdout.strip() == "approved telegram user 3 as an allowed user; they can chat now"
    both = cli("pairing", "approve", "ABCDEFGH", "--owner", "--allowed")
    assert both.exit_code == 2 and "exclude each other" in both.stderr


def test_an_owner_in_the_config_means_approvals_stay_plain(
    tmp_path: Path, agent_config: AgentConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    channels = ChannelsConfig(telegram=TelegramConfig(allow_from=[str(OWNER)]))
    config = make_config(tmp_path, agent_config, channels=channels)
    cli = cli_for(tmp_path, config, monkeypatch)
    code = PairingStore(config.data_dir / "pairing.json").request("telegram", "7", None) or ""
    assert "no owner" not in cli("pairing", "list").stdout
    result = cli("pairing", "approve", code)
    assert result.stdout.strip() == "approved telegram user 7 as an allowed user; they can chat now"


def test_a_used_code_says_who_it_let_in_and_how_to_promote(
    tmp_path: Path, agent_config: AgentConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = make_config(tmp_path, agent_config)
    cli = cli_for(tmp_path, config, monkeypatch)
    store = PairingStore(config.data_dir / "pairing.json")
    code = store.request("telegram", "2002", "eve") or ""
    assert cli("pairing", "approve", code, "--allowed").exit_code == 0

    again = cli("pairing", "approve", code, "--owner")
    assert again.exit_code == 1
    assert again.stderr.strip() == (
        f"clawgate: code {code} was already used: telegram user 2002 (@eve) is already "
        "approved as an allowed user; to make them owner: clawgate pairing promote 2002"
    )
    assert cli("pairing", "promote", "2002").exit_code == 0
    owned = cli("pairing", "approve", code.lower())
    assert owned.stderr.strip().endswith("is already approved as an owner")


def test_promote_and_demote_by_id_or_username(
    tmp_path: Path, agent_config: AgentConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = make_config(tmp_path, agent_config)
    cli = cli_for(tmp_path, config, monkeypatch)
    store = PairingStore(config.data_dir / "pairing.json")
    for channel in ("telegram", "discord"):
        store.approve(store.request(channel, "2002", "Eve") or "", owner=False)

    promoted = cli("pairing", "promote", "@eve", "--channel", "discord")
    assert promoted.exit_code == 0, promoted.output
    assert promoted.stdout.strip() == "discord user 2002 (@Eve) is now an owner"
    assert store.lookup("discord", "2002").owner  # type: ignore[union-attr]
    assert not store.lookup("telegram", "2002").owner  # type: ignore[union-attr]

    demoted = cli("pairing", "demote", "2002")
    assert demoted.exit_code == 0, demoted.output
    assert sorted(demoted.stdout.strip().splitlines()) == [
        "discord user 2002 (@Eve) is now an allowed user",
        "telegram user 2002 (@Eve) is now an allowed user",
    ]
    assert not any(a.owner for a in store.approved())

    missing = cli("pairing", "promote", "9999")
    assert missing.exit_code == 1
    assert missing.stderr.startswith("clawgate: no approved user 9999 (approve their pairing")


def test_deny_and_clear_drop_pending_requests(
    tmp_path: Path, agent_config: AgentConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = make_config(tmp_path, agent_config)
    cli = cli_for(tmp_path, config, monkeypatch)
    store = PairingStore(config.data_dir / "pairing.json")
    codes = [store.request("telegram", uid, None) or "" for uid in ("1", "2", "3")]
    discord = store.request("discord", "4", "dan") or ""

    denied = cli("pairing", "deny", codes[0].lower())
    assert denied.exit_code == 0, denied.output
    assert denied.stdout.strip() == f"denied telegram user 1 (code {codes[0]})"
    assert {p.code for p in store.pending()} == {*codes[1:], discord}
    assert cli("pairing", "deny", codes[0]).exit_code == 1  # gone, nothing else touched

    cleared = cli("pairing", "clear", "--channel", "telegram")
    assert cleared.exit_code == 0, cleared.output
    assert len(cleared.stdout.strip().splitlines()) == 2
    assert [p.code for p in store.pending()] == [discord]
    assert cli("pairing", "clear").stdout.strip() == "dropped discord user 4 (@dan) (code " + (
        discord + ")"
    )
    assert cli("pairing", "clear").stdout.strip() == "no pending pairing requests"
    # A denied person writing again simply gets a new code.
    assert store.request("telegram", "1", None) not in (None, codes[0])


async def test_a_revoked_person_gets_a_fresh_code_on_their_next_message(
    tmp_path: Path,
    agent_config: AgentConfig,
    telegram: FakeTelegram,
    fake_llm: FakeLLM,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = gateway_config(tmp_path, agent_config, telegram, owners=[str(OWNER)])
    cli = cli_for(tmp_path, config, monkeypatch)
    async with TelegramGateway(config):
        telegram.user_says(2002, "hello", username="eve")
        first = code_in((await telegram.next_message(2002))["text"])
        assert (await asyncio.to_thread(cli, "pairing", "approve", first)).exit_code == 0
        welcome = (await telegram.next_message(2002))["text"]
        assert welcome == "You can chat with this assistant now. Send your message again."
        fake_llm.script(text("Hi Eve."))
        telegram.user_says(2002, "thanks", username="eve")
        assert (await telegram.next_message(2002, timeout=60))["text"] == "Hi Eve."

        assert (await asyncio.to_thread(cli, "pairing", "revoke", "@eve")).exit_code == 0
        telegram.user_says(2002, "still there?", username="eve")
        fresh = (await telegram.next_message(2002))["text"]
    assert code_in(fresh) != first
    assert f"clawgate pairing approve {code_in(fresh)}" in fresh
    assert len(fake_llm.requests) == 1


async def test_the_cap_never_silences_anyone_while_there_is_no_owner(
    tmp_path: Path,
    agent_config: AgentConfig,
    telegram: FakeTelegram,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = gateway_config(tmp_path, agent_config, telegram, owners=[])
    cli = cli_for(tmp_path, config, monkeypatch)
    with caplog.at_level(logging.INFO, logger="clawgate.channels.access"):
        async with TelegramGateway(config):
            for stranger in (3001, 3002, 3003):
                telegram.user_says(stranger, "let me in")
                await telegram.next_message(stranger)
            # Three strangers got there first; the real owner still gets a code.
            telegram.user_says(4242, "hello, it's me")
            reply = (await telegram.next_message(4242))["text"]
            assert (await asyncio.to_thread(cli, *command_in(reply))).exit_code == 0
            assert "Send your message again" in (await telegram.next_message(4242))["text"]

            # Now there is an owner and three pending codes: the next strangers still get a
            # code (the oldest pending ones make room), and the owner hears of it once.
            telegram.user_says(3004, "me too")
            assert code_in((await telegram.next_message(3004))["text"])
            notice = (await telegram.next_message(4242))["text"]
            telegram.user_says(3005, "and me")
            assert code_in((await telegram.next_message(3005))["text"])
            await wait_until(lambda: "3005" in caplog.text)
    assert "clawgate pairing list" in notice
    assert len(telegram.messages_to(4242)) == 3  # pairing reply, welcome, the one notice
    assert not [r for r in caplog.records if "already pending" in r.getMessage()]
