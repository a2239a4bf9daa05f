"""`[agents.<name>]`: effective per-agent configs and the checks that keep agents apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawgate.kernel.bus import InboundMessage, OutboundMessage
from clawgate.kernel.config import Binding, Config, load_config
from clawgate.kernel.errors import ConfigError


def load(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> Config:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path, environ=environ or {})


def load_error(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, text)
    message = str(caught.value)
    assert "\n" not in message, message
    return message


TWO_AGENTS = """
workspace = "{tmp}/ws"
data_dir = "{tmp}/data"
[agent]
model = "openai/main-model"
api_key = "sk-main"
memory_window = 30
timezone = "Europe/Lisbon"
[channels.telegram]
enabled = true
token = "111:shared"
allow_from = ["42"]
dm_policy = "allowlist"
[memory]
auto_recall = false
[heartbeat]
deliver_to = "telegram:42"
[agents.work]
model = "openai/work-model"
share_memory_from = ["main"]
bindings = [{{channel = "discord", guild = 900}}, {{channel = "discord", chat = 55}}]
[agents.work.channels.telegram]
token = "222:work"
owners = ["77"]
[agents.work.heartbeat]
interval_minutes = 5
"""


def two_agents(tmp_path: Path) -> Config:
    return load(tmp_path, TWO_AGENTS.format(tmp=tmp_path))


def test_no_agents_section_is_main_alone_and_unchanged(tmp_path: Path) -> None:
    config = load(tmp_path, f'workspace = "{tmp_path}/ws"\n[agent]\nmodel = "openai/m"\n')

    assert config.agents == {}
    assert config.agent_names() == ["main"]
    assert config.agent_name == "main"
    main = config.for_agent()
    assert main is config
    assert config.for_agent("main") is config
    assert config.pairing_file == config.data_dir / "pairing.json"


def test_agent_inherits_top_level_keys_and_overrides_only_what_it_names(tmp_path: Path) -> None:
    config = two_agents(tmp_path)
    work = config.for_agent("work")

    assert config.agent_names() == ["main", "work"]
    assert work.agent_name == "work"
    assert work.root is config
    assert work.agent.model == "openai/work-model"
    # Unnamed keys come from [agent]: the same key, window and time zone.
    assert work.agent.memory_window == 30
    assert work.agent.timezone == "Europe/Lisbon"
    assert work.agent.api_key is not None and work.agent.api_key.get_secret_value() == "sk-main"
    # A partial channel override changes its keys only.
    telegram = work.channels.telegram
    assert telegram.token is not None and telegram.token.get_secret_value() == "222:work"
    assert telegram.owners == ["77"]
    assert telegram.allow_from == ["42"]
    assert telegram.dm_policy == "allowlist"
    assert telegram.enabled is True
    assert work.heartbeat.interval_minutes == 5
    # The heartbeat chat is never inherited: main's chat is main's to ping.
    assert config.heartbeat.deliver_to == "telegram:42"
    assert work.heartbeat.deliver_to == ""
    assert work.heartbeat.active_hours == config.heartbeat.active_hours
    assert work.memory.auto_recall is False
    assert work.agents == {}
    # A derived config is a valid single-agent config of its own.
    assert Config.model_validate(work.model_dump()).workspace == work.workspace


def test_agent_directories(tmp_path: Path) -> None:
    config = two_agents(tmp_path)
    main, work = config.for_agent("main"), config.for_agent("work")

    # main keeps the single-agent layout; others live under <data_dir>/agents/<name>.
    assert main.workspace == tmp_path / "ws"
    assert main.data_dir == tmp_path / "data"
    assert work.data_dir == tmp_path / "data" / "agents" / "work"
    assert work.workspace == tmp_path / "data" / "agents" / "work" / "workspace"
    assert work.pairing_file == work.data_dir / "pairing.json"
    assert config.agents["work"].bindings == [
        Binding(channel="discord", guild="900"),
        Binding(channel="discord", chat="55"),
    ]


def test_global_pairing_is_one_file(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        TWO_AGENTS.format(tmp=tmp_path).replace("[agent]\n", 'pairing_scope = "global"\n[agent]\n'),
    )

    assert config.for_agent("work").pairing_file == tmp_path / "data" / "pairing.json"


def test_agents_main_overrides_main(tmp_path: Path) -> None:
    text = TWO_AGENTS.format(tmp=tmp_path) + '[agents.main]\nmodel = "openai/other"\n'
    config = load(tmp_path, text)

    main = config.for_agent("main")
    assert main.agent.model == "openai/other"
    assert main.agent.memory_window == 30
    assert main.workspace == tmp_path / "ws"
    assert main.agent_name == "main"
    assert config.agent_names() == ["main", "work"]


def test_default_agent(tmp_path: Path) -> None:
    config = load(tmp_path, 'default_agent = "work"\n' + TWO_AGENTS.format(tmp=tmp_path))

    assert config.for_agent().agent_name == "work"
    # A derived config still knows every agent.
    assert config.for_agent("work").for_agent("main").agent_name == "main"


def test_own_key_variable_never_falls_back_to_another_agents_key(tmp_path: Path) -> None:
    text = TWO_AGENTS.format(tmp=tmp_path).replace(
        'model = "openai/work-model"', 'model = "openai/work-model"\napi_key_env = "WORK_KEY"'
    )

    unset = load(tmp_path, text).for_agent("work")
    assert unset.agent.api_key is None
    found = load(tmp_path, text, environ={"WORK_KEY": "sk-work"}).for_agent("work")
    assert found.agent.api_key is not None
    assert found.agent.api_key.get_secret_value() == "sk-work"


def test_environment_overrides_reach_agents(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        TWO_AGENTS.format(tmp=tmp_path),
        environ={"CLAWGATE_AGENTS__WORK__MODEL": "openai/from-env"},
    )

    assert config.for_agent("work").agent.model == "openai/from-env"


def test_secrets_cover_every_agent(tmp_path: Path) -> None:
    config = two_agents(tmp_path)

    expected = {"sk-main", "111:shared", "222:work"}
    assert set(config.secrets()) == expected
    assert set(config.for_agent("work").secrets()) == expected


def test_unknown_agent_names_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown agent 'nope' \(known: main, work\)"):
        two_agents(tmp_path).for_agent("nope")


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ('[agents.home]\nshare_memory_from = ["ghost"]\n', "'ghost' is not another agent"),
        (
            '[agents.home]\nworkspace = "{tmp}/ws"\n',
            "agents main and home have the same workspace",
        ),
        (
            '[agents.home]\nworkspace = "{tmp}/ws/inner"\n',
            "the workspace of agent home",
        ),
        (
            '[agents.home]\nbindings = [{channel = "discord", chat = "55"}]\n',
            "binding discord (chat 55) is claimed by agents work and home",
        ),
        (
            '[agents.home]\nbindings = [{channel = "telegram", chat = "-5"}]\n'
            '[agents.home.channels.telegram]\ntoken = "333:home"\n',
            "agent home has its own telegram bot: its binding telegram (chat -5)",
        ),
        (
            '[agents.home.channels.telegram]\ntoken = "222:work"\n',
            "agents work and home use the same telegram bot",
        ),
        ('[agents.Bad]\nmodel = "x"\n', "agent name 'Bad'"),
        ('[agents.home]\nbindings = [{channel = "telegram", guild = "1"}]\n', "guild"),
        ('[agents.home]\nmodle = "x"\n', "unknown key 'agents.home.modle'"),
    ],
)
def test_agents_that_cannot_be_kept_apart_fail_at_load(
    tmp_path: Path, extra: str, expected: str
) -> None:
    message = load_error(
        tmp_path, TWO_AGENTS.format(tmp=tmp_path) + extra.replace("{tmp}", str(tmp_path))
    )

    assert expected in message
    assert str(tmp_path / "config.toml") in message


def test_unknown_default_agent_fails_at_load(tmp_path: Path) -> None:
    message = load_error(tmp_path, 'default_agent = "ghost"\n')

    assert "default_agent 'ghost' is not an agent (known: main)" in message


def test_session_keys_carry_the_agent() -> None:
    inbound = InboundMessage(channel="telegram", chat_id="123", agent="work")
    outbound = OutboundMessage(channel="telegram", chat_id="123", text="hi", agent="work")

    # The file inside the workspace is unchanged; the key across agents names the agent.
    assert inbound.session_key == "telegram:123"
    assert inbound.agent_session_key == "work/telegram:123"
    assert outbound.agent_session_key == "work/telegram:123"
    assert InboundMessage(channel="telegram", chat_id="1").agent_session_key == "telegram:1"


def test_plain_config_object_has_main() -> None:
    config = Config()

    assert config.agent_names() == ["main"]
    assert config.for_agent(None) is config
