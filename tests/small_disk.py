"""A real filesystem that fills up: a small tmpfs mounted over one folder, for the full-disk
tests and bench/soak.py's full-disk lane.

Why a tmpfs: the gateway must see ENOSPC from the kernel, in its own process, on exactly the
folder under test (the Discord journal's). RLIMIT_FSIZE would give EFBIG and a SIGXFSZ, not
ENOSPC, and a fault-injecting DiskWriter does not reach a child process. Mounting needs root
(CI runs as root); without it `mount` raises `MountRefused` and the tests skip, saying
why (under CI they fail).

`fill()` writes a filler file until the kernel refuses a page; `free()` removes it. A folder
filled before a file in it exists has no slack: tmpfs allocates whole pages, so the first
write to a new file fails, while an append into a page a file already has would not.
"""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

FILLER = ".filler"


class MountRefused(RuntimeError):
    """This machine would not mount the tmpfs (not root, or no mount namespace for it)."""


class SmallDisk:
    def __init__(self, folder: Path, size: str = "64k") -> None:
        self.folder = folder
        self.size = size
        self.mounted = False

    def mount(self) -> None:
        """Mount the tmpfs; MountRefused when this machine does not let us."""
        self.folder.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={self.size},mode=0700", "tmpfs", self.folder],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise MountRefused(f"cannot mount a small tmpfs (needs root): {done.stderr.strip()}")
        self.mounted = True

    def fill(self) -> None:
        """Take every free page (tmpfs counts whole pages)."""
        page = b"\0" * 4096
        fd = os.open(self.folder / FILLER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            while True:
                os.write(fd, page)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
        finally:
            os.close(fd)

    def free(self) -> None:
        (self.folder / FILLER).unlink(missing_ok=True)

    def unmount(self) -> None:
        if not self.mounted:
            return
        self.mounted = False
        done = subprocess.run(["umount", self.folder], capture_output=True, check=False)
        if done.returncode != 0:  # still open somewhere: detach it now, freed when closed
            subprocess.run(["umount", "-l", self.folder], capture_output=True, check=True)
