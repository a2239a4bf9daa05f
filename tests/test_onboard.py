from __future__ import annotations

import stat
import tomllib
from pathlib import Path

from clawgate.gateway.setup.onboard import config_template, next_steps, onboard
from clawgate.kernel.config import load_config

TEMPLATE_FILES = [
    "AGENTS.md",
    "SOUL.md",
    "USER.md",
    "TOOLS.md",
    "HEARTBEAT.md",
    "memory/MEMORY.md",
]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_creates_config_and_workspace(tmp_path: Path) -> None:
    config_path = tmp_path / "home" / "config.toml"
    workspace = tmp_path / "ws"
    result = onboard(config_path, workspace)

    assert result.kept == []
    assert config_path in result.created
    assert mode(config_path) == 0o600
    assert mode(config_path.parent) == 0o700
    for name in TEMPLATE_FILES:
        assert (workspace / name).is_file(), name
        assert workspace / name in result.created
        assert (workspace / name).read_text().startswith("# ")
    for folder in ("memory", "skills", "public", "sessions"):
        assert (workspace / folder).is_dir(), folder
    assert mode(workspace / "sessions") == 0o700
    # Packaging leftovers stay out of the user's workspace.
    assert not list(workspace.rglob(".gitkeep"))
    assert not list(workspace.rglob("__init__.py"))
    assert not list(workspace.rglob("__pycache__"))


def test_config_loads_and_respects_workspace(tmp_path: Path) -> None:
    config_path = tmp_path / "config.toml"
    workspace = tmp_path / "somewhere" / "my workspace"
    onboard(config_path, workspace, data_dir=tmp_path / "data")
    config = load_config(config_path, environ={})
    assert config.workspace == workspace
    assert config.data_dir == tmp_path / "data"
    assert config.channels.telegram.enabled is False
    assert config.channels.discord.enabled is False
    assert config.tools.restrict_to_workspace is True
    assert config.agent.api_key is None
    assert "CLAWGATE_AGENT__API_KEY" in config_path.read_text()
    # An api key from the environment fills in the commented-out key.
    env = {"CLAWGATE_AGENT__API_KEY": "sk-test"}
    assert load_config(config_path, environ=env).agent.api_key.get_secret_value() == "sk-test"


def test_template_without_paths_is_valid_toml_of_defaults(tmp_path: Path) -> None:
    data = tomllib.loads(config_template())
    assert "workspace" not in data
    path = tmp_path / "c.toml"
    path.write_text(config_template(Path('C:\\odd "path"\tx')))
    assert load_config(path, environ={}).workspace == Path('C:\\odd "path"\tx')


def test_default_workspace_comes_from_config(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("CLAWGATE_WORKSPACE", str(tmp_path / "from-env"))
    onboard(tmp_path / "config.toml")
    assert (tmp_path / "from-env" / "AGENTS.md").is_file()


def test_second_run_keeps_everything(tmp_path: Path) -> None:
    config_path = tmp_path / "config.toml"
    workspace = tmp_path / "ws"
    first = onboard(config_path, workspace)

    config_path.write_text('workspace = "/elsewhere"\n')
    (workspace / "SOUL.md").write_text("my own soul")
    (workspace / "memory" / "MEMORY.md").write_text("- likes tea")
    (workspace / "USER.md").unlink()

    second = onboard(config_path, workspace)
    assert second.created == [workspace / "USER.md"]
    assert config_path in second.kept and workspace / "SOUL.md" in second.kept
    assert config_path.read_text() == 'workspace = "/elsewhere"\n'
    assert (workspace / "SOUL.md").read_text() == "my own soul"
    assert (workspace / "memory" / "MEMORY.md").read_text() == "- likes tea"
    assert (workspace / "USER.md").is_file()

    third = onboard(config_path, workspace)
    assert third.created == []
    created_files = {p for p in first.created if p.is_file()}
    assert created_files <= set(third.kept)


def test_next_steps_ask_for_a_model_only_while_none_is_set(tmp_path: Path) -> None:
    config_path = tmp_path / "config.toml"
    onboard(config_path, tmp_path / "ws")
    assert "set [agent] model" in next_steps(config_path, {})[0]
    by_env = next_steps(config_path, {"CLAWGATE_AGENT__MODEL": "openai/gpt-4o-mini"})
    assert by_env[0] == "Ready to chat in the terminal: `clawgate agent` (openai/gpt-4o-mini)."
    assert "no chat channel enabled" in by_env[1]

    text = config_path.read_text().replace(
        '# model = "ollama/llama3.1"', 'model = "ollama/llama3.1"'
    )
    config_path.write_text(text)
    onboard(config_path, tmp_path / "ws")
    assert next_steps(config_path, {})[0] == (
        "Ready to chat in the terminal: `clawgate agent` (ollama/llama3.1)."
    )
