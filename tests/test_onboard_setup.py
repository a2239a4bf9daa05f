"""`clawgate onboard` as a newcomer meets it (issue 15, item 1): asked in a terminal (a real
pty), or unattended with flags; every answer checked live against the loopback fakes before
it is written; the gateway names everything missing at once."""

from __future__ import annotations

import socket
import stat
import tomllib
from pathlib import Path

from clawgate.kernel.config import load_config
from tests.fakes.llm import FakeLLM, error, text
from tests.fakes.telegram import TOKEN, FakeTelegram
from tests.process import run_clawgate
from tests.pty_terminal import Terminal


def starting_config(home: Path, telegram: FakeTelegram | None = None) -> Path:
    """What a newcomer has before onboard, plus the fakes' addresses (a real bot needs none)."""
    lines = [f'workspace = "{home / "workspace"}"', f'data_dir = "{home / "data"}"']
    if telegram is not None:
        lines += [
            "[channels.telegram]",
            "# where the bot API lives",
            f'base_url = "{telegram.base_url}"',
            f'base_file_url = "{telegram.base_file_url}"',
            "poll_timeout = 1",
        ]
    path = home / ".clawgate" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def saved(path: Path) -> dict:
    return tomllib.loads(path.read_text())


async def test_interactive_onboard_checks_each_answer_and_writes_them(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config_path = starting_config(tmp_path, telegram)
    fake_llm.script(error(401, "Incorrect API key provided"), text("ok"))
    term = await Terminal().start(tmp_path, "onboard")
    try:
        await term.expect(r"Model, as provider/name.*: ")
        term.type("openai/fake-model")
        await term.expect(r"API base URL.*: ")
        term.type(fake_llm.url)
        await term.expect(r"API key \(input hidden.*: ")
        term.type("sk-wrong-key")
        await term.expect(r"model: failed: .*\n")
        await term.expect(r"Try other model settings\? \[Y/n\]: ")
        term.type("y")
        await term.expect(r"Model, as provider/name.*: ")
        term.type("openai/fake-model")
        await term.expect(r"API base URL.*: ")
        term.type(fake_llm.url)
        await term.expect(r"API key \(input hidden.*: ")
        term.type("sk-right-key")
        await term.expect(r"model: openai/fake-model answered")
        await term.expect(r"Telegram bot token.*: ")
        term.type("654321:not-the-token")
        await term.expect(r"telegram: failed: the token was rejected")
        await term.expect(r"Try another token\? \[Y/n\]: ")
        term.type("")
        await term.expect(r"Telegram bot token.*: ")
        term.type(TOKEN)
        await term.expect(r"telegram: getMe ok: @claw_test_bot")
        await term.expect(r"Discord bot token.*: ")
        term.type("")
        await term.expect(r"Start the gateway: `\S*clawgate gateway`")
        await term.expect(r"pairing approve CODE --owner")
        assert await term.exit_code() == 0
    finally:
        await term.close()
    assert "sk-right-key" not in term.seen and "sk-wrong-key" not in term.seen
    data = saved(config_path)
    assert data["agent"]["model"] == "openai/fake-model"
    assert data["agent"]["api_base"] == fake_llm.url
    assert data["agent"]["api_key"] == "sk-right-key"
    assert data["channels"]["telegram"]["enabled"] is True
    assert data["channels"]["telegram"]["token"] == TOKEN
    assert "discord" not in data.get("channels", {}) or not data["channels"]["discord"].get(
        "enabled"
    )
    assert "# where the bot API lives" in config_path.read_text(), "comments are kept"
    assert stat.S_IMODE(config_path.stat().st_mode) == 0o600
    assert [r["messages"][0]["content"] for r in fake_llm.requests] == ["Reply with: ok"] * 2
    assert telegram.calls["getMe"] == 2


async def test_unattended_onboard_with_flags(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config_path = starting_config(tmp_path, telegram)
    fake_llm.script(text("ok"))
    code, _ = await run_clawgate(
        tmp_path,
        "onboard",
        "--yes",
        "--model",
        "openai/fake-model",
        "--api-base",
        fake_llm.url,
        "--api-key-env",
        "MY_MODEL_KEY",
        "--telegram-token",
        TOKEN,
        env={"MY_MODEL_KEY": "sk-from-env"},
    )
    assert code == 0
    data = saved(config_path)
    assert data["agent"] == {
        "model": "openai/fake-model",
        "api_base": fake_llm.url,
        "api_key_env": "MY_MODEL_KEY",
    }
    assert data["channels"]["telegram"]["token"] == TOKEN
    assert len(fake_llm.requests) == 1, "the model was checked before writing"
    config = load_config(config_path, environ={"MY_MODEL_KEY": "sk-from-env"})
    assert config.agent.api_key is not None
    assert config.agent.api_key.get_secret_value() == "sk-from-env"


async def test_unattended_onboard_writes_nothing_when_a_check_fails(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config_path = starting_config(tmp_path, telegram)
    before = config_path.read_text()
    code, err = await run_clawgate(
        tmp_path, "onboard", "--yes", "--telegram-token", "654321:not-the-token"
    )
    assert code != 0
    assert "telegram check failed: the token was rejected" in err
    assert "none of the answers given was saved in" in err and "nothing was written" not in err
    assert "not-the-token" not in err
    assert config_path.read_text() == before
    code, _ = await run_clawgate(
        tmp_path, "onboard", "--yes", "--no-check", "--telegram-token", "654321:not-the-token"
    )
    assert code == 0 and saved(config_path)["channels"]["telegram"]["enabled"] is True


async def test_the_gateway_names_everything_missing_at_once(tmp_path: Path) -> None:
    starting_config(tmp_path)
    (tmp_path / ".clawgate" / "config.toml").write_text(
        '[agent]\napi_key_env = "NOT_SET_ANYWHERE"\n[channels.discord]\nenabled = true\n',
    )
    code, err = await run_clawgate(tmp_path, "gateway")
    assert code == 2
    assert "clawgate: not ready to start:" in err
    line = err.split("not ready to start:", 1)[1]
    assert "no model" in line
    assert "NOT_SET_ANYWHERE, which is not set" in line
    assert "channels.discord is enabled but has no token" in line
    assert "`clawgate onboard`" in line


async def test_an_unreachable_service_is_not_called_a_bad_token(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    # Issue 35: a network failure read like a rejected token, and "after 1 attempts".
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]  # nothing listens there once the socket is closed
    path = starting_config(tmp_path)
    path.write_text(
        path.read_text()
        + f'[channels.telegram]\nbase_url = "http://127.0.0.1:{closed}/bot"\n'
        + f'base_file_url = "http://127.0.0.1:{closed}/file/bot"\n'
    )
    code, err = await run_clawgate(tmp_path, "onboard", "--yes", "--telegram-token", "1:abc")
    assert code != 0
    assert f"could not reach http://127.0.0.1:{closed}/bot" in err, err
    assert "the token was not checked" in err and "rejected" not in err
    fake_llm.handler = lambda body: error(500, "overloaded")
    code, err = await run_clawgate(
        tmp_path, "onboard", "--yes", "--model", "openai/fake-model", "--api-key", "sk-x",
        "--api-base", fake_llm.url,
    )  # fmt: skip
    assert code != 0
    assert "did not answer after 1 attempt: server error (HTTP 500)" in err, err
