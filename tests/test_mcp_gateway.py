"""MCP servers in a running gateway: started in its TaskGroup, their tools offered to the
model (scripted through the fake OpenAI-compatible server), listed on the dashboard's health
page and in the status report, by `clawgate mcp list` and by doctor."""

from __future__ import annotations

import asyncio
import io
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clawgate.agent.tools.mcp_hub import McpHub, probe
from clawgate.gateway.cli.root import app as clawgate_app
from clawgate.gateway.ops.doctor import diagnose
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import AgentConfig, McpConfig
from clawgate.kernel.config_sections import McpServerConfig
from clawgate.kernel.retry import Backoff
from tests.dashboard_harness import dashboard_client
from tests.fakes.llm import FakeLLM, text, tool_call
from tests.harness import Harness, make_config

SERVER = str(Path(__file__).parent / "fakes" / "mcp_stdio.py")
ENTRY = {"name": "fake", "command": sys.executable, "args": [SERVER], "tools": ["shout", "add"]}


async def running(hub: McpHub) -> None:
    async with asyncio.timeout(30), hub.changed:
        await hub.changed.wait_for(lambda: all(s.state == "running" for s in hub.snapshot()))


async def test_the_model_calls_an_mcp_tool_in_an_owner_chat_not_in_a_group(
    tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    config = make_config(tmp_path, agent_config)
    hub = McpHub(McpConfig(servers=[ENTRY]), backoff=Backoff(first=0.05))
    async with Harness(config, mcp=hub) as harness:
        await running(hub)
        fake_llm.script(tool_call("fake__shout", text="spring tide"), text("Done."))
        assert (await harness.ask("shout it")).text == "Done."
        offered = [t["function"]["name"] for t in fake_llm.requests[0]["tools"]]
        assert offered[-2:] == ["fake__shout", "fake__add"]
        assert fake_llm.requests[1]["messages"][-1]["content"] == "SPRING TIDE"
        # A group chat is neither offered the tool nor able to call it.
        fake_llm.script(tool_call("fake__shout", text="x"), text("Cannot."))
        await harness.channel.say("shout", chat_id="-5", trust=Trust.GROUP)
        assert (await harness.channel.next_reply("-5")).text == "Cannot."
        offered = [t["function"]["name"] for t in fake_llm.requests[2]["tools"]]
        assert not [name for name in offered if "__" in name]
        result = fake_llm.requests[3]["messages"][-1]["content"]
        assert result.startswith("Error: unknown tool 'fake__shout'")
        report = harness.gateway._report()
        assert report["mcp"][0]["name"] == "fake" and report["mcp"][0]["state"] == "running"


async def test_the_health_page_lists_the_servers(tmp_path: Path, agent_config: AgentConfig) -> None:
    broken = {"name": "broken", "command": str(tmp_path / "missing-server")}
    hub = McpHub(McpConfig(servers=[ENTRY, broken]), backoff=Backoff(first=0.05))
    config = make_config(tmp_path, agent_config)
    async with dashboard_client(config, mcp=hub) as client:
        async with asyncio.timeout(30), hub.changed:
            await hub.changed.wait_for(
                lambda: [s.state for s in hub.snapshot()] == ["running", "restarting"]
            )
        page = await client.text("/health")
        assert "<h2>MCP servers</h2>" in page
        assert "<td>fake</td><td>stdio</td>" in page and "shout, add" in page
        assert "cannot start" in page and "missing-server" in page


def test_mcp_list_starts_each_server_when_no_gateway_runs(tmp_path: Path) -> None:
    config_path = tmp_path / "config.toml"
    config_path.write_text(
        f'data_dir = "{tmp_path / "data"}"\nworkspace = "{tmp_path / "ws"}"\n'
        "[[mcp.servers]]\n"
        f'name = "fake"\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(SERVER)}]\n'
        'tools = ["shout", "add"]\n'
        "[[mcp.servers]]\n"
        'name = "off"\nurl = "http://127.0.0.1:9/mcp"\nenabled = false\n'
    )
    result = CliRunner().invoke(clawgate_app, ["-c", str(config_path), "mcp", "list", "--json"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert [(r["name"], r["state"], r["tools"]) for r in rows] == [
        ("fake", "running", ["shout", "add"]),
        ("off", "disabled", []),
    ], rows
    table = CliRunner().invoke(clawgate_app, ["-c", str(config_path), "mcp", "list"])
    assert "shout, add" in table.output
    assert "the gateway is not running: each server was started once" in table.output


async def test_a_stdio_server_starts_whatever_stood_in_sys_stderr_when_mcp_was_imported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The SDK's `stdio_client` takes the `sys.stderr` of the moment `mcp` is first imported as
    # its servers' stderr. The first import under a CLI runner's capture (a stream without a
    # file descriptor) made every stdio server fail to start: the test above, when it ran
    # first in its process.
    import mcp.client.stdio

    monkeypatch.setattr(mcp.client.stdio.stdio_client, "__defaults__", (io.StringIO(),))
    status = await probe(McpServerConfig(**ENTRY))
    assert (status.state, status.tools, status.error) == ("running", ("shout", "add"), "")


def test_doctor_checks_each_servers_command(tmp_path: Path) -> None:
    config_path = tmp_path / "config.toml"
    config_path.write_text(
        f'data_dir = "{tmp_path / "data"}"\nworkspace = "{tmp_path / "ws"}"\n'
        f'[[mcp.servers]]\nname = "fake"\ncommand = {json.dumps(sys.executable)}\n'
        '[[mcp.servers]]\nname = "gone"\ncommand = "no-such-mcp-server"\n'
    )
    _config, findings = diagnose(config_path, environ={})
    mcp = [(f.level, f.message) for f in findings if f.message.startswith("mcp server")]
    assert mcp == [
        ("ok", f"mcp server fake: runs {sys.executable} (stdio)"),
        ("problem", "mcp server gone: command 'no-such-mcp-server' not found or not executable"),
    ]
