"""`clawgate gateway` as a child process with an MCP server configured: the daemon starts it
(app.serve's wiring), and `clawgate mcp list` shows the running gateway's view of it."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

from clawgate.gateway.ops.status_file import read_status
from tests.dashboard_harness import clawgate_output
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram
from tests.harness import wait_until
from tests.process import ClawgateProcess, fake_model, fake_telegram, write_config

SERVER = str(Path(__file__).parent / "fakes" / "mcp_stdio.py")
START_TIMEOUT = 60.0


def mcp_state(data_dir: Path) -> list[str]:
    report = read_status(data_dir) or {}
    return [str(server["state"]) for server in report.get("mcp", [])]


async def test_the_daemon_runs_the_servers_and_mcp_list_shows_its_view(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config = write_config(
        tmp_path,
        agent=fake_model(fake_llm),
        telegram=fake_telegram(telegram, (1001,)),
        extra=(
            "[dashboard]\nenabled = false\n"
            f'[[mcp.servers]]\nname = "fake"\ncommand = {json.dumps(sys.executable)}\n'
            f'args = [{json.dumps(SERVER)}]\ntools = ["shout"]\n'
        ),
    )
    async with ClawgateProcess(tmp_path, "--config", str(config), "gateway") as gateway:
        await gateway.wait_for_log("mcp server fake: running, tools shout", START_TIMEOUT)
        # The log line comes first; the status file the CLI reads is rewritten just after.
        await wait_until(lambda: mcp_state(tmp_path / "data") == ["running"], START_TIMEOUT)
        code, out = await clawgate_output(tmp_path, "--config", str(config), "mcp", "list")
        assert code == 0, out
        assert "as the running gateway reports them" in out
        [row] = [line for line in out.splitlines() if "fake" in line]
        assert "stdio" in row and "running" in row and "shout" in row
        gateway.send_signal(signal.SIGTERM)
        assert await gateway.wait(30) == 0
