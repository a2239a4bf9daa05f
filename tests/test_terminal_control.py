"""`clawgate agent` and the workspace it shares: through a running gateway's control socket,
alone under the instance lock, and interrupted with /stop or Ctrl-C on a real terminal (a
pty). Every process here is the real console script against the loopback fakes.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import signal
import socket
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from clawgate.gateway.daemon.control import socket_path
from clawgate.gateway.daemon.lock import AGENT, InstanceLock
from tests.fakes.llm import FakeLLM, Reply, gate, text, tool_call
from tests.fakes.telegram import FakeTelegram
from tests.forked import ForkedChild
from tests.harness import wait_until
from tests.process import (
    ClawgateProcess,
    fake_model,
    fake_telegram,
    start_clawgate,
    write_config,
)
from tests.pty_terminal import start_on_terminal

OWNER = 1001
START_TIMEOUT = 60.0
RUN_TIMEOUT = 120.0  # litellm's import on the first call, on a loaded machine
EXIT_TIMEOUT = 40.0
HISTORY_ENTRY = "Talked about green tea."


class Cli:
    """One `clawgate ...` child with its stdout and stderr read line by line as written."""

    def __init__(self, home: Path, *args: str, env: Mapping[str, str] | None = None) -> None:
        self.home, self.args, self.env = home, args, env
        self.out: list[str] = []
        self.err: list[str] = []
        self._changed = asyncio.Condition()
        self._process: asyncio.subprocess.Process | ForkedChild | None = None
        self._readers: list[asyncio.Task[None]] = []

    async def start(self) -> Cli:
        self._process = await start_clawgate(self.home, *self.args, env=self.env)
        assert self._process.stdout and self._process.stderr
        self._readers = [
            asyncio.create_task(self._read(self._process.stdout, self.out)),
            asyncio.create_task(self._read(self._process.stderr, self.err)),
        ]
        return self

    async def _read(self, stream: asyncio.StreamReader, into: list[str]) -> None:
        while line := await stream.readline():
            async with self._changed:
                into.append(line.decode(errors="replace").rstrip("\n"))
                self._changed.notify_all()

    async def wait_for_stderr(self, text: str, timeout: float) -> None:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: any(text in line for line in self.err))

    async def finish(self, timeout: float = RUN_TIMEOUT) -> int:
        assert self._process is not None
        code = await asyncio.wait_for(self._process.wait(), timeout)
        await asyncio.wait_for(asyncio.gather(*self._readers), timeout)
        return code

    async def close(self) -> None:
        if self._process is not None and self._process.returncode is None:
            self._process.kill()
            await self._process.wait()
        for reader in self._readers:
            reader.cancel()


@asynccontextmanager
async def cli(home: Path, *args: str, env: Mapping[str, str] | None = None) -> AsyncIterator[Cli]:
    child = Cli(home, *args, env=env)
    try:
        yield await child.start()
    finally:
        await child.close()


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def wants_memory(body: dict[str, Any]) -> bool:
    return any(tool["function"]["name"] == "save_memory" for tool in body.get("tools") or [])


def save_memory() -> Reply:
    return tool_call("save_memory", history_entry=HISTORY_ENTRY)


@asynccontextmanager
async def running_gateway(
    home: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> AsyncIterator[ClawgateProcess]:
    config = write_config(
        home,
        agent=fake_model(fake_llm, request_timeout=60),
        telegram=fake_telegram(telegram, (OWNER,)),
    )
    async with ClawgateProcess(home, "--config", str(config), "gateway") as gateway:
        await gateway.wait_for_log("channel telegram ready", START_TIMEOUT)
        yield gateway
        gateway.send_signal(signal.SIGTERM)
        assert await gateway.wait(EXIT_TIMEOUT) == 0, gateway.stderr


async def test_agent_beside_a_gateway_is_answered_by_the_gateway(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = lambda body: (
        save_memory() if wants_memory(body) else text("From the daemon.")
    )
    # The terminal's own config cannot reach the model: only the daemon can answer.
    unreachable = {"CLAWGATE_AGENT__API_BASE": f"http://127.0.0.1:{closed_port()}/v1"}
    config = str(tmp_path / "config.toml")
    sessions = tmp_path / "workspace" / "sessions"

    async with running_gateway(tmp_path, telegram, fake_llm):
        async with cli(tmp_path, "--config", config, "agent", "-m", "hi", env=unreachable) as one:
            assert await one.finish() == 0, one.err
        assert one.out == ["From the daemon."]
        session = sessions / "cli_default.jsonl"
        said = [(r["seq"], r["role"], r["content"]) for r in lines_of(session) if "role" in r]
        assert said == [(1, "user", "hi"), (2, "assistant", "From the daemon.")]
        # The daemon's channel manager delivered it over the socket and records that.
        sent = {"type": "delivery", "seq": 2, "status": "sent"}
        await wait_until(
            lambda: any(sent.items() <= r.items() for r in lines_of(session)), timeout=10
        )

        # Commands go through the daemon too.
        async with cli(tmp_path, "--config", config, "agent", "-m", "/new", env=unreachable) as new:
            assert await new.finish() == 0, new.err
        assert new.out and "Traceback" not in "\n".join(new.err)
        assert list((sessions / "archive").glob("cli_default.*.jsonl"))


async def test_agent_beside_a_gateway_does_not_archive_a_transcript_twice(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    release = asyncio.Event()
    archives: list[dict[str, Any]] = []

    def answer(body: dict[str, Any]) -> Reply:
        if not wants_memory(body):
            return text("Noted.")
        archives.append(body)
        # The daemon's archive of the transcript is held in flight.
        return gate(release, save_memory()) if len(archives) == 1 else save_memory()

    fake_llm.handler = answer
    config = str(tmp_path / "config.toml")
    async with running_gateway(tmp_path, telegram, fake_llm) as gateway:
        telegram.user_says(OWNER, "I like green tea")
        assert (await telegram.next_message(OWNER, timeout=RUN_TIMEOUT))["text"] == "Noted."
        telegram.user_says(OWNER, "/new")
        await telegram.next_message(OWNER, timeout=RUN_TIMEOUT)
        await wait_until(lambda: len(archives) == 1, timeout=RUN_TIMEOUT)

        async with cli(tmp_path, "--config", config, "agent", "-m", "hello") as terminal:
            assert await terminal.finish() == 0, terminal.err
        assert terminal.out == ["Noted."]
        release.set()
    # The gateway has stopped: whatever it was archiving has landed.

    history = tmp_path / "workspace" / "memory" / "HISTORY.md"
    assert history.exists(), gateway.stderr
    assert history.read_text(encoding="utf-8").count(HISTORY_ENTRY) == 1
    assert len(archives) == 1


async def test_parallel_one_shots_without_a_gateway_never_share_a_seq(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    release = asyncio.Event()
    fake_llm.handler = lambda body: gate(release, text("Done."))
    config = str(write_config(tmp_path, agent=fake_model(fake_llm, request_timeout=60)))

    async with (
        cli(tmp_path, "--config", config, "agent", "-m", "first") as first,
        cli(tmp_path, "--config", config, "agent", "-m", "second") as second,
    ):
        await fake_llm.wait_for_requests(1, timeout=RUN_TIMEOUT)
        # Whichever came second must not start a turn on the session the first is writing.
        waiting = [first.wait_for_stderr("waiting for", RUN_TIMEOUT)]
        waiting.append(second.wait_for_stderr("waiting for", RUN_TIMEOUT))
        waiting.append(fake_llm.wait_for_requests(2, timeout=RUN_TIMEOUT))
        _, pending = await asyncio.wait(
            [asyncio.ensure_future(w) for w in waiting], return_when=asyncio.FIRST_COMPLETED
        )
        for task in pending:
            task.cancel()
        release.set()
        codes = [await first.finish(), await second.finish()]

    assert codes == [0, 0], (first.err, second.err)
    assert first.out == second.out == ["Done."]
    messages = [
        r for r in lines_of(tmp_path / "workspace/sessions/cli_default.jsonl") if "role" in r
    ]
    # One turn after the other: never two users' lines before an answer, never a seq twice.
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert [m["seq"] for m in messages] == [1, 2, 3, 4]
    assert sorted(m["content"] for m in messages if m["role"] == "user") == ["first", "second"]
    waiter = first if any("waiting for" in line for line in first.err) else second
    [line] = [line for line in waiter.err if line.strip()]
    assert "clawgate agent (pid" in line


async def test_a_reply_finished_in_the_shutdown_grace_reaches_the_terminal(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    release = asyncio.Event()
    fake_llm.handler = lambda body: gate(release, text("Finished in the grace."))
    config = write_config(
        tmp_path,
        agent=fake_model(fake_llm, request_timeout=60),
        telegram=fake_telegram(telegram, (OWNER,)),
    )
    socket_file = socket_path(tmp_path / "data")
    async with ClawgateProcess(tmp_path, "--config", str(config), "gateway") as gateway:
        await gateway.wait_for_log("channel telegram ready", START_TIMEOUT)
        async with cli(tmp_path, "--config", str(config), "agent", "-m", "slow") as terminal:
            await fake_llm.wait_for_requests(1, timeout=RUN_TIMEOUT)
            gateway.send_signal(signal.SIGTERM)
            # Stopping: no new terminal gets in, while the one waiting keeps its connection.
            await wait_until(lambda: not socket_file.exists(), timeout=EXIT_TIMEOUT)
            release.set()
            assert await terminal.finish() == 0, terminal.err
        assert terminal.out == ["Finished in the grace."]
        assert await gateway.wait(EXIT_TIMEOUT) == 0, gateway.stderr


async def test_a_turn_cancelled_by_the_shutdown_grace_says_it_stopped_before_answering(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = lambda body: gate(asyncio.Event(), text("Never sent."))
    agent = {**fake_model(fake_llm, request_timeout=60), "shutdown_grace_seconds": 1}
    config = write_config(tmp_path, agent=agent, telegram=fake_telegram(telegram, (OWNER,)))
    async with ClawgateProcess(tmp_path, "--config", str(config), "gateway") as gateway:
        await gateway.wait_for_log("channel telegram ready", START_TIMEOUT)
        async with cli(tmp_path, "--config", str(config), "agent", "-m", "slow") as terminal:
            await fake_llm.wait_for_requests(1, timeout=RUN_TIMEOUT)
            gateway.send_signal(signal.SIGTERM)
            assert await terminal.finish() == 1
        assert terminal.out == []
        assert "the gateway stopped before answering" in "\n".join(terminal.err)
        assert await gateway.wait(EXIT_TIMEOUT) == 0, gateway.stderr


async def test_a_gateway_started_beside_a_terminal_waits_for_it(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    config = write_config(
        tmp_path, agent=fake_model(fake_llm), telegram=fake_telegram(telegram, (OWNER,))
    )
    terminal = InstanceLock(tmp_path / "data", role=AGENT)  # what `clawgate agent` holds
    terminal.acquire()
    try:
        async with ClawgateProcess(tmp_path, "--config", str(config), "gateway") as gateway:
            await gateway.wait_for_log(f"waiting for clawgate agent (pid {os.getpid()})", 30)
            assert telegram.calls["getMe"] == 0  # it polls nothing while the terminal runs
            terminal.release()
            await gateway.wait_for_log("channel telegram ready", START_TIMEOUT)
            gateway.send_signal(signal.SIGTERM)
            assert await gateway.wait(EXIT_TIMEOUT) == 0, gateway.stderr
    finally:
        terminal.release()


class Pty:
    """`clawgate agent` on a pseudo-terminal it controls, so ^C is a real SIGINT."""

    def __init__(self, home: Path, *args: str) -> None:
        self.home, self.args = home, args
        self.screen = ""
        self._changed = asyncio.Event()
        self._master = -1
        self._process: asyncio.subprocess.Process | ForkedChild | None = None

    async def start(self) -> Pty:
        master, slave = pty.openpty()
        self._master = master
        try:
            self._process = await start_on_terminal(self.home, self.args, {"TERM": "dumb"}, slave)
        finally:
            os.close(slave)
        os.set_blocking(master, False)
        asyncio.get_running_loop().add_reader(master, self._on_output)
        return self

    def _on_output(self) -> None:
        try:
            chunk = os.read(self._master, 65536)
        except OSError:  # EIO: the child closed the terminal
            chunk = b""
        if not chunk:
            asyncio.get_running_loop().remove_reader(self._master)
            return
        self.screen += chunk.decode(errors="replace")
        self._changed.set()

    async def wait_for(self, text: str, count: int = 1, timeout: float = RUN_TIMEOUT) -> None:
        try:
            async with asyncio.timeout(timeout):
                while self.screen.count(text) < count:
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(f"no {text!r} x{count} on the terminal:\n{self.screen}") from None

    def type(self, keys: str) -> None:
        os.write(self._master, keys.encode())

    async def exit_code(self, timeout: float = EXIT_TIMEOUT) -> int:
        assert self._process is not None
        return await asyncio.wait_for(self._process.wait(), timeout)

    async def close(self) -> None:
        if self._process is not None and self._process.returncode is None:
            self._process.kill()
            await self._process.wait()
        if self._master >= 0:
            asyncio.get_running_loop().remove_reader(self._master)
            os.close(self._master)
            self._master = -1


async def stop_twice_then_quit(tmp_path: Path, config: str, fake_llm: FakeLLM) -> None:
    """A slow reply is cancelled by /stop, the next by Ctrl-C; a second Ctrl-C quits (one
    while nothing runs only warns)."""
    never = asyncio.Event()  # the model's replies are never released
    fake_llm.handler = lambda body: gate(never, text("Too late."))
    terminal = await Pty(tmp_path, "--config", config, "agent").start()
    try:
        await terminal.wait_for("you> ")
        terminal.type("\x03")  # nothing runs: the first Ctrl-C only warns
        await terminal.wait_for("(Ctrl-C again to quit)")
        terminal.type("tell me a long story\n")
        requests = len(fake_llm.requests)
        await fake_llm.wait_for_requests(requests + 1, timeout=RUN_TIMEOUT)
        await terminal.wait_for("thinking")  # the spinner: stdout is a terminal
        terminal.type("/stop\n")
        await terminal.wait_for("Stopped.")

        terminal.type("and another\n")
        await fake_llm.wait_for_requests(requests + 2, timeout=RUN_TIMEOUT)
        terminal.type("\x03")
        await terminal.wait_for("Stopped.", count=2)
        terminal.type("\x03")
        assert await terminal.exit_code() == 130
    finally:
        await terminal.close()
    assert "Too late." not in terminal.screen
    session = tmp_path / "workspace" / "sessions" / "cli_default.jsonl"
    said = [(r["role"], r["content"]) for r in lines_of(session) if "role" in r]
    assert ("user", "tell me a long story") in said and ("user", "and another") in said
    assert all(role != "assistant" for role, _ in said)


async def test_stop_and_ctrl_c_cancel_a_slow_turn_in_process(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    config = str(write_config(tmp_path, agent=fake_model(fake_llm, request_timeout=60)))
    await stop_twice_then_quit(tmp_path, config, fake_llm)


async def test_stop_and_ctrl_c_cancel_a_slow_turn_through_the_gateway(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    async with running_gateway(tmp_path, telegram, fake_llm):
        await stop_twice_then_quit(tmp_path, str(tmp_path / "config.toml"), fake_llm)
