"""The exec tool: real subprocesses in a tmp workspace."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from clawgate.agent.tools import ToolContext, ToolRegistry, default_tools
from clawgate.agent.tools.shell import deny_reason
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import ToolsConfig
from clawgate.kernel.storage import DiskWriter

API_KEY = "sk-test-4f9a8b7c6d5e"
BOT_TOKEN = "123456:tg-secret-AAbbCCdd"


def make_ctx(
    workspace: Path,
    trust: Trust = Trust.OWNER,
    *,
    secrets: tuple[str, ...] = (API_KEY, BOT_TOKEN),
    **config: Any,
) -> ToolContext:
    return ToolContext(
        workspace=workspace.resolve(),
        trust=trust,
        session_key="cli:local",
        config=ToolsConfig(**config),
        secrets=secrets,
        writer=DiskWriter(),
    )


async def run(ctx: ToolContext, command: str) -> str:
    return await ToolRegistry(default_tools()).execute(
        "exec", json.dumps({"command": command}), ctx
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    return ws.resolve()


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAWGATE_AGENT__API_KEY", API_KEY)
    monkeypatch.setenv("CLAWGATE_CHANNELS__TELEGRAM__TOKEN", BOT_TOKEN)
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_unrelated_but_secret")
    monkeypatch.setenv("DB_PASSWORD", "hunter2-db")
    monkeypatch.setenv("INNOCENT_LOOKING", f"prefix-{BOT_TOKEN}-suffix")
    monkeypatch.setenv("HARMLESS_SETTING", "visible-value")


LEAKS = (API_KEY, BOT_TOKEN, "ghp_unrelated_but_secret", "hunter2-db")


@pytest.mark.usefixtures("secret_env")
@pytest.mark.parametrize(
    "command",
    [
        "env",
        "sh -c 'echo $CLAWGATE_AGENT__API_KEY $OPENAI_API_KEY $INNOCENT_LOOKING'",
        'python3 -c "import os;print(os.environ)"',
        "cat /proc/self/environ | tr '\\0' '\\n'",
    ],
)
@pytest.mark.parametrize("secrets", [(API_KEY, BOT_TOKEN), ()])
async def test_environment_holds_no_credentials(
    workspace: Path, command: str, secrets: tuple[str, ...]
) -> None:
    # With secrets=() nothing is redacted afterwards, so this shows the environment itself is
    # clean by name; INNOCENT_LOOKING is only recognisable by a known secret value.
    result = await run(make_ctx(workspace, secrets=secrets), command)
    assert result.endswith("exit code 0"), result
    for leak in LEAKS if secrets else (API_KEY, "ghp_unrelated_but_secret", "hunter2-db"):
        assert leak not in result
    assert "CLAWGATE_" not in result
    if secrets:
        assert "INNOCENT_LOOKING" not in result
    if command == "env":
        assert "HARMLESS_SETTING=visible-value" in result


async def test_output_is_scrubbed_of_secrets(workspace: Path) -> None:
    (workspace / "leak.txt").write_text(f"key={API_KEY}\n")
    result = await run(make_ctx(workspace), "cat leak.txt")
    assert result == "key=[REDACTED]\nexit code 0"


async def test_exit_code_stdout_and_stderr(workspace: Path) -> None:
    assert await run(make_ctx(workspace), "echo hi") == "hi\nexit code 0"
    result = await run(make_ctx(workspace), "echo out; echo oops >&2; exit 2")
    assert result == "out\n[stderr]\noops\nexit code 2"
    assert await run(make_ctx(workspace), "true") == "(no output)\nexit code 0"


async def test_cwd_is_the_workspace(workspace: Path) -> None:
    assert await run(make_ctx(workspace), "pwd") == f"{workspace}\nexit code 0"
    await run(make_ctx(workspace), "echo made > here.txt")
    assert (workspace / "here.txt").read_text() == "made\n"


def _dead(pid: int) -> bool:
    """Dead: no such process, or a zombie no one has reaped yet (it runs nothing)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def _gone(pid: int) -> bool:
    """SIGKILL is delivered asynchronously: give the kernel a moment before judging."""
    deadline = time.monotonic() + 3
    while not _dead(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


async def test_timeout_kills_the_process_group(workspace: Path) -> None:
    started = time.monotonic()
    result = await run(
        make_ctx(workspace, exec_timeout=1),
        "echo before; sleep 30 & echo $! > child.pid; sleep 30",
    )
    assert time.monotonic() - started < 10
    assert result.startswith("Error: command timed out after 1 s")
    assert "before" in result
    assert _gone(int((workspace / "child.pid").read_text()))


async def test_cancellation_kills_the_process_group(workspace: Path) -> None:
    fifo = workspace / "ready.fifo"
    os.mkfifo(fifo)
    ctx = make_ctx(workspace, exec_timeout=60)
    task = asyncio.create_task(run(ctx, "sleep 30 & echo $! > ready.fifo; wait"))
    # Opening a FIFO for reading blocks until the shell writes the child's pid: our signal.
    pid = int(await asyncio.wait_for(asyncio.to_thread(fifo.read_text), timeout=10))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _gone(pid)


async def test_huge_output_is_capped(workspace: Path) -> None:
    result = await run(make_ctx(workspace, max_result_chars=1000), "yes | head -c 2000000")
    assert len(result) <= 1000
    assert "cut" in result and result.endswith("exit code 0")


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf /",
        "rm -rf ~",
        "rm -fr ../",
        "sudo rm -r --no-preserve-root /",
        ":(){ :|:& };:",
        "mkfs.ext4 /dev/sda",
        "dd if=/dev/zero of=/dev/sda",
        "echo x > /dev/sdb",
        "shutdown -h now",
        "chmod -R 777 /",
    ],
)
async def test_deny_list_refuses(workspace: Path, command: str) -> None:
    (workspace / "canary").write_text("still here")
    result = await run(make_ctx(workspace), command)
    assert result.startswith("Error: command refused by the deny list (")
    assert (workspace / "canary").exists()


@pytest.mark.parametrize(
    "command",
    ["rm -rf build", "rm -f notes.md", "ls -la /", "echo shutdown later", "dd if=a of=/dev/null"],
)
def test_deny_list_lets_ordinary_commands_through(command: str) -> None:
    assert deny_reason(command) is None


@pytest.mark.parametrize("trust", [Trust.ALLOWED, Trust.GROUP])
async def test_exec_is_owner_only(workspace: Path, trust: Trust) -> None:
    result = await run(make_ctx(workspace, trust), "echo hi")
    assert result.startswith("Error: unknown tool 'exec'")


async def test_exec_can_be_disabled(workspace: Path) -> None:
    result = await run(make_ctx(workspace, exec_enabled=False), "echo hi")
    assert result.startswith("Error: unknown tool 'exec'")
    registry = ToolRegistry(default_tools())
    names = [s["function"]["name"] for s in registry.schemas(Trust.OWNER, ToolsConfig())]
    assert "exec" in names
