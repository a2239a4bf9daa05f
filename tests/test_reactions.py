"""Status reactions through the real python-telegram-bot and discord.py against the fakes:
👀 while a turn runs, then 👍 / 😱 on Telegram (whose list has no ✅ / ⚠️) and ✅ / ⚠️ on
Discord; a chat that refuses reactions is tried once and logged once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from clawgate.kernel.config import AgentConfig, ChannelsConfig, Config
from tests.discord_world import OWNER as DISCORD_OWNER
from tests.discord_world import World
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import FakeLLM, error, gate, text
from tests.fakes.telegram import FakeTelegram
from tests.harness import make_config, wait_until
from tests.telegram_world import GROUP, MENTION, OWNER, TelegramGateway, telegram_config

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


@pytest.fixture
def config(tmp_path: Path, agent_config: AgentConfig, telegram: FakeTelegram) -> Config:
    once = agent_config.model_copy(update={"max_retries": 0})
    channels = ChannelsConfig(telegram=telegram_config(telegram, reactions=True))
    return make_config(tmp_path, once, channels=channels)


@pytest.fixture
async def discord_fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


def said(telegram: FakeTelegram, chat: int, words: str, **options: object) -> int:
    """The user's message; its Telegram message id."""
    telegram.user_says(chat, words, **options)  # type: ignore[arg-type]
    return int(telegram.updates[-1]["message"]["message_id"])


async def test_telegram_marks_eyes_while_running_then_thumbs_up(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    release = asyncio.Event()
    fake_llm.script(gate(release, text("Done.")))
    async with TelegramGateway(config):
        asked = said(telegram, OWNER, "do it")
        await wait_until(lambda: telegram.reactions.get((OWNER, asked)) == ["👀"])
        release.set()
        assert (await telegram.next_message(OWNER))["text"] == "Done."
        await wait_until(lambda: telegram.reactions.get((OWNER, asked)) == ["👍"])


async def test_telegram_marks_a_failed_turn_with_a_scream(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    fake_llm.script(error(400, "the model broke"))
    async with TelegramGateway(config):
        asked = said(telegram, OWNER, "do it")
        await telegram.next_message(OWNER)
        await wait_until(lambda: telegram.reactions.get((OWNER, asked)) == ["😱"])


async def test_a_telegram_group_without_reactions_is_tried_once_and_logged_once(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    telegram.reactions_refused.add(GROUP)
    fake_llm.script(text("One."), text("Two."))
    caplog.set_level(logging.INFO, logger="clawgate.channels.reactions")
    async with TelegramGateway(config):
        for words in ("first", "second"):
            said(telegram, GROUP, f"{MENTION} {words}", chat_type="supergroup")
            await telegram.next_message(GROUP)
    assert telegram.calls["setMessageReaction"] == 1
    assert len([r for r in caplog.records if "no reactions" in r.getMessage()]) == 1


async def test_discord_marks_eyes_then_a_check_and_a_warning_on_failure(
    discord_fake: FakeDiscord, tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    once = agent_config.model_copy(update={"max_retries": 0})
    world = World(discord_fake, tmp_path, once, reactions=True)
    release = asyncio.Event()
    fake_llm.script(gate(release, text("Done.")), error(400, "the model broke"))
    dm = world.owner_dm
    async with world.running():
        first = await discord_fake.user_says(dm, "do it", author_id=DISCORD_OWNER, username="ann")
        await wait_until(lambda: discord_fake.reactions.get((dm, first["id"])) == {"👀"})
        release.set()
        await discord_fake.next_message(dm)
        await wait_until(lambda: discord_fake.reactions.get((dm, first["id"])) == {"✅"})
        second = await discord_fake.user_says(dm, "again", author_id=DISCORD_OWNER, username="ann")
        await discord_fake.next_message(dm)
        await wait_until(lambda: discord_fake.reactions.get((dm, second["id"])) == {"⚠️"})


async def test_a_discord_channel_without_permission_is_tried_once(
    discord_fake: FakeDiscord, tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    world = World(discord_fake, tmp_path, agent_config, reactions=True)
    discord_fake.reactions_refused.add(world.general)
    fake_llm.script(text("One."), text("Two."))
    async with world.running():
        for words in ("first", "second"):
            await discord_fake.user_says(
                world.general,
                words,
                author_id="310000000000000003",
                username="bob",
                mentions_bot=True,
            )
            await discord_fake.next_message(world.general)
    assert len([r for r in discord_fake.requests if "/reactions/" in r]) == 1
