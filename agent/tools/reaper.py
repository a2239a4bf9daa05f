"""The per-call reaper every exec command runs under on Linux: a child subreaper.

The exec tool starts `python -I -S reaper.py COMMAND` (this file imports only the standard
library, so it starts in milliseconds). It marks itself PR_SET_CHILD_SUBREAPER, runs
`/bin/sh -c COMMAND` and waits. While it lives, every process the command starts stays its
descendant: one that double-forks, calls setsid and makes itself non-dumpable (which closes
its /proc environ and fds to the gateway's walk, `shell.session_tree`) is re-parented here,
not to init. When the shell exits, or the gateway sends SIGTERM (timeout, cancellation), it
kills its children generation by generation - a killed child's own children become its
children in turn - until it has none, then ends the way the shell ended (exit code or
signal). Finding its own children needs only /proc/<pid>/stat, which a non-dumpable process
does not close.

It is non-dumpable itself, so a command cannot ptrace it into sparing anyone. A command can
still SIGKILL it (same account): the gateway's walk is then the second line, as before.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36


class _CallOver(Exception):
    """SIGTERM from the gateway: the call timed out or was cancelled."""


def _call_over(*_: object) -> None:
    raise _CallOver


def _children(me: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                ppid = int(stat.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == me:
            found.append(int(entry))
    return found


def _kill_descendants() -> None:
    me = os.getpid()
    while kids := _children(me):
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        # Once reaped, a child's own children are already re-parented here.
        for pid in kids:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def main(command: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit(f"exec: cannot become a child subreaper (errno {ctypes.get_errno()})")
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    signal.signal(signal.SIGTERM, _call_over)
    # Python ignores SIGPIPE and SIGXFSZ; the shell gets them back as any program expects.
    defaults = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM)
    shell = os.posix_spawn("/bin/sh", ["/bin/sh", "-c", command], os.environ, setsigdef=defaults)
    status: int | None = None
    try:
        while status is None:
            pid, code = os.waitpid(-1, 0)  # also reaps orphans that end on their own
            if pid == shell:
                status = code
    except _CallOver:
        pass
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _kill_descendants()
    if status is None:
        os._exit(128 + signal.SIGTERM)
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        if number != signal.SIGKILL:  # the one signal whose handler cannot be set
            signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
        os._exit(128 + number)  # a signal whose default is not to end a process
    os._exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main(sys.argv[1])
