"""Issue #33 item 9: a process an exec call starts cannot outlive the call, even one that
double-forks, calls setsid and makes itself non-dumpable (which closes its /proc environ and
fds to the gateway's walk) while keeping the call's environment and output pipe.

Through a real `clawgate agent` process, the model calling exec once. As root the process
runs without capabilities (setpriv): root with CAP_SYS_PTRACE reads any process's /proc
files, dumpable or not, which an unprivileged owner's gateway cannot.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
from pathlib import Path

import pytest

from tests.fakes.llm import FakeLLM, text, tool_call
from tests.process import CLAWGATE, child_env, fake_model, write_config

MODEL_START = 60  # seconds: litellm's first import on a loaded machine
POLLS = 1000  # a SIGKILL is delivered asynchronously: look this many times before judging

ESCAPE = """\
import ctypes, os, time
ready_r, ready_w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
        os.write(ready_w, str(os.getpid()).encode())
        while True:  # keeps stdout and stderr (the call's pipes) and the environment
            time.sleep(60)
    os._exit(0)
os.close(ready_w)
print("escaped=" + os.read(ready_r, 32).decode(), flush=True)
"""


def _dead(pid: int) -> bool:
    """No such process, or a zombie (it runs nothing)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


@pytest.mark.parametrize("after", ["", "; sleep 60"], ids=["the shell exits", "the call times out"])
async def test_a_detached_non_dumpable_child_does_not_outlive_the_call(
    tmp_path: Path, fake_llm: FakeLLM, after: str
) -> None:
    prefix: tuple[str, ...] = ()
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root and setpriv (util-linux) is missing")
        prefix = ("setpriv", "--bounding-set=-all", "--inh-caps=-all")
    script = tmp_path / "escape.py"
    script.write_text(ESCAPE)
    command = f"{sys.executable} {script}{after}"
    fake_llm.script(tool_call("exec", command=command), text("done"))
    config = write_config(
        tmp_path,
        agent=fake_model(fake_llm),
        extra='[tools]\nexec_timeout = 2\nexec_approval = "never"',
    )
    child = await asyncio.create_subprocess_exec(
        *prefix,
        str(CLAWGATE),
        *("--config", str(config), "agent", "-m", "run it"),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=child_env(tmp_path),
        cwd=tmp_path,
    )
    _, stderr = await asyncio.wait_for(child.communicate(), MODEL_START)
    assert child.returncode == 0, stderr.decode(errors="replace")
    [result] = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert "escaped=" in result, result
    pid = int(result.split("escaped=", 1)[1].split()[0])
    try:
        for _ in range(POLLS):
            if _dead(pid):
                break
            await asyncio.sleep(0.005)
        assert _dead(pid), f"pid {pid} outlived the exec call"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
