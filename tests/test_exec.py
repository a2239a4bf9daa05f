"""The exec tool: real subprocesses in a tmp workspace, called directly and, for the limits
that protect the gateway, through the agent loop, litellm and the loopback fake model."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from clawgate.agent.loop import TIMED_OUT_RESULT
from clawgate.agent.memory.lock import MemoryLock
from clawgate.agent.tools import ToolContext, ToolRegistry, default_tools
from clawgate.agent.tools.shell import deny_reason
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import AgentConfig, ToolsConfig
from clawgate.kernel.storage import DiskWriter
from tests.fakes.llm import FakeLLM, text, tool_call
from tests.harness import Harness, make_config
from tests.process import CLAWGATE, child_env, fake_model, write_config

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
        config=ToolsConfig(**{"exec_approval": "never", **config}),
        secrets=secrets,
        writer=(disk := DiskWriter()),
        memory_lock=MemoryLock(workspace.resolve(), disk),
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
    ctx = make_ctx(workspace, secrets=secrets, exec_env_allow=["HARMLESS_SETTING"])
    result = await run(ctx, command)
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


# Through the agent loop: the model (the loopback fake, via litellm) asks for the command.


MODEL_START = 60  # seconds
TOOL_BOUND = 10  # a 1-2 s exec timeout, the kill and a loaded machine's slack


def _tool_results(fake_llm: FakeLLM) -> list[str]:
    return [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] == "tool"]


async def _exec_turn(
    tmp_path: Path, fake_llm: FakeLLM, agent: AgentConfig, command: str, **tools: Any
) -> str:
    """Run one owner turn in which the model calls exec once; the tool's result."""
    fake_llm.script(tool_call("exec", command=command), text("done"))
    config = make_config(tmp_path, agent, tools=ToolsConfig(**{"exec_approval": "never", **tools}))
    async with Harness(config) as harness:
        await harness.channel.say("run it")
        # litellm's first import takes seconds: time the tool from the model's first answer.
        await fake_llm.wait_for_requests(1, timeout=MODEL_START)
        started = time.monotonic()
        reply = await harness.channel.next_reply(timeout=TOOL_BOUND)
        assert time.monotonic() - started < TOOL_BOUND
    assert reply.text == "done"
    return _tool_results(fake_llm)[-1]


@pytest.mark.parametrize("command", ["yes", "cat /dev/zero"])
async def test_timeout_ends_commands_with_endless_output(
    tmp_path: Path, fake_llm: FakeLLM, agent_config: AgentConfig, command: str
) -> None:
    # The pipe never reaches EOF while they run: the call must not wait for it.
    result = await _exec_turn(tmp_path, fake_llm, agent_config, command, exec_timeout=2)
    assert result.startswith("Error: command timed out after 2 s")
    assert len(result) < 2 * 16_000 + 200  # the head and tail kept, the rest discarded


async def test_turn_limit_frees_the_session_whatever_the_tool_does(
    tmp_path: Path, fake_llm: FakeLLM, agent_config: AgentConfig
) -> None:
    agent_config.turn_timeout_seconds = 1
    fake_llm.script(tool_call("exec", command="echo $$ > shell.pid; sleep 30"))
    config = make_config(
        tmp_path, agent_config, tools=ToolsConfig(exec_timeout=60, exec_approval="never")
    )
    async with Harness(config) as harness:
        await harness.channel.say("something slow")
        await fake_llm.wait_for_requests(1, timeout=MODEL_START)
        reply = await harness.channel.next_reply(timeout=TOOL_BOUND)
        assert reply.is_error and "longer than its 1 s limit" in reply.text
        assert "\n" not in reply.text
        assert await harness.gateway.default.dispatcher.wait_idle(5)
        assert _gone(int((harness.workspace / "shell.pid").read_text()))
        path = harness.runtime.sessions.path_for("test:1")
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        messages = [line for line in lines if "role" in line]
        assert messages[-1]["role"] == "tool" and messages[-1]["content"] == TIMED_OUT_RESULT
        fake_llm.script(text("ok"))
        assert (await harness.ask("next")).text == "ok"


@pytest.mark.parametrize(
    "command",
    [
        # Output elsewhere: the shell exits at once and nothing holds the call open.
        "sleep 1000 >/dev/null 2>&1 & echo $! > bg.pid",
        # A session of its own: out of reach of the process-group kill.
        "setsid sleep 1000 & echo $! > bg.pid",
        # Double fork: re-parented to init, in its own session, holding none of our pipes.
        "(setsid sleep 1000 >/dev/null 2>&1 & echo $! > bg.pid); sleep 0.2",
    ],
)
async def test_background_processes_do_not_outlive_the_call(
    tmp_path: Path, fake_llm: FakeLLM, agent_config: AgentConfig, command: str
) -> None:
    await _exec_turn(tmp_path, fake_llm, agent_config, command, exec_timeout=1)
    assert _gone(int((tmp_path / "workspace" / "bg.pid").read_text()))


SECRETS_IN_ENV = {
    "DATABASE_URL": "postgres://app:db-pass-1@127.0.0.1/app",
    "GITHUB_PAT": "github_pat_11AAAA",
    "MYSQL_PWD": "mysql-pass-2",
    "SENTRY_DSN": "https://sentrykey3@127.0.0.1/1",
    "HTTPS_PROXY": "http://user:proxy-pass-4@127.0.0.1:3128",
}


async def test_environment_is_an_allowlist(
    tmp_path: Path,
    fake_llm: FakeLLM,
    agent_config: AgentConfig,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in SECRETS_IN_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OWNER_SETTING", "visible-value")
    monkeypatch.setenv("OTHER_SETTING", "hidden-value")
    result = await _exec_turn(
        tmp_path, fake_llm, agent_config, "env", exec_env_allow=["OWNER_SETTING"]
    )
    for name, value in SECRETS_IN_ENV.items():
        assert name not in result and value not in result
    assert "OTHER_SETTING" not in result
    assert f"PATH={os.environ['PATH']}" in result
    assert "OWNER_SETTING=visible-value" in result


async def test_gateway_environment_is_unreadable_from_exec(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    # Root with capabilities reads any process's environ, dumpable or not (checked on this
    # kernel: dropping CAP_SYS_PTRACE alone is not enough). Run as root, the gateway gets no
    # capabilities, so it and its commands are what an unprivileged account would be: one
    # user, where only the gateway's dumpable flag keeps its environment closed.
    prefix: tuple[str, ...] = ()
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root and setpriv (util-linux) is missing")
        prefix = ("setpriv", "--bounding-set=-all", "--inh-caps=-all")
    fake_llm.script(
        tool_call(
            "exec",
            # $PPID is the per-call reaper; its parent is the gateway.
            command="cat /proc/$(cut -d' ' -f4 /proc/$PPID/stat)/environ; echo read-exit=$?",
        ),
        text("done"),
    )
    config = write_config(tmp_path, agent=fake_model(fake_llm))
    child = await asyncio.create_subprocess_exec(
        *prefix,
        str(CLAWGATE),
        *("--config", str(config), "agent", "-m", "env?"),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=child_env(tmp_path),
        cwd=tmp_path,
    )
    _, stderr = await asyncio.wait_for(child.communicate(), MODEL_START)
    assert child.returncode == 0, stderr.decode(errors="replace")
    result = _tool_results(fake_llm)[-1]
    assert "Permission denied" in result and "read-exit=1" in result, result
    assert "HOME=" not in result
