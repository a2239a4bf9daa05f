"""The settings page through aiohttp's test client over the real app: the effective config
with secrets masked and each value's source (file, env, default), and the common keys
edited through onboard's round-trip editor (comments kept, a value the gateway would
refuse never written, the form given back as typed)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from clawgate.kernel.config import CONFIG_ENV, AgentConfig, load_config
from tests.dashboard_harness import DashboardClient, dashboard_client
from tests.harness import make_config

SECRET = "sk-settings-secret-0123456789"

CONFIG_TEXT = """\
# my clawgate setup
workspace = "{workspace}"
data_dir = "{data_dir}"

[agent]
model = "openai/fake-model"  # the cheap one
api_key = "{secret}"
"""


@contextlib.asynccontextmanager
async def settings_client(
    tmp_path: Path, agent_config: AgentConfig, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[DashboardClient, Path]]:
    agent = agent_config.model_copy(update={"api_key": SecretStr(SECRET)})
    config = make_config(tmp_path, agent)
    path = tmp_path / "config.toml"
    path.write_text(
        CONFIG_TEXT.format(workspace=config.workspace, data_dir=config.data_dir, secret=SECRET),
        encoding="utf-8",
    )
    monkeypatch.setenv(CONFIG_ENV, str(path))
    monkeypatch.setenv("CLAWGATE_LIMITS__MESSAGES_PER_MINUTE", "40")
    async with dashboard_client(config) as client:
        yield client, path


def effective(page: str) -> dict[str, tuple[str, str]]:
    found = re.findall(
        r'<tr><td><code>([^<]+)</code></td><td data-label="Value">([^<]*)</td>'
        r'<td data-label="From"[^>]*>([^<]*)</td></tr>',
        page,
    )
    return {key: (value, source) for key, value, source in found}


def form_fields(page: str) -> dict[str, str]:
    fields = dict(
        re.findall(r'<input type="text" id="[^"]+" name="([^"]+)" value="([^"]*)">', page)
    )
    for name in re.findall(r'<input type="checkbox" id="[^"]+" name="([^"]+)" checked>', page):
        fields[name] = "on"
    return fields


async def test_the_effective_config_masks_secrets_and_names_each_source(
    tmp_path: Path, agent_config: AgentConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with settings_client(tmp_path, agent_config, monkeypatch) as (client, _):
        page = await client.text("/settings")
        assert SECRET not in page and "<title>Settings · clawgate</title>" in page
        rows = effective(page)
        assert rows["agent.api_key"] == ("••••••••", "file")
        assert rows["agent.model"] == ("openai/fake-model", "file")
        assert rows["limits.messages_per_minute"][1] == "env CLAWGATE_LIMITS__MESSAGES_PER_MINUTE"
        assert rows["heartbeat.interval_minutes"] == ("30", "default")
        assert "The variable overrides the file" in page


async def test_common_keys_are_saved_through_the_round_trip_editor(
    tmp_path: Path, agent_config: AgentConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with settings_client(tmp_path, agent_config, monkeypatch) as (client, path):
        fields = form_fields(await client.text("/settings"))
        fields.update(
            {
                "agent.fallback_models": "openai/backup-a, openai/backup-b",
                "heartbeat.interval_minutes": "45",
            }
        )
        fields.pop("heartbeat.enabled", None)  # unticked
        response = await client.post_form("/settings", fields)
        assert response.status == 303 and response.headers["Location"] == "/settings?saved=1"
        written = path.read_text(encoding="utf-8")
        assert "# my clawgate setup" in written and "# the cheap one" in written
        assert written.count(SECRET) == 1
        loaded = load_config(path, environ={})
        assert loaded.agent.fallback_models == ["openai/backup-a", "openai/backup-b"]
        assert loaded.heartbeat.interval_minutes == 45 and not loaded.heartbeat.enabled
        # Only what the form changed is written: untouched keys stay defaults.
        assert "max_tool_iterations" not in written and "active_hours" not in written
        assert "Saved to" in await client.text("/settings?saved=1")


async def test_a_value_the_gateway_would_refuse_is_not_written(
    tmp_path: Path, agent_config: AgentConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with settings_client(tmp_path, agent_config, monkeypatch) as (client, path):
        before = path.read_text(encoding="utf-8")
        fields = form_fields(await client.text("/settings"))
        bad_hours = {**fields, "heartbeat.active_hours": "25:00-nine", "agent.model": "x/y"}
        response = await client.post_form("/settings", bad_hours)
        body = await response.text()
        assert response.status == 400 and 'id="settings-error"' in body
        assert "active_hours" in body
        assert 'value="25:00-nine"' in body and 'value="x/y"' in body  # kept as typed
        not_a_number = {**fields, "agent.max_tokens": "lots"}
        response = await client.post_form("/settings", not_a_number)
        assert response.status == 400
        assert "agent.max_tokens: a whole number, not &#39;lots&#39;" in await response.text()
        assert path.read_text(encoding="utf-8") == before


async def test_a_dashboard_without_a_restarter_offers_no_restart(
    tmp_path: Path, agent_config: AgentConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with settings_client(tmp_path, agent_config, monkeypatch) as (client, _):
        assert 'id="restart"' not in await client.text("/settings")
        refused = await client.post_form("/restart", {"next": "/settings"})
        assert refused.status == 503 and "cannot restart itself" in await refused.text()
