"""Running the real `clawgate` console script as a child process, for tests.

The child gets HOME = the test's tmp_path and an environment without CLAWGATE_* overrides
or proxies, so its config is exactly the file the test wrote and its traffic stays on
loopback. It is started with asyncio, so the in-process fakes keep serving while the test
waits on it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tests import forked
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import TOKEN, FakeTelegram

CLAWGATE = Path(sys.executable).with_name("clawgate")
# tests/conftest.py sets it: children forked from an imported clawgate (tests/forked.py)
# instead of each paying the import. The benches leave it off and start real processes.
FORK = False


def forkable(env: Mapping[str, str]) -> bool:
    """Whether a child with this environment may be forked: what the dynamic loader and the
    interpreter read only at exec (LD_PRELOAD for libfaketime, PYTHON*) must be what the
    zygote started with (this process's)."""
    if not FORK:
        return False
    names = {n for n in (*env, *os.environ) if n == "LD_PRELOAD" or n.startswith("PYTHON")}
    return all(env.get(name) == os.environ.get(name) for name in names)


PROXY_VARS = {"http_proxy", "https_proxy", "all_proxy"}


def child_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    # Inherited overrides would change the config under test; a proxy could carry the
    # loopback traffic elsewhere.
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("CLAWGATE_") and name.lower() not in PROXY_VARS
    }
    env.update(HOME=str(home), NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    env.update(extra or {})
    return env


def toml_value(value: Any) -> str:
    # JSON strings, numbers, booleans and flat lists of them are valid TOML too.
    return json.dumps(str(value) if isinstance(value, Path) else value)


def write_config(
    home: Path,
    *,
    agent: Mapping[str, Any] | None = None,
    telegram: Mapping[str, Any] | None = None,
    extra: str = "",
) -> Path:
    lines = [
        f"workspace = {toml_value(home / 'workspace')}",
        f"data_dir = {toml_value(home / 'data')}",
        extra,
        # Tests about other things run exec unasked (a [tools] table in `extra` decides).
        "" if "[tools]" in extra else '[tools]\nexec_approval = "never"',
        "[agent]",
        *(f"{key} = {toml_value(value)}" for key, value in (agent or {}).items()),
        "[channels.telegram]",
        *(f"{key} = {toml_value(value)}" for key, value in (telegram or {}).items()),
    ]
    path = home / "config.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def fake_telegram(telegram: FakeTelegram, chats: Iterable[int], **extra: Any) -> dict[str, Any]:
    """[channels.telegram] for a gateway polling the fake, allowing `chats`' users."""
    return {
        "enabled": True,
        "token": TOKEN,
        "base_url": telegram.base_url,
        "base_file_url": telegram.base_file_url,
        "poll_timeout": 1,
        "allow_from": [str(chat) for chat in chats],
        # Replies sent whole, as before streaming: the tests that stream say so.
        "streaming": "off",
        "reactions": False,
        **extra,
    }


def fake_model(fake_llm: FakeLLM, request_timeout: float = 10) -> dict[str, Any]:
    return {
        "model": "openai/fake-model",
        "api_base": fake_llm.url,
        "api_key": "sk-test-secret",
        "request_timeout": request_timeout,
        "max_retries": 0,
    }


class ClawgateProcess:
    """One `clawgate ...` child whose stderr is read as it is written.

    `wait_for_log` blocks until a line containing a text appears (with a timeout), so a
    test can act at a known moment of the child's life without sleeping.
    """

    def __init__(self, home: Path, *args: str, env: Mapping[str, str] | None = None) -> None:
        self.home = home
        self.args = args
        self.env = child_env(home, env)
        self.stderr_lines: list[str] = []
        self._process: asyncio.subprocess.Process | forked.ForkedChild | None = None
        self._reader: asyncio.Task[None] | None = None
        self._new_line = asyncio.Condition()
        self._eof = False

    @property
    def process(self) -> asyncio.subprocess.Process | forked.ForkedChild:
        if self._process is None:
            raise RuntimeError("the process is not started")
        return self._process

    @property
    def stderr(self) -> str:
        return "\n".join(self.stderr_lines)

    async def start(self) -> None:
        self._process = await _spawn(self.home, self.args, self.env, stdout=False)
        self._reader = asyncio.create_task(self._read_stderr(), name="clawgate stderr")

    async def _read_stderr(self) -> None:
        stream = self.process.stderr
        assert stream is not None
        while line := await stream.readline():
            async with self._new_line:
                self.stderr_lines.append(line.decode(errors="replace").rstrip("\n"))
                self._new_line.notify_all()
        async with self._new_line:
            self._eof = True  # end of output: waiters stop waiting for more
            self._new_line.notify_all()

    async def wait_for_log(self, text: str, timeout: float) -> str:
        """The first stderr line containing `text`; AssertionError if the child exits or
        `timeout` passes without one (with what it did print)."""

        def found() -> str | None:
            return next((line for line in self.stderr_lines if text in line), None)

        try:
            async with asyncio.timeout(timeout), self._new_line:
                await self._new_line.wait_for(lambda: found() is not None or self._eof)
        except TimeoutError:
            pass
        line = found()
        if line is None:
            raise AssertionError(f"no {text!r} on stderr within {timeout:g} s:\n{self.stderr}")
        return line

    def send_signal(self, sig: signal.Signals) -> None:
        self.process.send_signal(sig)

    async def wait(self, timeout: float) -> int:
        """The exit code, once the child exited and its stderr is read to the end."""
        code = await asyncio.wait_for(self.process.wait(), timeout)
        if self._reader is not None:
            await asyncio.wait_for(self._reader, timeout)
        return code

    async def close(self) -> None:
        """Kill the child if it still runs; always safe to call."""
        if self._process is not None and self._process.returncode is None:
            self._process.kill()
            await self._process.wait()
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)

    async def __aenter__(self) -> ClawgateProcess:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def start_clawgate(
    home: Path, *args: str, env: Mapping[str, str] | None = None, merge_stderr: bool = False
) -> asyncio.subprocess.Process | forked.ForkedChild:
    """`clawgate *args` with stdout and stderr as pipes (stderr into stdout's when
    `merge_stderr`), stdin /dev/null."""
    return await _spawn(home, args, child_env(home, env), stdout=True, merge_stderr=merge_stderr)


async def _spawn(
    home: Path,
    args: tuple[str, ...],
    environment: Mapping[str, str],
    *,
    stdout: bool,
    merge_stderr: bool = False,
) -> asyncio.subprocess.Process | forked.ForkedChild:
    """Forked when `forkable`, else exec'd; stdout a pipe or /dev/null, stderr a pipe."""
    assert CLAWGATE.exists(), f"{CLAWGATE} missing: install the package (pip install -e .)"
    if forkable(environment):
        stderr = None if merge_stderr else True
        return await forked.spawn(
            CLAWGATE, args, env=environment, cwd=home, stdout=stdout, stderr=stderr
        )
    return await asyncio.create_subprocess_exec(
        str(CLAWGATE),
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE if stdout else asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.STDOUT if merge_stderr else asyncio.subprocess.PIPE,
        env=environment,
        cwd=home,
    )


async def run_clawgate(
    home: Path, *args: str, env: Mapping[str, str] | None = None, timeout: float = 30
) -> tuple[int, str]:
    """Run to completion: (exit code, stderr)."""
    async with ClawgateProcess(home, *args, env=env) as child:
        code = await child.wait(timeout)
        return code, child.stderr
