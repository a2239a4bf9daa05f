"""`clawgate gateway` without `onboard`: the starter workspace is laid down, and it says so."""

from __future__ import annotations

import signal
from pathlib import Path

from clawgate.gateway.setup.onboard import prepare_workspace
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram
from tests.process import ClawgateProcess, fake_model, fake_telegram, write_config


def test_prepare_workspace_fills_only_a_workspace_never_onboarded(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    assert prepare_workspace(workspace)
    assert (workspace / "AGENTS.md").is_file() and (workspace / "memory").is_dir()
    (workspace / "USER.md").unlink()
    assert not prepare_workspace(workspace)
    assert not (workspace / "USER.md").exists()


async def test_gateway_on_an_empty_workspace_lays_it_down_and_says_so(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    config = write_config(
        tmp_path, agent=fake_model(fake_llm), telegram=fake_telegram(telegram, (1001,))
    )
    async with ClawgateProcess(tmp_path, "--config", str(config), "gateway") as gateway:
        await gateway.wait_for_log("channel telegram ready", 30)
        assert "had no workspace files: created them" in gateway.stderr
        gateway.send_signal(signal.SIGTERM)
        assert await gateway.wait(25) == 0
    assert (tmp_path / "workspace" / "AGENTS.md").is_file()
