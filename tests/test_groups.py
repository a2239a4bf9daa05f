"""Finding a group's id: a mention in a group that is not in group_allow is logged and
remembered, `clawgate groups` lists it, `clawgate groups allow` puts it in the config.
The real gateway and client libraries against FakeTelegram / FakeDiscord."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from clawgate.kernel.config import AgentConfig, ChannelsConfig, Config, load_config
from tests.discord_world import World
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import FakeLLM, text
from tests.fakes.telegram import FakeTelegram
from tests.harness import make_config, wait_until
from tests.telegram_world import GROUP, MENTION, TelegramGateway, telegram_config

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

UNKNOWN = -100777
CONFIG_TEXT = """\
# my clawgate setup
workspace = "{workspace}"
data_dir = "{data_dir}"

[channels.telegram]
# groups the bot answers in
group_allow = [{group}]  # the family chat
"""


@pytest.fixture
async def discord_fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


def cli_for(path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    from clawgate.gateway.cli import app

    for name in list(os.environ):
        if name.startswith("CLAWGATE_"):
            monkeypatch.delenv(name)
    runner = CliRunner()

    def run(*args: str) -> Result:
        return runner.invoke(app, ["--config", str(path), *args])

    return run


def seen(config: Config) -> list[dict]:
    path = config.data_dir / "groups.json"
    return json.loads(path.read_text())["groups"] if path.exists() else []


def row_of(table: str, group_id: str) -> list[str]:
    [row] = [line for line in table.splitlines() if f" {group_id} " in line]
    return [cell.strip() for cell in row.split("│")[1:-1]]


async def test_an_unknown_group_is_logged_listed_and_allowed_through_the_config(
    tmp_path: Path,
    agent_config: AgentConfig,
    telegram: FakeTelegram,
    fake_llm: FakeLLM,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    channels = ChannelsConfig(telegram=telegram_config(telegram))
    config = make_config(tmp_path, agent_config, channels=channels)
    config_path = tmp_path / "config.toml"
    config_path.write_text(
        CONFIG_TEXT.format(workspace=config.workspace, data_dir=config.data_dir, group=GROUP)
    )
    cli = cli_for(config_path, monkeypatch)
    assert "no groups seen yet" in cli("groups").stdout

    with caplog.at_level(logging.INFO, logger="clawgate.channels"):
        async with TelegramGateway(config):
            telegram.user_says(-100888, "chatter, no mention", user_id=3003, chat_type="group")
            for _ in range(2):
                telegram.user_says(
                    UNKNOWN,
                    f"{MENTION} hello?",
                    user_id=3003,
                    first_name="Bob",
                    chat_type="supergroup",
                )
            await wait_until(lambda: len(seen(config)) == 1 and "-100777" in caplog.text)
            # The second mention is processed once this private message is.
            telegram.user_says(5005, "hi")
            await telegram.next_message(5005)
    logged = [r.getMessage() for r in caplog.records if "not in group_allow" in r.getMessage()]
    assert logged == [
        "telegram: mentioned in group -100777 (Team) by Bob (id 3003), which is not in "
        "group_allow; to let it in: clawgate groups allow -100777"
    ]
    [entry] = seen(config)
    assert entry["group_id"] == "-100777" and entry["mentioned_by"] == "Bob (id 3003)"
    assert fake_llm.requests == []

    listed = await asyncio.to_thread(cli, "groups")
    assert listed.exit_code == 0, listed.output
    cells = row_of(listed.stdout, "-100777")
    assert cells[:3] == ["telegram", "-100777", "Team"] and cells[4:] == ["Bob (id 3003)", "no"]

    allowed = await asyncio.to_thread(cli, "groups", "allow", "-100777")
    assert allowed.exit_code == 0, allowed.output
    assert "added -100777 to [channels.telegram] group_allow" in allowed.stdout
    written = config_path.read_text()
    assert "# my clawgate setup" in written and "# groups the bot answers in" in written
    assert "# the family chat" in written
    assert stat.S_IMODE(config_path.stat().st_mode) == 0o600
    assert load_config(config_path, environ={}).channels.telegram.group_allow == [
        str(GROUP),
        "-100777",
    ]
    again = await asyncio.to_thread(cli, "groups", "allow", "-100777")
    assert "already in group_allow" in again.stdout
    assert config_path.read_text() == written
    assert row_of(cli("groups").stdout, "-100777")[-1] == "yes"

    # Restarted with the edited group_allow, the group is served.
    served = config.model_copy(deep=True)
    served.channels.telegram.group_allow.append("-100777")
    fake_llm.script(text("Hello, group."))
    async with TelegramGateway(served):
        telegram.user_says(UNKNOWN, f"{MENTION} now?", user_id=3003, chat_type="supergroup")
        reply = await telegram.next_message(UNKNOWN, timeout=60)
    assert reply["text"] == "Hello, group."


def test_allow_needs_a_channel_for_a_group_never_seen(
    tmp_path: Path, agent_config: AgentConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = make_config(tmp_path, agent_config)
    config_path = tmp_path / "config.toml"
    config_path.write_text(f'workspace = "{config.workspace}"\ndata_dir = "{config.data_dir}"\n')
    cli = cli_for(config_path, monkeypatch)
    unseen = cli("groups", "allow", "-100999")
    assert unseen.exit_code == 2
    assert "has not mentioned the bot yet: add --channel telegram or discord" in unseen.stderr
    given = cli("groups", "allow", "4455", "--channel", "discord")
    assert given.exit_code == 0, given.output
    assert load_config(config_path, environ={}).channels.discord.group_allow == ["4455"]


async def test_a_discord_mention_in_another_server_is_recorded_with_its_guild(
    discord_fake: FakeDiscord,
    tmp_path: Path,
    agent_config: AgentConfig,
    caplog: pytest.LogCaptureFixture,
) -> None:
    world = World(discord_fake, tmp_path, agent_config)
    guild = discord_fake.add_guild("Elsewhere")
    other = discord_fake.add_text_channel(guild, "random")
    with caplog.at_level(logging.WARNING, logger="clawgate.channels"):
        async with world.running():
            await discord_fake.user_says(
                other, "hey bot", author_id="42", username="bob", mentions_bot=True
            )
            await wait_until(lambda: bool(seen(world.config)))
    [entry] = seen(world.config)
    assert entry["channel"] == "discord" and entry["group_id"] == other
    assert entry["guild_id"] == guild and entry["title"] == "Elsewhere #random"
    assert f"mentioned in group {other} (Elsewhere #random)" in caplog.text


async def test_an_allowed_group_mention_carries_the_chatter_before_it(
    tmp_path: Path, agent_config: AgentConfig, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    channels = ChannelsConfig(telegram=telegram_config(telegram, group_context=2))
    config = make_config(tmp_path, agent_config, channels=channels)
    fake_llm.script(text("Noon works."), text("Sure."))
    async with TelegramGateway(config):
        for user_id, name, said in (
            (3001, "Zed", "too old to be kept"),
            (3002, "Bob", "lunch at noon?"),
            (3003, "Carol", "I can't,\nmeeting"),
        ):
            telegram.user_says(
                GROUP, said, user_id=user_id, first_name=name, chat_type="supergroup"
            )
        telegram.user_says(GROUP, f"{MENTION} what do you think?", chat_type="supergroup")
        assert (await telegram.next_message(GROUP, timeout=60))["text"] == "Noon works."
        telegram.user_says(GROUP, f"{MENTION} and tomorrow?", chat_type="supergroup")
        assert (await telegram.next_message(GROUP))["text"] == "Sure."
    first, second = (
        [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
        for request in fake_llm.requests
    )
    assert first == (
        "[Ann] Earlier in this group (not addressed to you):\n"
        "> Bob: lunch at noon?\n> Carol: I can't,\n> Carol: meeting\n"
        f"{MENTION} what do you think?"
    )
    assert second == f"[Ann] {MENTION} and tomorrow?"
