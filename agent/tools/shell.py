"""The exec tool: run a shell command in the workspace, owner sessions only.

The deny list below catches the obvious destructive commands a confused model might type
(`rm -rf /`, `mkfs`, fork bombs...). It is NOT a sandbox: any command can be rewritten to
slip past a regex (`eval`, a script file, base64). The real boundaries are that only the
owner's own sessions get this tool, that the child environment holds no tokens, and the
operating-system account clawgate runs as. Run clawgate as an unprivileged user.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
from typing import ClassVar

from pydantic import Field

from clawgate.agent.tools.base import Tool, ToolContext, ToolError, ToolParams
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import ToolsConfig

SENSITIVE_NAME_PARTS = (
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
)
ENV_PREFIX = "CLAWGATE_"
# After a kill, how long to wait for the pipes to close before giving up on them.
DRAIN_GRACE_SECONDS = 2.0

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
        # In group and allowed chats anyone present could drive exec: off unless asked for.
        return config.exec_enabled and (ctx_trust.is_owner or config.exec_in_groups)

    async def run(self, params: Params, ctx: ToolContext) -> str:
        if not self.available(ctx.trust, ctx.config):
            raise ToolError("exec is not available in this chat")
        command = params.command
        if not command.strip():
            raise ToolError("command is empty")
        refused = deny_reason(command)
        if refused:
            raise ToolError(f"command refused by the deny list ({refused})")
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


def scrubbed_environment(secrets: tuple[str, ...] | list[str]) -> dict[str, str]:
    """os.environ without anything that looks like, or contains, a credential."""
    values = [s for s in secrets if s]
    env = {}
    for name, value in os.environ.items():
        upper = name.upper()
        if upper.startswith(ENV_PREFIX) or any(part in upper for part in SENSITIVE_NAME_PARTS):
            continue
        if any(secret in value for secret in values):
            continue
        env[name] = value
    return env


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
            self.tail += chunk
            del self.tail[: -self.limit]

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        cut = self.total - len(self.head) - len(self.tail)
        if cut:
            return f"{head}\n[... {cut} bytes cut ...]\n{tail}"
        return head + tail


async def _drain(stream: asyncio.StreamReader | None, capture: _Capture) -> None:
    if stream is None:
        return
    while chunk := await stream.read(65536):
        capture.feed(chunk)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # already gone


async def run_command(command: str, ctx: ToolContext) -> str:
    """Run `command` under /bin/sh in its own process group; kill the group on timeout/cancel."""
    timeout = ctx.config.exec_timeout
    out, err = _Capture(ctx.config.max_result_chars), _Capture(ctx.config.max_result_chars)
    spawn = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            "/bin/sh",
            "-c",
            command,
            cwd=ctx.root,  # public/ for non-owners (exec_in_groups); not a sandbox
            env=scrubbed_environment(ctx.secrets),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    )
    try:
        proc = await asyncio.shield(spawn)
    except asyncio.CancelledError:
        # Cancelling create_subprocess_exec midway can leave it waiting forever for a child
        # it never reaps (seen on CPython 3.11); let the spawn finish, then kill the group.
        started = await spawn
        _kill_group(started.pid)
        await started.wait()
        raise
    readers = [
        asyncio.create_task(_drain(proc.stdout, out)),
        asyncio.create_task(_drain(proc.stderr, err)),
    ]
    timed_out = False
    try:
        async with asyncio.timeout(timeout):
            await asyncio.gather(*readers)
            await proc.wait()
    except TimeoutError:
        timed_out = True
    finally:
        # Also on CancelledError (/stop): nothing the model started outlives its turn's limits.
        if timed_out or proc.returncode is None:
            _kill_group(proc.pid)
            await proc.wait()
        # A descendant that left the group could hold a pipe open forever; stop listening.
        _, pending = await asyncio.wait(readers, timeout=DRAIN_GRACE_SECONDS)
        for task in pending:
            task.cancel()

    parts = [text.rstrip("\n") for text in (out.text(), err.text())]
    body = parts[0]
    if parts[1]:
        body = f"{body}\n[stderr]\n{parts[1]}" if body else f"[stderr]\n{parts[1]}"
    if timed_out:
        partial = f"\noutput before it was killed:\n{body}" if body else ""
        raise ToolError(f"command timed out after {timeout:g} s{partial}")
    code = proc.returncode
    status = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
    return f"{body or '(no output)'}\n{status}"
