"""`clawgate` children forked from a pre-imported one (tests/zygote.py), for the suite.

`spawn()` returns a `ForkedChild`, which answers what tests use of an
`asyncio.subprocess.Process`: `pid`, `returncode`, `stdout`, `stderr`, `send_signal`,
`terminate`, `kill`, `wait`, `communicate`. Under xdist the controller starts one zygote for
all its workers (`start_shared`, tests/conftest.py) and names its socket in SHARED; a test
process without one starts its own on first use. A zygote ends when the process that started
it does (it reads its stdin to the end). The suite turns forking on in tests/conftest.py; the
benches start real processes.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

ZYGOTE = Path(__file__).with_name("zygote.py")


# The shared zygote's socket, for the workers (not CLAWGATE_: those are config overrides).
SHARED = "PYTEST_CLAWGATE_ZYGOTE"
# How long a worker waits for the shared zygote's imports before its first child.
SHARED_START_TIMEOUT = 120.0


class _Zygote:
    def __init__(self, clawgate: Path, *options: str) -> None:
        self._folder = tempfile.mkdtemp(prefix="clawgate-zygote-")
        self.path = os.path.join(self._folder, "socket")
        self._process = subprocess.Popen(
            [sys.executable, str(ZYGOTE), self.path, str(clawgate), *options],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def wait_ready(self) -> None:
        assert self._process.stdout is not None
        if self._process.stdout.readline().strip() != b"ready":
            raise RuntimeError("the zygote did not start")

    def alive(self) -> bool:
        return self._process.poll() is None

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        for pipe in (self._process.stdin, self._process.stdout):
            if pipe is not None:
                pipe.close()
        shutil.rmtree(self._folder, ignore_errors=True)


# In a child's environment: its model goes through litellm, so the shared zygote's litellm
# twin forks it once that twin is ready (tests/zygote.py). Only then: forking the twin, 150 MB
# larger, costs every other child more than litellm's import saves.
LITELLM = "PYTEST_CLAWGATE_LITELLM"


def litellm_twin(path: str) -> str:
    """The socket of the shared zygote's litellm twin: a copy of it that has imported litellm
    as well."""
    return f"{path}.litellm"


def start_shared(clawgate: Path) -> _Zygote:
    """A zygote for the workers this process is about to start, its socket in SHARED, which
    forks the workers themselves too (tests/fork_python.py): `wait_ready` before they start."""
    zygote = _Zygote(clawgate, "--workers")
    os.environ[SHARED] = zygote.path
    return zygote


_zygote: _Zygote | None = None


def _own_zygote(clawgate: Path) -> str:
    global _zygote
    if _zygote is None or not _zygote.alive():
        _zygote = _Zygote(clawgate)
        _zygote.wait_ready()
        atexit.register(_zygote.close)
    return _zygote.path


def zygote_path(clawgate: Path) -> str:
    """The socket of this process's zygote: the shared one, else its own (started here)."""
    return os.environ.get(SHARED) or _own_zygote(clawgate)


async def _connect(clawgate: Path, *, litellm: bool) -> socket.socket:
    shared = os.environ.get(SHARED)
    path = zygote_path(clawgate)
    if shared and litellm:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            connection.connect(litellm_twin(path))
            return connection
        except OSError:
            connection.close()
    waited = 0.0
    while True:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            connection.connect(path)
            return connection
        except (FileNotFoundError, ConnectionRefusedError):
            connection.close()
            if not shared or waited >= SHARED_START_TIMEOUT:
                raise RuntimeError(f"no zygote answers on {path}") from None
        except BaseException:
            connection.close()
            raise
        await asyncio.sleep(0.05)  # the shared zygote is still importing
        waited += 0.05


class ForkedChild:
    def __init__(self, connection: socket.socket, pid: int, pidfd: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.stdout: asyncio.StreamReader | None = None
        self.stderr: asyncio.StreamReader | None = None
        self._connection = connection
        self._pidfd = pidfd
        self._exit = asyncio.get_running_loop().create_task(self._watch(), name=f"child {pid}")

    async def _watch(self) -> int:
        try:
            message = await asyncio.get_running_loop().sock_recv(self._connection, 4096)
            # No answer: the zygote itself died (killed with its worker), and its children too.
            self.returncode = int(json.loads(message)["exit"]) if message else -signal.SIGKILL
        finally:
            self._connection.close()
            os.close(self._pidfd)
            self._pidfd = -1
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self._pidfd < 0:
            return
        try:
            signal.pidfd_send_signal(self._pidfd, sig)
        except ProcessLookupError:
            pass  # it ended and its parent reaped it: what asyncio's process does too

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    async def wait(self) -> int:
        return await asyncio.shield(self._exit)

    async def communicate(self) -> tuple[bytes, bytes]:
        """Both outputs read to their end, and the exit (as asyncio's `communicate`)."""

        async def read(stream: asyncio.StreamReader | None) -> bytes:
            return b"" if stream is None else await stream.read()

        out, err = await asyncio.gather(read(self.stdout), read(self.stderr))
        await self.wait()
        return out, err


async def spawn(
    clawgate: Path,
    args: tuple[str, ...],
    *,
    env: Mapping[str, str],
    cwd: Path,
    stdout: bool = False,
    stderr: bool | None = True,
    terminal: int | None = None,
) -> ForkedChild:
    """The child runs `clawgate *args` with stdin /dev/null. `stdout`: a pipe its `stdout`
    reads, else /dev/null; `stderr`: True a pipe its `stderr` reads, None into stdout's
    pipe, False /dev/null. `terminal`: a pseudo-terminal's slave end instead, for stdin,
    stdout and stderr, and as the child's controlling terminal in a session of its own."""
    connection = await _connect(clawgate, litellm=LITELLM in env)
    devnull = os.open(os.devnull, os.O_RDWR)
    pipes: list[tuple[int, int]] = []

    def pipe() -> int:
        pipes.append(os.pipe())
        return pipes[-1][1]

    if terminal is not None:
        stdout = stderr = False
        streams = [terminal] * 3
    else:
        out = pipe() if stdout else devnull
        streams = [devnull, out, pipe() if stderr else (out if stderr is None else devnull)]
    try:
        request = {
            "args": list(args),
            "env": dict(env),
            "cwd": str(cwd),
            "terminal": terminal is not None,
        }
        socket.send_fds(connection, [json.dumps(request).encode()], streams)
        # The zygote answers as soon as it forked: a blocking read is milliseconds.
        message, fds, _, _ = socket.recv_fds(connection, 4096, 1)
    except BaseException:
        connection.close()
        for read_end, _ in pipes:
            os.close(read_end)
        raise
    finally:
        os.close(devnull)
        for _, write_end in pipes:
            os.close(write_end)
    connection.setblocking(False)
    child = ForkedChild(connection, int(json.loads(message)["pid"]), fds[0])
    readers = [await _reader(read_end) for read_end, _ in pipes]
    if stdout:
        child.stdout = readers.pop(0)
    if stderr:
        child.stderr = readers.pop(0)
    return child


async def _reader(read_end: int) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    pipe = os.fdopen(read_end, "rb", buffering=0)
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    return reader
