"""The `clawgate` console script end to end, each run a real subprocess.

A run that reaches the model pays seconds for importing litellm, so only four do; the
others stop before any model is needed.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from clawgate.agent.session import Message, SessionStore
from clawgate.gateway.cli.root import COMMANDS, ClawgateGroup
from clawgate.gateway.cli.root import app as clawgate_app
from clawgate.gateway.daemon.lock import AlreadyRunning, InstanceLock
from clawgate.kernel.config import load_config
from clawgate.kernel.errors import ConfigError, CronError
from tests.fakes.llm import FakeLLM, text
from tests.forked import ForkedChild
from tests.process import CLAWGATE, child_env, fake_model, start_clawgate, write_config

MODEL_RUN_TIMEOUT = 90.0  # litellm import plus one turn, with room for a loaded machine
QUICK_RUN_TIMEOUT = 30.0
# The web tools and MCP libraries too: loaded by the first fetch or server start.
HEAVY_MODULES = (
    "litellm",
    "telegram",
    "discord",
    "apscheduler",
    "mcp",
    "readability",
    "markdownify",
    "pypdf",
    "lxml",
)


@dataclass(frozen=True)
class Run:
    code: int
    stdout: str
    stderr: str

    def stderr_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def closed_loopback_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@asynccontextmanager
async def started(
    home: Path, *args: str, env: Mapping[str, str] | None = None, stdin: int | None = None
) -> AsyncIterator[asyncio.subprocess.Process | ForkedChild]:
    """Stdin /dev/null (forked, tests/forked.py) unless given."""
    process: asyncio.subprocess.Process | ForkedChild
    if stdin is None:
        process = await start_clawgate(home, *args, env=env)
    else:
        process = await asyncio.create_subprocess_exec(
            str(CLAWGATE),
            *args,
            stdin=stdin,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=child_env(home, env),
            cwd=home,
        )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def clawgate(
    home: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    timeout: float = QUICK_RUN_TIMEOUT,
) -> Run:
    async with started(home, *args, env=env) as process:
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout)
        assert process.returncode is not None
        return Run(process.returncode, stdout.decode(), stderr.decode())


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def messages_of(path: Path) -> list[dict[str, Any]]:
    return [line for line in read_jsonl(path) if "role" in line]


def user_texts(request: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in request["messages"] if m.get("role") == "user"]


# --- talking to the model -------------------------------------------------------------


async def test_one_shot_message_prints_reply_and_records_session(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("Hello from the fake."))
    config = write_config(tmp_path, agent=fake_model(fake_llm))

    run = await clawgate(
        tmp_path, "--config", str(config), "agent", "-m", "hello", timeout=MODEL_RUN_TIMEOUT
    )

    assert run.code == 0, run.stderr
    assert run.stdout.strip() == "Hello from the fake."
    assert len(fake_llm.requests) == 1
    assert any("hello" in t for t in user_texts(fake_llm.requests[0]))
    session_file = tmp_path / "workspace" / "sessions" / "cli_default.jsonl"
    header = read_jsonl(session_file)[0]
    assert header["type"] == "session"
    assert header["key"] == "cli:default"
    user, assistant = messages_of(session_file)
    assert (user["seq"], user["role"], user["content"]) == (1, "user", "hello")
    assert (assistant["seq"], assistant["role"]) == (2, "assistant")
    assert assistant["content"] == "Hello from the fake."
    assert user["timestamp"] and assistant["timestamp"]


async def test_session_option_picks_the_session_file(tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.script(text("Working on it."))
    config = write_config(tmp_path, agent=fake_model(fake_llm))

    # The config comes from CLAWGATE_CONFIG here, not --config.
    run = await clawgate(
        tmp_path,
        "agent",
        "--session",
        "work",
        "-m", "plan my week",
        env={"CLAWGATE_CONFIG": str(config)},
        timeout=MODEL_RUN_TIMEOUT,
    )  # fmt: skip

    assert run.code == 0, run.stderr
    assert run.stdout.strip() == "Working on it."
    sessions = tmp_path / "workspace" / "sessions"
    assert read_jsonl(sessions / "cli_work.jsonl")[0]["key"] == "cli:work"
    assert [m["content"] for m in messages_of(sessions / "cli_work.jsonl")] == [
        "plan my week",
        "Working on it.",
    ]
    assert not (sessions / "cli_default.jsonl").exists()


async def test_piped_lines_are_answered_as_each_reply_is_ready(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("first answer"), text("second answer"))
    config = write_config(tmp_path, agent=fake_model(fake_llm))

    async with started(
        tmp_path,
        "--config", str(config), "agent", "--session", "pipe",
        stdin=asyncio.subprocess.PIPE,
    ) as process:  # fmt: skip
        assert process.stdin and process.stdout and process.stderr
        process.stdin.write(b"line one\n")
        await process.stdin.drain()
        # Line two is not written yet: a CLI that answered only at end of input stalls here.
        first = await asyncio.wait_for(process.stdout.readline(), MODEL_RUN_TIMEOUT)
        assert first == b"first answer\n"
        assert len(fake_llm.requests) == 1

        process.stdin.write(b"line two\n")
        await process.stdin.drain()
        process.stdin.close()
        second = await asyncio.wait_for(process.stdout.readline(), MODEL_RUN_TIMEOUT)
        code = await asyncio.wait_for(process.wait(), QUICK_RUN_TIMEOUT)
        rest = await process.stdout.read()
        stderr = (await process.stderr.read()).decode()

    assert second == b"second answer\n"
    assert rest == b""
    assert code == 0, stderr
    # Both lines went to one session: the second request carries the first exchange.
    second_request = fake_llm.requests[1]["messages"]
    assert any(m.get("content") == "first answer" for m in second_request)
    session_file = tmp_path / "workspace" / "sessions" / "cli_pipe.jsonl"
    assert [m["content"] for m in messages_of(session_file)] == [
        "line one",
        "first answer",
        "line two",
        "second answer",
    ]


async def test_unreachable_model_fails_fast_with_one_line(tmp_path: Path) -> None:
    port = closed_loopback_port()
    config = write_config(
        tmp_path,
        agent={
            "model": "openai/fake-model",
            "api_base": f"http://127.0.0.1:{port}/v1",
            "api_key": "sk-test-secret",
            "request_timeout": 2,
            "max_retries": 0,
        },
    )

    started_at = time.monotonic()
    run = await clawgate(
        tmp_path, "--config", str(config), "agent", "-m", "hello", timeout=MODEL_RUN_TIMEOUT
    )
    elapsed = time.monotonic() - started_at

    assert run.code == 1
    assert "Traceback" not in run.stderr
    [line] = run.stderr_lines()
    assert "openai/fake-model" in line
    assert "sk-test-secret" not in run.stderr
    assert run.stdout.strip() == ""
    # ~7 s of it is importing litellm; the default timeout and retries would take minutes.
    assert elapsed < 20, f"took {elapsed:.1f}s"
    session_file = tmp_path / "workspace" / "sessions" / "cli_default.jsonl"
    assert [(m["role"], m["content"]) for m in messages_of(session_file)] == [("user", "hello")]


# --- stopping before the model: one clear line, exit 2 ---------------------------------


async def test_agent_without_model_says_what_to_set(tmp_path: Path) -> None:
    config = write_config(tmp_path)

    run = await clawgate(tmp_path, "--config", str(config), "agent", "-m", "hi")

    assert run.code == 2
    [line] = run.stderr_lines()
    assert "[agent] model" in line
    assert "CLAWGATE_AGENT__MODEL" in line
    assert run.stdout == ""
    assert not (tmp_path / "workspace" / "sessions").exists()


@pytest.mark.parametrize(
    ("agent", "telegram", "expected"),
    [
        ({}, {}, "[agent] model"),
        ({"model": "openai/fake-model"}, {}, "[channels.telegram] enabled = true"),
        ({"model": "openai/fake-model"}, {"enabled": True}, "[channels.telegram] token"),
    ],
    ids=["no-model", "no-channel", "channel-without-token"],
)
async def test_gateway_not_ready_says_what_to_set(
    tmp_path: Path, agent: dict[str, Any], telegram: dict[str, Any], expected: str
) -> None:
    config = write_config(tmp_path, agent=agent, telegram=telegram)

    run = await clawgate(tmp_path, "--config", str(config), "gateway")

    assert run.code == 2
    first, *problems, last = run.stderr_lines()
    assert first == "clawgate: not ready to start:"
    assert any(expected in line for line in problems), problems
    assert "`clawgate onboard`" in last
    assert not (tmp_path / "data" / "gateway.lock").exists()


@pytest.mark.parametrize(
    ("extra", "env", "named"),
    [
        ("temprature = 1", {}, ["temprature", "config.toml"]),
        ("", {"CLAWGATE_AGENT__TEMPRATURE": "1"}, ["agent.temprature", "CLAWGATE_AGENT__"]),
    ],
    ids=["in-file", "from-env"],
)
async def test_bad_config_is_one_line_naming_the_key(
    tmp_path: Path, extra: str, env: dict[str, str], named: list[str]
) -> None:
    config = write_config(tmp_path, extra=extra)

    run = await clawgate(tmp_path, "--config", str(config), "agent", "-m", "hi", env=env)

    assert run.code == 2
    assert "Traceback" not in run.stderr
    [line] = run.stderr_lines()
    for name in named:
        assert name in line


# --- commands that never need a model -------------------------------------------------


async def test_help_lists_the_commands(tmp_path: Path) -> None:
    run = await clawgate(tmp_path, "--help")

    assert run.code == 0
    for command in ("onboard", "agent", "gateway", "sessions"):
        assert command in run.stdout


async def test_model_free_commands_import_no_heavy_library(tmp_path: Path) -> None:
    # Importing litellm costs seconds; --help and the no-model paths must never pay it.
    script = textwrap.dedent(
        f"""
        import sys
        from clawgate.gateway.cli import app

        for argv in (["--help"], ["agent", "-m", "hi"], ["sessions", "list"]):
            try:
                app(argv, prog_name="clawgate")
            except SystemExit as exit:
                print("exit", argv[0], exit.code)
        print("heavy", [m for m in {HEAVY_MODULES!r} if m in sys.modules])
        """
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=child_env(tmp_path),
        cwd=tmp_path,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), QUICK_RUN_TIMEOUT)
    lines = stdout.decode().splitlines()

    assert process.returncode == 0, stderr.decode()
    assert "exit --help 0" in lines
    assert "exit agent 2" in lines
    assert "exit sessions 0" in lines
    assert lines[-1] == "heavy []"


def test_help_imports_neither_the_commands_nor_rich() -> None:
    # Commands load when named and help is plain: --help pays for neither.
    script = textwrap.dedent(
        """
        import sys
        from clawgate.gateway.cli import app

        try:
            app(["--help"], prog_name="clawgate")
        except SystemExit:
            pass
        loaded = [m for m in sys.modules if m.startswith(("clawgate.gateway.cli.", "rich"))]
        print("loaded", sorted(loaded))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=QUICK_RUN_TIMEOUT
    )
    assert result.returncode == 0, result.stderr
    for name in COMMANDS:
        assert name in result.stdout
    assert result.stdout.splitlines()[-1] == (
        "loaded ['clawgate.gateway.cli.context', 'clawgate.gateway.cli.root']"
    )


@pytest.mark.parametrize(
    "name", sorted(n for n, c in COMMANDS.items() if c.attribute.endswith("_app"))
)
def test_a_lazy_sub_app_is_listed_with_its_own_help_and_runs(name: str) -> None:
    result = CliRunner().invoke(clawgate_app, [name, "--help"])
    assert result.exit_code == 0
    assert f"Usage: clawgate {name} [OPTIONS] COMMAND [ARGS]..." in result.stdout
    assert COMMANDS[name].help in " ".join(result.stdout.split())


def test_user_errors_become_one_line_and_bugs_keep_their_traceback() -> None:
    """The root group is the one place a ClawgateError is caught, at any depth of sub-app."""
    app = typer.Typer(cls=ClawgateGroup)
    sub = typer.Typer()
    app.add_typer(sub, name="sub")

    @app.command()
    def config() -> None:
        raise ConfigError("bad value for 'agent.model':\n  not a string")

    @sub.command()
    def cron() -> None:
        raise CronError("no job with id 'x'")

    @sub.command()
    def bug() -> None:
        raise KeyError("bug")

    runner = CliRunner()
    bad_config = runner.invoke(app, ["config"])
    assert (bad_config.exit_code, bad_config.stderr) == (
        2,
        "clawgate: bad value for 'agent.model': not a string\n",
    )
    failed = runner.invoke(app, ["sub", "cron"])
    assert (failed.exit_code, failed.stderr) == (1, "clawgate: no job with id 'x'\n")
    crashed = runner.invoke(app, ["sub", "bug"])
    assert isinstance(crashed.exception, KeyError)


async def test_onboard_creates_private_config_and_never_overwrites(tmp_path: Path) -> None:
    workspace = tmp_path / "assistant"

    first = await clawgate(tmp_path, "onboard", "--workspace", str(workspace))

    assert first.code == 0, first.stderr
    # No --config: the default under HOME, which proves `~` is the child's HOME.
    config_path = tmp_path / ".clawgate" / "config.toml"
    assert stat.S_IMODE(config_path.stat().st_mode) == 0o600
    assert load_config(config_path, environ={}).workspace == workspace
    for name in ("AGENTS.md", "SOUL.md", "USER.md", "TOOLS.md", "HEARTBEAT.md"):
        assert (workspace / name).is_file(), name
    assert (workspace / "sessions").is_dir()
    assert f"created  {config_path}" in first.stdout

    (workspace / "AGENTS.md").write_text("my own rules\n")
    config_path.write_text(config_path.read_text() + "# my note\n")
    before = {p: p.read_bytes() for p in [config_path, *workspace.rglob("*")] if p.is_file()}

    second = await clawgate(tmp_path, "onboard", "--workspace", str(workspace))

    assert second.code == 0, second.stderr
    assert "created" not in second.stdout
    assert f"kept     {config_path}" in second.stdout
    after = {p: p.read_bytes() for p in [config_path, *workspace.rglob("*")] if p.is_file()}
    assert after == before


async def test_sessions_list_and_show_read_transcripts(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    store = SessionStore(tmp_path / "workspace" / "sessions")
    session = await store.get("cli:default")
    store.append(session, Message(role="user", content="remember milk"))
    last = store.append(session, Message(role="assistant", content="Noted: milk."))
    await store.sync(session)

    listed = await clawgate(tmp_path, "--config", str(config), "sessions", "list")
    shown = await clawgate(
        tmp_path, "--config", str(config), "sessions", "show", "cli:default", "--tail", "1"
    )
    as_json = await clawgate(
        tmp_path, "--config", str(config), "sessions", "show", "cli:default", "--json"
    )
    missing = await clawgate(tmp_path, "--config", str(config), "sessions", "show", "cli:nope")

    assert listed.code == 0, listed.stderr
    rows = [line.split("\t") for line in listed.stdout.splitlines()]
    assert rows[1] == ["cli:default", "2", "2", last.timestamp, "cli_default.jsonl"]
    assert shown.code == 0, shown.stderr
    assert shown.stdout.splitlines() == [f"#2 {last.timestamp} assistant: Noted: milk."]
    assert [json.loads(line)["content"] for line in as_json.stdout.splitlines()] == [
        "remember milk",
        "Noted: milk.",
    ]
    assert missing.code == 1
    assert "cli:nope" in missing.stderr


# --- one gateway per data_dir ---------------------------------------------------------


def test_instance_lock_is_exclusive_and_names_the_holder(tmp_path: Path) -> None:
    first = InstanceLock(tmp_path / "data")
    first.acquire()
    try:
        with pytest.raises(AlreadyRunning, match=rf"pid {os.getpid()}\b"):
            InstanceLock(tmp_path / "data").acquire()
    finally:
        first.release()

    with InstanceLock(tmp_path / "data"):
        pass


async def test_second_gateway_is_refused_before_any_channel_starts(tmp_path: Path) -> None:
    # Telegram points at a closed loopback port: if the lock were ever checked too late,
    # nothing may leave this machine.
    config = write_config(
        tmp_path,
        agent={"model": "openai/fake-model", "api_key": "sk-test-secret"},
        telegram={
            "enabled": True,
            "token": "123:fake",
            "base_url": f"http://127.0.0.1:{closed_loopback_port()}/bot",
        },
    )

    with InstanceLock(tmp_path / "data"):
        run = await clawgate(tmp_path, "--config", str(config), "gateway")

    assert run.code == 2
    assert "Traceback" not in run.stderr
    [line] = run.stderr_lines()
    assert "another clawgate gateway" in line
    assert f"pid {os.getpid()}" in line
