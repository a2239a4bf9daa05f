"""The exec sandbox: each command inside bubblewrap when `tools.exec_sandbox = "bwrap"`.

What a sandboxed command sees: the system folders read-only (/usr, /bin, /lib*, /sbin,
/etc), its root read-write (the workspace for the owner, `public/<chat>/` for a shared
chat, which also sees `public/shared/` read-only), and an empty private /tmp and home.
Nothing else of the file system: not the config file, not the data dir, not ~/.ssh, no
other home content. It runs in a new PID namespace with its own /proc (the gateway's
environ is not there to read) under bwrap's own init: when the shell exits, the kernel
kills whatever is left in the namespace, detached or double-forked; `--die-with-parent`
does the same should the gateway die. `tools.exec_network = false` adds a network
namespace with only loopback. bwrap drops every capability, root included.

Fail closed: configured but not installed, exec refuses every command with one line naming
the package (`SandboxMissing`), and doctor fails; there is no silent fallback.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from clawgate.kernel.areas import SHARED
from clawgate.kernel.errors import ToolError

PACKAGE = "bubblewrap"
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")


class SandboxMissing(ToolError):
    """`exec_sandbox = "bwrap"` and no bwrap on PATH."""

    def __init__(self) -> None:
        super().__init__(
            f'exec refused: tools.exec_sandbox is "bwrap" but bwrap is not installed '
            f"(install the {PACKAGE} package)"
        )


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def sandboxed_argv(
    argv: tuple[str, ...], *, root: Path, workspace: Path, network: bool
) -> tuple[str, ...]:
    """`argv` wrapped in bwrap with `root` writable; SandboxMissing without bwrap."""
    bwrap = bwrap_path()
    if bwrap is None:
        raise SandboxMissing
    args = [bwrap]
    for folder in SYSTEM_DIRS:
        args += ["--ro-bind-try", folder, folder]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    home = os.environ.get("HOME", "")
    if home and home != "/" and not any(home.startswith(d + "/") for d in SYSTEM_DIRS):
        # Empty: programs that write to ~ work, and nothing of the real home is there.
        args += ["--tmpfs", home]
    args += ["--bind", str(root), str(root)]
    shared = workspace / SHARED
    if root != workspace and shared.is_dir():
        args += ["--ro-bind", str(shared), str(shared)]
    args += ["--chdir", str(root), "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if not network:
        args.append("--unshare-net")
    args += ["--die-with-parent", "--new-session", "--"]
    return (*args, *argv)
