"""Exec approval cards on Discord, through a real gateway and the fake Discord REST and
gateway: buttons under the card, a press as an interaction, the owner's alone counting."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from clawgate.kernel.config import AgentConfig, ToolsConfig
from tests.discord_world import MEMBER, OWNER, World
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import FakeLLM, text, tool_call

TIMEOUT = 20.0


@pytest.fixture
async def discord() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


async def test_a_discord_card_has_buttons_and_only_the_owners_press_runs_it(
    tmp_path: Path, discord: FakeDiscord, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    world = World(discord, tmp_path, agent_config, tools=ToolsConfig(exec_approval="risky"))
    fake_llm.script(tool_call("exec", command="touch from-discord.txt"), text("Done."))
    async with world.running():
        await discord.user_says(world.owner_dm, "touch it", author_id=OWNER, username="ann")
        card = await discord.next_message(world.owner_dm, timeout=TIMEOUT)
        labels = [b["label"] for row in card.components for b in row["components"]]
        assert labels == ["Allow once", "Allow for this session", "Deny"]
        assert "touch from-discord.txt" in card.content

        pressed = await discord.press(card, "Allow once", user_id=MEMBER, username="max")
        refused = await discord.next_message(world.owner_dm, timeout=TIMEOUT)
        assert refused.content == "Only the owner can answer this."
        assert not (world.config.workspace / "from-discord.txt").exists()

        await discord.press(card, "Allow once", user_id=OWNER, username="ann")
        first = await discord.next_message(world.owner_dm, timeout=TIMEOUT)
        second = await discord.next_message(world.owner_dm, timeout=TIMEOUT)
    assert {first.content, second.content} == {"Allow once: touch from-discord.txt", "Done."}
    assert (world.config.workspace / "from-discord.txt").exists()
    assert (pressed, 6) in discord.interaction_callbacks  # deferred: no "interaction failed"
    session = world.config.workspace / "sessions" / f"discord_{world.owner_dm}.jsonl"
    records = [json.loads(line) for line in session.read_text().splitlines()]
    [decision] = [r for r in records if r.get("type") == "exec_approval"]
    assert decision["decision"] == "once" and decision["who"] == OWNER
