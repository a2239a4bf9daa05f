"""Shared chats are not told where the owner's workspace lives on disk."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from clawgate.agent.context import ContextBuilder
from clawgate.kernel.bus import Trust

NOW = datetime(2025, 3, 14, 18, 30, tzinfo=UTC)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "home-of-rita" / "workspace"
    (ws / "public").mkdir(parents=True)
    (ws / "AGENTS.md").write_text("# Agents\nagents-marker\n", encoding="utf-8")
    return ws


async def prompt(workspace: Path, trust: Trust) -> str:
    builder = ContextBuilder(workspace, builtin_skills_dir=workspace / "none")
    return await builder.system_prompt(trust=trust, session_key="telegram:-5", now=NOW)


@pytest.mark.parametrize("trust", [Trust.GROUP, Trust.ALLOWED])
async def test_a_shared_chat_prompt_has_no_absolute_path(workspace: Path, trust: Trust) -> None:
    text = await prompt(workspace, trust)
    assert "agents-marker" in text
    assert "home-of-rita" not in text
    assert str(workspace.parent) not in text
    assert "relative to it" in text


async def test_the_owner_still_sees_the_workspace_path(workspace: Path) -> None:
    assert f"Workspace: {workspace}" in await prompt(workspace, Trust.OWNER)
