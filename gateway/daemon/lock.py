"""One process owns a data_dir and its workspace: a gateway (its whole life) or, when no
gateway runs, one `clawgate agent`. Two owners would poll the same bots, archive the same
transcript twice and write the same session seqs."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from clawgate.kernel.errors import AlreadyRunning, LockHeld
from clawgate.kernel.storage import locked

GATEWAY = "gateway"
AGENT = "agent"  # `clawgate agent` running turns itself
CRON_RUN = "cron"  # `clawgate cron run` with no gateway to ask


@dataclass(frozen=True)
class Holder:
    """Who holds the lock, as its file says: a pid and what it is (a gateway or an agent)."""

    pid: str
    role: str

    def describe(self) -> str:
        name = "cron run" if self.role == CRON_RUN else self.role
        return f"clawgate {name} (pid {self.pid})"


class InstanceLock:
    """The kernel's flock on `<data_dir>/gateway.lock`, held from `acquire` to `release` and
    released by the kernel if the process dies. The file names the holder: `<pid>` for a
    gateway (what `clawgate doctor` reads), `<pid> agent` for a terminal, for the message the
    next process gets."""

    def __init__(self, data_dir: Path, role: str = GATEWAY) -> None:
        self.path = data_dir / "gateway.lock"
        self.role = role
        self._held: ExitStack | None = None

    def acquire(self, *, wait_for_agent: Callable[[Holder], None] | None = None) -> None:
        """Take the lock or raise AlreadyRunning. With `wait_for_agent`, a lock held by
        anything but a gateway (`clawgate agent`, `cron run`) is waited for instead (it is
        called once, to say so): those end, and a gateway started meanwhile should then
        run, not give up."""
        held = ExitStack()
        try:
            fd = held.enter_context(locked(self.path, wait=False))
        except LockHeld:
            holder = self.holder()
            if wait_for_agent is None or holder.role == GATEWAY:
                raise self._refusal(holder) from None
            wait_for_agent(holder)
            fd = held.enter_context(locked(self.path, wait=True))
        try:
            os.ftruncate(fd, 0)
            suffix = "" if self.role == GATEWAY else f" {self.role}"
            os.write(fd, f"{os.getpid()}{suffix}\n".encode())
        except BaseException:
            held.close()
            raise
        self._held = held

    async def acquire_when_free(self, poll: float) -> None:
        """Take the lock once its holder lets go, trying every `poll` seconds (a cluster
        worker taking an agent whose last holder is paused or still stopping)."""
        while True:
            try:
                self.acquire()
                return
            except LockHeld:
                await asyncio.sleep(poll)

    def _refusal(self, holder: Holder) -> AlreadyRunning:
        if holder.role != GATEWAY:
            return AlreadyRunning(
                f"{holder.describe()} has the workspace of {self.path.parent} open; quit it first"
            )
        return AlreadyRunning(
            f"another clawgate gateway (pid {holder.pid}) is running on {self.path.parent}"
        )

    def holder(self) -> Holder:
        """What the lock file says (it is never half-written long enough to matter)."""
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")[:64]
        except OSError:
            text = ""
        pid, _, role = text.strip().partition(" ")
        return Holder(pid=pid or "unknown", role=role.strip() or GATEWAY)

    def release(self) -> None:
        if self._held is not None:
            self._held.close()
            self._held = None

    def __enter__(self) -> InstanceLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
