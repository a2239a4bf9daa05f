"""A `clawgate ...` child on a pseudo-terminal that is its controlling tty, for tests that
need what only a real terminal gives: hidden input (getpass), Ctrl-C as SIGINT, the
spinner. Shared here because no test module may import another."""

from __future__ import annotations

import asyncio
import fcntl
import os
import re
import termios
from pathlib import Path

from tests import forked
from tests.process import CLAWGATE, child_env, forkable


async def start_on_terminal(
    home: Path, args: tuple[str, ...], env: dict[str, str], slave: int
) -> asyncio.subprocess.Process | forked.ForkedChild:
    """`clawgate *args` with the pseudo-terminal's `slave` end as its stdin, stdout, stderr
    and controlling terminal; forked from the zygote when the environment allows it."""
    environment = child_env(home, env)
    if forkable(environment):
        return await forked.spawn(CLAWGATE, args, env=environment, cwd=home, terminal=slave)

    def take_tty() -> None:
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    return await asyncio.create_subprocess_exec(
        str(CLAWGATE),
        *args,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=environment,
        cwd=home,
        preexec_fn=take_tty,
    )


class Terminal:
    """Output is matched in order: `expect` consumes up to its match, so the same prompt
    asked twice needs two `expect`s; `seen` keeps everything for after-the-fact checks."""

    def __init__(self) -> None:
        self.output = ""
        self.seen = ""
        self._master = -1
        self._arrived = asyncio.Event()
        self._ended = asyncio.Event()
        self.process: asyncio.subprocess.Process | forked.ForkedChild | None = None

    async def start(self, home: Path, *args: str) -> Terminal:
        master, slave = os.openpty()
        self._master = master

        try:
            self.process = await start_on_terminal(
                home, args, {"TERM": "dumb", "COLUMNS": "200"}, slave
            )
        finally:
            os.close(slave)
        os.set_blocking(master, False)
        asyncio.get_running_loop().add_reader(master, self._read)
        return self

    def _read(self) -> None:
        try:
            data = os.read(self._master, 65536)
        except BlockingIOError:
            return
        except OSError:  # EIO: the child closed the terminal
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self._master)
            self._ended.set()
        chunk = data.decode("utf-8", "replace").replace("\r\n", "\n")
        self.output += chunk
        self.seen += chunk
        self._arrived.set()

    async def expect(self, pattern: str, timeout: float = 30) -> str:
        """Wait until `pattern` (a regex) appears after the last match, consume up to it and
        return the match; AssertionError with the screen if it does not come in time."""
        try:
            async with asyncio.timeout(timeout):
                while not (found := re.search(pattern, self.output)):
                    self._arrived.clear()
                    await self._arrived.wait()
        except TimeoutError:
            raise AssertionError(f"no {pattern!r} on the terminal:\n{self.output}") from None
        self.output = self.output[found.end() :]
        return found.group(0)

    def type(self, line: str) -> None:
        """A line as typed, ended by Enter."""
        self.keys(line + "\r")

    def keys(self, keys: str) -> None:
        os.write(self._master, keys.encode())

    async def exit_code(self, timeout: float = 30) -> int:
        """The exit code, once the child exited and its output is read to the end."""
        assert self.process is not None
        async with asyncio.timeout(timeout):
            code = await self.process.wait()
            await self._ended.wait()
        return code

    async def close(self) -> None:
        """Kill the child if it still runs, release the terminal; always safe to call."""
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        if self._master >= 0:
            asyncio.get_running_loop().remove_reader(self._master)
            os.close(self._master)
            self._master = -1
