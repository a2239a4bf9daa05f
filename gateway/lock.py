"""One gateway per data_dir: a second one would poll the same bots and write the same files."""

from __future__ import annotations

import os
from contextlib import ExitStack
from pathlib import Path

from clawgate.kernel.errors import LockHeld
from clawgate.kernel.storage import locked


class AlreadyRunning(LockHeld):
    """Another gateway runs on this data_dir; the message names its pid."""


class InstanceLock:
    """The kernel's flock on `<data_dir>/gateway.lock`, held from `acquire` to `release` (for
    the daemon, its whole life) and released by the kernel if the process dies. The file
    names the holder's pid, for the message a second gateway gets and for `clawgate doctor`."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "gateway.lock"
        self._held: ExitStack | None = None

    def acquire(self) -> None:
        held = ExitStack()
        try:
            fd = held.enter_context(locked(self.path, wait=False))
        except LockHeld:
            raise AlreadyRunning(
                f"another clawgate gateway (pid {self._holder()}) is running on {self.path.parent}"
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except BaseException:
            held.close()
            raise
        self._held = held

    def _holder(self) -> str:
        try:
            holder = self.path.read_text(encoding="utf-8", errors="replace")[:32].strip()
        except OSError:
            holder = ""
        return holder or "another process"

    def release(self) -> None:
        if self._held is not None:
            self._held.close()
            self._held = None

    def __enter__(self) -> InstanceLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
