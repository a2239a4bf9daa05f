"""A channel whose token is refused (issue 15, item 7): alone, the gateway stops at once
with the reason (exit 2, so systemd does not restart it); beside a working channel it keeps
running and shows the refused one in status. "ready" is logged only once the platform
answered, with the bot's name."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import TOKEN, FakeTelegram
from tests.harness import wait_until
from tests.process import ClawgateProcess, fake_model, run_clawgate, write_config

DISCORD_TOKEN = "discord-test-token"
TIMEOUT = 30.0


def telegram_section(telegram: FakeTelegram, token: str = TOKEN, **extra: object) -> dict:
    return {
        "enabled": True,
        "token": token,
        "base_url": telegram.base_url,
        "base_file_url": telegram.base_file_url,
        "poll_timeout": 1,
        **extra,
    }


async def test_the_only_channel_refused_stops_the_gateway_with_the_reason(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config = write_config(
        tmp_path,
        agent=fake_model(fake_llm),
        telegram=telegram_section(telegram, "654321:revoked-token"),
    )
    code, err = await run_clawgate(tmp_path, "--config", str(config), "gateway", timeout=TIMEOUT)
    assert code == 2
    assert "clawgate: telegram: the bot token was rejected; check [channels.telegram] token" in err
    assert "gateway running" not in err
    assert "revoked-token" not in err


async def test_a_refused_channel_beside_a_working_one_shows_in_status(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    async with FakeDiscord(token=DISCORD_TOKEN) as discord:
        config = write_config(
            tmp_path,
            agent=fake_model(fake_llm),
            telegram=telegram_section(telegram, "654321:revoked-token"),
        )
        with config.open("a", encoding="utf-8") as handle:
            handle.write(
                f'[channels.discord]\nenabled = true\ntoken = "{DISCORD_TOKEN}"\n'
                f'api_base = "{discord.api_url}"\ngateway_url = "{discord.gateway_url}"\n'
            )
        async with ClawgateProcess(tmp_path, "--config", str(config), "gateway") as gateway:
            await gateway.wait_for_log("gateway running", TIMEOUT)
            status_file = tmp_path / "data" / "status.json"

            def channels() -> dict | None:
                try:
                    return json.loads(status_file.read_text())["channels"]
                except (OSError, ValueError, KeyError):
                    return None

            await wait_until(lambda: channels() is not None, timeout=TIMEOUT)
            report = channels()
            assert report is not None
            assert report["telegram"]["state"] == "failed"
            assert "the bot token was rejected" in report["telegram"]["last_error"]
            assert report["discord"]["state"] == "running"


async def test_ready_only_after_the_platform_answered(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config = write_config(tmp_path, agent=fake_model(fake_llm), telegram=telegram_section(telegram))
    async with ClawgateProcess(tmp_path, "--config", str(config), "gateway") as gateway:
        await gateway.wait_for_log("gateway running", TIMEOUT)
        logged = "\n".join(gateway.stderr_lines)
        assert "telegram: connected as @claw_test_bot (id 999000)" in logged
        assert "channel telegram ready" in logged

    with socket.socket() as closed:  # a port with nothing listening: the API is unreachable
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    home = tmp_path / "offline"
    home.mkdir()
    config = write_config(
        home,
        agent=fake_model(fake_llm),
        telegram=telegram_section(
            telegram,
            base_url=f"http://127.0.0.1:{port}/bot",
            base_file_url=f"http://127.0.0.1:{port}/file/bot",
        ),
    )
    async with ClawgateProcess(home, "--config", str(config), "gateway") as gateway:
        await gateway.wait_for_log("gateway running", TIMEOUT)
        logged = "\n".join(gateway.stderr_lines)
        assert "channel telegram started but cannot reach its platform yet" in logged
        assert "channel telegram ready" not in logged
