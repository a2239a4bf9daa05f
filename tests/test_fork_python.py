"""tests/fork_python.py, the interpreter xdist's workers are started with: a child forked from
the suite's zygote that behaves as `python ARGS` would, its streams, arguments, environment,
exit and signals; and the real interpreter when no zygote answers."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

import pytest

from tests import forked, process

FORK_PYTHON = Path(__file__).with_name("fork_python.py")
# What it was given, and whether it started with the gateway imported (forked) or bare.
SCRIPT = (
    "import os, sys; print(sys.argv, input(), os.environ['PROBE'], os.getcwd(), "
    "'clawgate.gateway.app' in sys.modules, flush=True); "
    "print('to stderr', file=sys.stderr); sys.exit(int(sys.argv[1]))"
)


async def run(zygote: str, *args: str, cwd: Path, stdin: bytes = b"") -> tuple[int, str, str]:
    env = {**os.environ, forked.SHARED: zygote, "PROBE": "seen"}
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-I", "-S", str(FORK_PYTHON), *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=env, cwd=cwd,
    )  # fmt: skip
    out, err = await asyncio.wait_for(child.communicate(stdin), 30)
    return int(child.returncode or 0), out.decode(), err.decode()


@pytest.fixture
def zygote() -> str:
    return forked.zygote_path(process.CLAWGATE)


@pytest.mark.parametrize("flags", [(), ("-u",), ("-u", "-B")])
async def test_a_forked_child_runs_the_code_as_python_would(
    zygote: str, tmp_path: Path, flags: tuple[str, ...]
) -> None:
    code, out, err = await run(zygote, *flags, "-c", SCRIPT, "3", cwd=tmp_path, stdin=b"hi\n")
    assert (code, out, err) == (3, f"['-c', '3'] hi seen {tmp_path} True\n", "to stderr\n")


async def test_without_a_zygote_the_real_interpreter_runs_it(tmp_path: Path) -> None:
    gone = str(tmp_path / "no-such-socket")
    code, out, err = await run(gone, "-c", SCRIPT, "4", cwd=tmp_path, stdin=b"hi\n")
    assert (code, out, err) == (4, f"['-c', '4'] hi seen {tmp_path} False\n", "to stderr\n")


async def test_a_command_line_it_cannot_fork_is_exec_d(zygote: str, tmp_path: Path) -> None:
    (tmp_path / "script.py").write_text(SCRIPT, encoding="utf-8")
    code, out, _ = await run(zygote, "-I", "script.py", "5", cwd=tmp_path, stdin=b"hi\n")
    assert (code, out) == (5, f"['script.py', '5'] hi seen {tmp_path} False\n")


async def test_a_signal_to_it_reaches_the_child_and_it_ends_as_the_child_did(
    zygote: str, tmp_path: Path
) -> None:
    env = {**os.environ, forked.SHARED: zygote}
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-I", "-S", str(FORK_PYTHON),
        "-c", "import os, time; print(os.getpid(), flush=True); time.sleep(60)",
        stdout=asyncio.subprocess.PIPE, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert child.stdout is not None
    pid = int(await asyncio.wait_for(child.stdout.readline(), 30))
    assert pid != child.pid  # the code runs in a forked child, not in this launcher
    child.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(child.wait(), 30) == -signal.SIGTERM
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_a_signal_between_the_fork_and_the_answer_still_reaches_the_child(
    tmp_path: Path,
) -> None:
    """A zygote that forks and is slow to answer: the child can be ready, and its launcher
    signalled, before the launcher has the child's pidfd (failed on fc40fd7: the signal
    ended the launcher alone, and the child ran on)."""
    path = str(tmp_path / "zygote")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(1)
    listener.settimeout(30)
    the_child = await asyncio.create_subprocess_exec("sleep", "60")
    launcher = await asyncio.create_subprocess_exec(
        sys.executable, "-I", "-S", str(FORK_PYTHON), "-c", "pass",
        env={**os.environ, forked.SHARED: path}, cwd=tmp_path,
    )  # fmt: skip

    def fork_slowly() -> socket.socket:
        connection, _ = listener.accept()
        try:
            _, streams, _, _ = socket.recv_fds(connection, 65536, 3)
            for fd in streams:
                os.close(fd)
            launcher.send_signal(signal.SIGTERM)
            time.sleep(0.2)  # the signal is the launcher's before it hears of the child
            pidfd = os.pidfd_open(the_child.pid)
            try:
                answer = json.dumps({"pid": the_child.pid}).encode()
                socket.send_fds(connection, [answer], [pidfd])
            finally:
                os.close(pidfd)
        except BaseException:
            connection.close()
            raise
        return connection

    try:
        with await asyncio.to_thread(fork_slowly) as connection:
            assert await asyncio.wait_for(the_child.wait(), 30) == -signal.SIGTERM
            connection.send(json.dumps({"exit": -signal.SIGTERM}).encode())
            assert await asyncio.wait_for(launcher.wait(), 30) == -signal.SIGTERM
    finally:
        listener.close()
        for process_ in (the_child, launcher):
            if process_.returncode is None:
                process_.kill()
                await process_.wait()
