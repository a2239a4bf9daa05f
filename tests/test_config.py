from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from clawgate.kernel.config import Config, default_config_path, load_config
from clawgate.kernel.errors import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def load_error(path: Path, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ=environ or {})
    message = str(caught.value)
    assert "\n" not in message, f"error must be one line: {message!r}"
    return message


def test_absent_file_gives_defaults(tmp_path: Path) -> None:
    config = load_config(tmp_path / "missing.toml", environ={})

    assert config.agent.model == ""
    assert config.agent.temperature is None  # not sent: the model's own default
    assert config.agent.timezone == "UTC"
    assert config.channels.telegram.enabled is False
    assert config.tools.restrict_to_workspace is True
    assert config.workspace == Path("~/.clawgate/workspace").expanduser()
    assert config.data_dir == Path("~/.clawgate").expanduser()


def test_toml_values_are_read(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"""
workspace = "{tmp_path / "ws"}"
[agent]
model = "openai/gpt-4o-mini"
temperature = 0.2
fallback_models = ["anthropic/claude-sonnet-4-5"]
timezone = "Europe/Lisbon"
[channels.telegram]
enabled = true
token = "123:abc"
[tools]
exec_enabled = false
""",
    )

    config = load_config(path, environ={})

    assert config.workspace == tmp_path / "ws"
    assert config.agent.model == "openai/gpt-4o-mini"
    assert config.agent.temperature == 0.2
    assert config.agent.fallback_models == ["anthropic/claude-sonnet-4-5"]
    assert config.agent.timezone == "Europe/Lisbon"
    assert config.channels.telegram.enabled is True
    assert config.channels.telegram.token is not None
    assert config.channels.telegram.token.get_secret_value() == "123:abc"
    assert config.tools.exec_enabled is False


def test_env_overrides_nested_top_level_and_three_level_keys(tmp_path: Path) -> None:
    path = write(
        tmp_path, '[agent]\nmodel = "openai/from-file"\n[channels.telegram]\ntoken = "file"\n'
    )
    environ = {
        "CLAWGATE_AGENT__MODEL": "openai/from-env",
        "CLAWGATE_WORKSPACE": str(tmp_path / "env-ws"),
        "CLAWGATE_CHANNELS__TELEGRAM__TOKEN": "999:env",
        "CLAWGATE_CHANNELS__TELEGRAM__ALLOW_FROM": '[1, "bob"]',
        "CLAWGATE_AGENT__MAX_RETRIES": "5",
        "UNRELATED": "ignored",
    }

    config = load_config(path, environ=environ)

    assert config.agent.model == "openai/from-env"
    assert config.workspace == tmp_path / "env-ws"
    assert config.channels.telegram.token is not None
    assert config.channels.telegram.token.get_secret_value() == "999:env"
    assert config.channels.telegram.allow_from == ["1", "bob"]
    assert config.agent.max_retries == 5


def test_toml_integer_ids_become_strings(tmp_path: Path) -> None:
    # Telegram hands us numeric ids; comparing them to strings must not silently fail.
    path = write(tmp_path, "[channels.discord]\nallow_from = [123456789012345678, 42]\n")

    config = load_config(path, environ={})

    assert config.channels.discord.allow_from == ["123456789012345678", "42"]


def test_clawgate_config_env_picks_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, '[agent]\nmodel = "openai/picked"\n')
    environ = {"CLAWGATE_CONFIG": str(path)}

    assert default_config_path(environ) == path
    assert default_config_path({}) == Path("~/.clawgate/config.toml").expanduser()
    # CLAWGATE_CONFIG names the file; it is not itself a config key.
    assert load_config(environ=environ).agent.model == "openai/picked"


def test_unknown_top_level_key(tmp_path: Path) -> None:
    path = write(tmp_path, "workspce = '/tmp/x'\n")

    message = load_error(path)

    assert "workspce" in message
    assert str(path) in message


def test_unknown_nested_key(tmp_path: Path) -> None:
    path = write(tmp_path, '[channels.telegram]\ntokn = "x"\n')

    assert "channels.telegram.tokn" in load_error(path)


def test_wrong_type(tmp_path: Path) -> None:
    path = write(tmp_path, '[agent]\nmax_tokens = "lots"\n')

    message = load_error(path)

    assert "agent.max_tokens" in message
    assert str(path) in message


def test_out_of_range_value(tmp_path: Path) -> None:
    path = write(tmp_path, "[agent]\ntemperature = 5\n")

    assert "agent.temperature" in load_error(path)


@pytest.mark.parametrize("entry", ["1", "true", "0.5"])
def test_an_allowed_private_address_written_as_a_number_is_refused(
    tmp_path: Path, entry: str
) -> None:
    # 1 and true passed as the address 0.0.0.1 (true with a DeprecationWarning).
    path = write(tmp_path, f"[tools.web]\nallow_private = [{entry}]\n")

    message = load_error(path)

    assert "tools.web.allow_private" in message and "in quotes" in message


def test_unknown_timezone(tmp_path: Path) -> None:
    path = write(tmp_path, '[agent]\ntimezone = "Mars/Olympus_Mons"\n')

    message = load_error(path)

    assert "agent.timezone" in message
    assert "Mars/Olympus_Mons" in message


def test_invalid_toml(tmp_path: Path) -> None:
    path = write(tmp_path, "[agent\nmodel = \n")

    message = load_error(path)

    assert str(path) in message
    assert "TOML" in message


def test_error_from_env_names_the_variable(tmp_path: Path) -> None:
    path = write(tmp_path, '[agent]\nmodel = "openai/fine"\n')

    bad_value = load_error(path, {"CLAWGATE_AGENT__TEMPERATURE": "5"})
    unknown_key = load_error(path, {"CLAWGATE_AGENT__MODLE": "x"})
    unknown_section = load_error(path, {"CLAWGATE_AGENTS__MODEL": "x"})

    assert bad_value.startswith("CLAWGATE_AGENT__TEMPERATURE:")
    assert "agent.temperature" in bad_value
    assert unknown_key.startswith("CLAWGATE_AGENT__MODLE:")
    assert "agent.modle" in unknown_key
    assert unknown_section.startswith("CLAWGATE_AGENTS__MODEL:")


def test_error_in_file_names_the_file_even_with_overrides(tmp_path: Path) -> None:
    path = write(tmp_path, "[agent]\ntemperature = 5\n")

    message = load_error(path, {"CLAWGATE_AGENT__MODEL": "openai/fine"})

    assert message.startswith(f"{path}:")
    assert "CLAWGATE_AGENT__MODEL" not in message


def test_workspace_tilde_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    path = write(tmp_path, 'workspace = "~/assistant"\ndata_dir = "~/state"\n')

    config = load_config(path, environ={})

    assert config.workspace == tmp_path / "assistant"
    assert config.data_dir == tmp_path / "state"


def test_secrets_never_print_and_are_listed(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[agent]\napi_key = "sk-very-secret"\n[channels.telegram]\ntoken = "123:tg-secret"\n',
    )
    environ = {"CLAWGATE_CHANNELS__DISCORD__TOKEN": "dc-secret"}

    config = load_config(path, environ=environ)

    assert isinstance(config.agent.api_key, SecretStr)
    assert isinstance(config.channels.telegram.token, SecretStr)
    for shown in (repr(config), str(config), config.model_dump_json()):
        for secret in ("sk-very-secret", "tg-secret", "dc-secret"):
            assert secret not in shown
    assert sorted(config.secrets()) == ["123:tg-secret", "dc-secret", "sk-very-secret"]
    assert Config().secrets() == []


def test_a_misspelt_key_gets_the_key_it_was_meant_to_be(tmp_path: Path) -> None:
    path = write(tmp_path, '[agent]\nmodle = "openai/gpt-4o-mini"\n')
    assert load_error(path).endswith("unknown key 'agent.modle' (did you mean 'agent.model'?)")
    path = write(tmp_path, "[channels.telegram]\nalow_from = [1]\n")
    assert "(did you mean 'channels.telegram.allow_from'?)" in load_error(path)
    path = write(tmp_path, '[agents.home]\nworkspce = "/tmp/x"\n')
    assert "(did you mean 'agents.home.workspace'?)" in load_error(path)
    path = write(tmp_path, "[agent]\nnothing_like_it = 1\n")
    assert load_error(path).endswith("unknown key 'agent.nothing_like_it'")


def test_a_model_without_its_provider_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = write(tmp_path, '[agent]\nmodel = "gpt-4o-mini"\n')
    error = load_error(path)
    assert error.startswith(f"{path}: invalid value for 'agent.model'")
    assert "write it as provider/name, e.g. 'openai/gpt-4o-mini'" in error
    path = write(tmp_path, '[agent]\nmodel = "openai/gpt-4o-mini"\nfallback_models = ["gpt-4o"]\n')
    assert "'agent.fallback_models.0'" in load_error(path)
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, ""), environ={"CLAWGATE_AGENT__MODEL": "gpt-5"})
    assert str(caught.value).startswith("CLAWGATE_AGENT__MODEL: ")


@pytest.mark.parametrize("value", ["0", "65", '"two"'])
def test_discord_shards_out_of_range_is_one_line(tmp_path: Path, value: str) -> None:
    message = load_error(write(tmp_path, f"[channels.discord]\nshards = {value}\n"))

    assert "shards" in message


def test_discord_shards_default_and_value(tmp_path: Path) -> None:
    assert load_config(tmp_path / "missing.toml", environ={}).channels.discord.shards == 1
    path = write(tmp_path, "[channels.discord]\nshards = 2\n")
    assert load_config(path, environ={}).channels.discord.shards == 2
