"""The exec tool: run a shell command in the workspace, owner sessions only.

The deny list below catches the obvious destructive commands a confused model might type
(`rm -rf /`, `mkfs`, fork bombs...). It is NOT a sandbox: any command can be rewritten to
slip past a regex (`eval`, a script file, base64). The real boundaries are that only the
owner's own sessions get this tool, that the child environment is an allowlist, that the
gateway is not dumpable (its /proc environ is closed to the commands), and the
operating-system account clawgate runs as. Run clawgate as an unprivileged user.

Every command runs in its own session, on Linux under a per-call child subreaper
(`reaper.py`): whatever the command starts stays the reaper's descendant, even a process that
double-forks, calls setsid and makes itself non-dumpable, and the reaper kills them all when
the shell exits or the gateway sends it SIGTERM (timeout, cancellation). Then, and as the
second line should a command kill its reaper, the whole session is killed, with every
descendant found through /proc (parent chain, session, process group, or an inherited
output pipe). The output is read by a protocol that keeps only a bounded head and tail, so
nothing waits for a pipe that never reaches EOF.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import os
import re
import signal
import sys
from collections.abc import Iterable
from pathlib import Path
from secrets import token_hex
from typing import ClassVar

from pydantic import Field

from clawgate.agent.tools.approval import NO_ONE_TO_ASK, approve, must_ask
from clawgate.agent.tools.base import Tool, ToolContext, ToolParams
from clawgate.agent.tools.sandbox import sandboxed_argv
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import ToolsConfig
from clawgate.kernel.errors import ToolError

# The only variables a command inherits (plus the owner's `tools.exec_env_allow`): a name
# blocklist always misses one (DATABASE_URL, SENTRY_DSN, a proxy URL with a password...).
ENV_ALLOW = ("PATH", "HOME", "LANG", "TERM", "TZ", "USER", "SHELL", "TMPDIR")
ENV_ALLOW_PREFIXES = ("LC_",)
# A variable unique to one call: its descendants keep it unless they replace their whole
# environment, so they can be found after leaving the session and closing their pipes.
SCOPE_VARIABLE = "EXEC_SCOPE_ID"
# After the kill, how long the output already in the pipes may take to arrive.
DRAIN_GRACE_SECONDS = 1.0
# How long the reaper may take to kill a timed-out or cancelled command's processes.
REAP_GRACE_SECONDS = 5.0
REAPER = Path(__file__).with_name("reaper.py")

_ARGS = r"[^;&|\n]*"  # the rest of one simple command
_END = r"(?=$|[\s;&|)])"
_SYSTEM_DIRS = (
    r"/(?:bin|boot|dev|etc|home|lib|lib32|lib64|opt|proc|root|run|sbin|srv|sys|usr|var)/?\*?"
)
_RM_TARGET = rf"(?:/\*?|~/?\*?|\$\{{?HOME\}}?/?\*?|(?:\S*/)?\.\.(?:/\S*)?|{_SYSTEM_DIRS})"
_RECURSIVE = r"(?:-[a-zA-Z]*[rR][a-zA-Z]*|--recursive)\b"
_BLOCK_DEVICE = r"/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk|mapper/)"

DENY_LIST: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (label, re.compile(pattern))
    for label, pattern in (
        (
            "recursive rm of the root, home, a system or a parent folder",
            rf"\brm\s(?={_ARGS}(?<=\s){_RECURSIVE}){_ARGS}(?<=\s){_RM_TARGET}{_END}",
        ),
        (
            "recursive chmod/chown of the root or a system folder",
            rf"\bch(?:mod|own|grp)\s(?={_ARGS}(?<=\s){_RECURSIVE}){_ARGS}(?<=\s)(?:/\*?|{_SYSTEM_DIRS}){_END}",
        ),
        ("find -delete from the root", rf"\bfind\s+/\s{_ARGS}-delete\b"),
        ("making a filesystem", r"\b(?:mkfs(?:\.\w+)?|mke2fs|mkswap|wipefs)\b"),
        ("dd onto a device", rf"\bdd\b{_ARGS}\bof=/dev/(?!null\b|zero\b|stdout\b|stderr\b)"),
        (
            "writing to a disk device",
            rf"(?:>\s*|\btee\s+(?:-\S+\s+)*|\bshred\b{_ARGS}){_BLOCK_DEVICE}",
        ),
        (
            "shutting the machine down",
            r"(?:^|[;&|(`]|\$\()\s*(?:sudo\s+(?:-\S+\s+)*)?(?:\S*/)?"
            r"(?:shutdown|reboot|poweroff|halt)\b",
        ),
        (
            "shutting the machine down",
            r"\bsystemctl\s+(?:-\S+\s+)*(?:poweroff|reboot|halt|kexec)\b",
        ),
        ("shutting the machine down", r"(?:^|[;&|]\s*)(?:sudo\s+)?(?:tel)?init\s+[06]\b"),
        ("fork bomb", r":\s*\(\s*\)\s*\{"),
        ("fork bomb", r"\b(\w+)\s*\(\s*\)\s*\{[^}]*\b\1\s*\|\s*\1\b"),
        ("formatting a drive", r"\bformat\s+[a-zA-Z]:"),
    )
)


class ExecTool(Tool["ExecTool.Params"]):
    name: ClassVar[str] = "exec"
    description: ClassVar[str] = (
        "Run a shell command (/bin/sh -c) in the workspace folder and return its output and "
        "exit code. Long-running commands are killed after the configured timeout."
    )

    class Params(ToolParams):
        command: str = Field(description="The shell command to run")

    def available(self, ctx_trust: Trust, config: ToolsConfig) -> bool:
        # In group and allowed chats anyone present could drive exec: only with the owner's
        # approval of each command, or unasked when `exec_in_groups` says so.
        return config.exec_enabled and (
            ctx_trust.is_owner or config.exec_in_groups or config.exec_approval != "never"
        )

    async def run(self, params: Params, ctx: ToolContext) -> str:
        if not self.available(ctx.trust, ctx.config):
            raise ToolError("exec is not available in this chat")
        command = params.command
        if not command.strip():
            raise ToolError("command is empty")
        refused = deny_reason(command)
        if refused:
            raise ToolError(f"command refused by the deny list ({refused})")
        # Before asking: a missing sandbox refuses at once, not after the owner said yes.
        _argv(command, ctx)
        denied = await approve(command, ctx)
        if denied is not None:
            return denied
        result = await run_command(command, ctx)
        return ctx.redact(result)


def deny_reason(command: str) -> str | None:
    """The deny-list label `command` matches, or None. A speed bump, not a sandbox."""
    # Quotes and backslashes change nothing for the shell here ("/" is /, r\m is rm).
    plain = re.sub(r"[\"'\\]", "", command)
    for label, pattern in DENY_LIST:
        if pattern.search(plain):
            return label
    return None


def exec_environment(secrets: Iterable[str], allow: Iterable[str] = ()) -> dict[str, str]:
    """The allowlisted part of the environment, minus any value holding a known secret."""
    names = {*ENV_ALLOW, *allow}
    values = [s for s in secrets if s]
    return {
        name: value
        for name, value in os.environ.items()
        if (name in names or name.startswith(ENV_ALLOW_PREFIXES))
        and not any(secret in value for secret in values)
    }


_PR_SET_DUMPABLE = 4


def forbid_environ_reads() -> None:
    """Clear PR_SET_DUMPABLE on this process (Linux; elsewhere nothing): a command run by
    exec as the same unprivileged user can then no longer read /proc/<gateway>/environ,
    mem or fd, nor ptrace the gateway. A root gateway gains nothing from it: its commands
    run as root too, and root with its capabilities reads any process's environ."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


class _Capture:
    """Keeps the first and last `limit` bytes of a stream, so `yes` cannot fill memory."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk[-self.limit :]
            del self.tail[: -self.limit]

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        cut = self.total - len(self.head) - len(self.tail)
        if cut:
            return f"{head}\n[... {cut} bytes cut ...]\n{tail}"
        return head + tail


class _Collector(asyncio.SubprocessProtocol):
    """Consumes output as it arrives (so the transport never pauses reading) into bounded
    captures, and signals the shell's exit and the pipes' close separately: a background
    child can keep a pipe open long after the shell is gone."""

    def __init__(self, limit: int) -> None:
        self.out = _Capture(limit)
        self.err = _Capture(limit)
        self.exited = asyncio.Event()
        self.closed = asyncio.Event()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        (self.out if fd == 1 else self.err).feed(data)

    def process_exited(self) -> None:
        self.exited.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set()


def _stat(pid: int) -> tuple[int, int, int] | None:
    """(ppid, pgid, sid) of a live process, None if gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    if fields[0] in (b"Z", b"X"):
        return None
    return int(fields[1]), int(fields[2]), int(fields[3])


def _carries(pid: int, mark: bytes) -> bool:
    try:
        return mark in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _pipe_ids(pid: int) -> set[str]:
    ids = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("pipe:"):
                    ids.add(target)
    return ids


def session_tree(leader: int, pipes: set[str], mark: bytes) -> set[int]:
    """Every process started by the command whose shell is `leader` (pid = its session and
    process group id): same session or group, descendants by parent chain (catches `setsid`
    while its parent lives), holding one of the command's output pipes or carrying its
    environment `mark` (both catch `setsid cmd &` after the shell exited). A process that
    left the session, closed or redirected its inherited descriptors, replaced its whole
    environment and was re-parented to init before this walk escapes all of these."""
    me = os.getpid()
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me and (stat := _stat(int(entry))):
            table[int(entry)] = stat
    # While any process is in the group or session, its id cannot be reused: these are ours.
    found = {pid for pid, (_, pgid, sid) in table.items() if leader in (pgid, sid)}
    found |= {
        pid
        for pid in table
        if pid not in found and (_carries(pid, mark) or bool(pipes and _pipe_ids(pid) & pipes))
    }
    grew = True
    while grew:
        children = {pid for pid, (ppid, _, _) in table.items() if ppid in found} - found
        grew = bool(children)
        found |= children
    return found


def _our_pipes(transport: asyncio.SubprocessTransport) -> set[str]:
    """The ids of the command's output pipes (our read ends share the inode with the write
    ends every descendant inherits), as /proc/<pid>/fd shows them."""
    ids = set()
    for fd in (1, 2):
        pipe = transport.get_pipe_transport(fd)
        handle = pipe.get_extra_info("pipe") if pipe is not None else None
        if handle is not None:
            with contextlib.suppress(OSError, ValueError):
                ids.add(f"pipe:[{os.fstat(handle.fileno()).st_ino}]")
    return ids


def _kill(pids: Iterable[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


async def _kill_session(leader: int, pipes: set[str], mark: bytes) -> None:
    # Group first (instant, no /proc needed), then whatever the /proc walk finds; twice, since
    # a process can fork between the walk and the kill.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(leader, signal.SIGKILL)
    if not sys.platform.startswith("linux"):
        return
    for _ in range(2):
        _kill(await asyncio.to_thread(session_tree, leader, pipes, mark))


def _argv(command: str, ctx: ToolContext) -> tuple[str, ...]:
    if ctx.config.exec_sandbox == "bwrap":
        # bwrap's init kills whatever is left when the shell exits: no reaper needed inside.
        return sandboxed_argv(
            ("/bin/sh", "-c", command),
            root=ctx.root,
            workspace=ctx.workspace,
            network=ctx.config.exec_network,
        )
    if sys.platform.startswith("linux") and sys.executable:
        # -I -S: no site, no PYTHON* variables; the reaper needs the standard library only.
        return (sys.executable, "-I", "-S", str(REAPER), command)
    return ("/bin/sh", "-c", command)


async def _end_call(
    transport: asyncio.SubprocessTransport, collector: _Collector, pipes: set[str], mark: bytes
) -> None:
    """Kill everything the call started: the reaper first (a SIGTERM it answers by killing
    its descendants, then itself), then the session and the /proc walk."""
    pid = transport.get_pid()
    if not collector.exited.is_set():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(REAP_GRACE_SECONDS):
                await collector.exited.wait()
    await _kill_session(pid, pipes, mark)


async def run_command(command: str, ctx: ToolContext) -> str:
    """Run `command` under /bin/sh in its own session; when the shell exits, the timeout
    passes or the call is cancelled, kill everything it started and stop reading."""
    body, code = await _run(command, ctx)
    status = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
    return f"{body or '(no output)'}\n{status}"


async def exit_status(command: str, ctx: ToolContext) -> int | None:
    """`command`'s exit code, run under exactly the exec tool's rules (available to the
    context's trust, the deny list, the timeout, the environment): a cron job's condition.
    ToolError when those rules refuse it or it times out."""
    if not ExecTool().available(ctx.trust, ctx.config):
        raise ToolError("exec is not available for this chat")
    refused = deny_reason(command)
    if refused:
        raise ToolError(f"command refused by the deny list ({refused})")
    if must_ask(command, ctx):
        raise ToolError(NO_ONE_TO_ASK)
    return (await _run(command, ctx))[1]


async def _run(command: str, ctx: ToolContext) -> tuple[str, int | None]:
    """The command's output (stdout, then stderr marked) and its exit code."""
    timeout = ctx.config.exec_timeout
    loop = asyncio.get_running_loop()
    scope = token_hex(8)
    mark = f"{SCOPE_VARIABLE}={scope}".encode()
    env = exec_environment(ctx.secrets, ctx.config.exec_env_allow)
    spawn = asyncio.ensure_future(
        loop.subprocess_exec(
            lambda: _Collector(ctx.config.max_result_chars),
            *_argv(command, ctx),
            cwd=ctx.root,  # the chat's public/<chat>/ for non-owners (exec_in_groups); not a sandbox
            env={**env, SCOPE_VARIABLE: scope},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    )
    try:
        transport, collector = await asyncio.shield(spawn)
    except asyncio.CancelledError:
        # Cancelling the spawn midway can leave it waiting forever for a child it never
        # reaps (seen on CPython 3.11); let it finish, then kill what it started.
        transport, collector = await spawn
        await _end_call(transport, collector, _our_pipes(transport), mark)
        transport.close()
        raise
    pipes = _our_pipes(transport)
    timed_out = False
    try:
        async with asyncio.timeout(timeout):
            await collector.exited.wait()
    except TimeoutError:
        timed_out = True
    finally:
        # Also on CancelledError (/stop, the turn's limit): nothing outlives the call.
        await _end_call(transport, collector, pipes, mark)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(DRAIN_GRACE_SECONDS):
                await collector.closed.wait()
        transport.close()  # stop reading, whatever still holds a pipe

    parts = [text.rstrip("\n") for text in (collector.out.text(), collector.err.text())]
    body = parts[0]
    if parts[1]:
        body = f"{body}\n[stderr]\n{parts[1]}" if body else f"[stderr]\n{parts[1]}"
    if timed_out:
        partial = f"\noutput before it was killed:\n{body}" if body else ""
        raise ToolError(f"command timed out after {timeout:g} s{partial}")
    return body, transport.get_returncode()
