import asyncio
import contextlib
import json
import os
from typing import Any

from typer.testing import CliRunner

from clawgate.agent.tools.mcp_hub import McpHub
from clawgate.gateway.cli import app
from clawgate.gateway.daemon.gateway import report_mcp_changes
from clawgate.gateway.ops.status_file import StatusWriter, read_status
from clawgate.gateway.setup.onboard import onboard
from clawgate.kernel.config import McpConfig
from tests.harness import wait_until


def test_status_file_round_trip_and_stale_detection(tmp_path):
    writer = StatusWriter(tmp_path, lambda: {"channels": {"telegram": {"state": "running"}}})
    writer.write_once()
    report = read_status(tmp_path)
    assert report["running"] and report["pid"] == os.getpid()
    assert (tmp_path / "status.json").stat().st_mode & 0o777 == 0o600
    body = json.loads((tmp_path / "status.json").read_text())
    body["pid"] = 0  # no such process may count as alive (pid 0 is our own group)
    (tmp_path / "status.json").write_text(json.dumps(body))
    assert read_status(tmp_path)["running"] is False
    writer.remove()
    assert read_status(tmp_path) is None


def test_status_and_housekeeping_commands(tmp_path):
    config_path = tmp_path / "config.toml"
    onboard(config_path, workspace=tmp_path / "ws", data_dir=tmp_path / "data")
    runner = CliRunner()
    out = runner.invoke(app, ["--config", str(config_path), "status"]).output
    assert "gateway: not running" in out and "sessions/archive:" in out
    StatusWriter(
        tmp_path / "data",
        lambda: {
            "channels": {"telegram": {"state": "failed", "last_error": "bad token", "restarts": 2}}
        },
    ).write_once()
    out = runner.invoke(app, ["--config", str(config_path), "status"]).output
    assert "gateway: running" in out and "channel telegram: failed, 2 restarts - bad token" in out
    (tmp_path / "ws" / "media").mkdir()
    result = runner.invoke(app, ["--config", str(config_path), "housekeeping", "--dry-run"])
    assert result.exit_code == 0 and "would have removed nothing" in result.output


async def test_an_mcp_change_during_the_status_write_is_written_next(tmp_path):
    # The reporter rewrites the file at each change of an MCP server's state; a change that
    # comes while it writes (a fast server: starting, then running at once) must be written
    # too, not wait for the periodic write with the file saying "starting".
    hub = McpHub(McpConfig(servers=[{"name": "fake", "command": "true"}]))
    server = hub._servers["fake"]
    loop = asyncio.get_running_loop()
    written: list[str] = []

    def report() -> dict[str, Any]:
        state = server.state
        if not written:  # the first write: the server comes up meanwhile
            asyncio.run_coroutine_threadsafe(hub._set_state(server, "running"), loop).result()
        written.append(state)
        return {"mcp": [{"name": "fake", "state": state}]}

    reporter = asyncio.create_task(report_mcp_changes(hub, StatusWriter(tmp_path, report)))
    try:
        await asyncio.sleep(0)  # the reporter waits for a change
        await hub._set_state(server, "starting")
        running = [{"name": "fake", "state": "running"}]
        await wait_until(lambda: (read_status(tmp_path) or {}).get("mcp") == running, 10)
    finally:
        reporter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reporter
    assert written == ["starting", "running"]
