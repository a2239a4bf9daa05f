"""The memory lock: the one way anything writes a workspace's MEMORY.md, HISTORY.md or daily
logs.

Everything that changes a file in `memory/` - a consolidation, the model's file tools, a
dashboard edit, a CLI command in another process - does its whole read-modify-write inside
the lock: an flock on `memory/.lock` (the kernel's `locked`), so a second process waits, and
the same lock taken from two threads of one process waits too (each hold opens its own
descriptor). Nested holds in one thread are counted, not re-locked.

Two entrances, one lock:

- `run(work, *args)` from async code: queues on an asyncio lock first (waiting writers park on
  the event loop, not in threads), then runs `work` in a thread holding the lock;
- `hold()` for code already in a thread (the MemoryStore's own methods take it, so a store
  method called through `run` nests).

One lock per workspace in a process: the runtime makes it with the MemoryStore, and the store
hands it to the tool context of every turn and to the dashboard (constructors, never a
registry). Holding the lock across a model call would make the owner's reply wait on a
consolidation, so a consolidation reads MEMORY.md, asks the model unlocked, and hands back a
`MemoryRewrite` (merge.py) that the store merges under the lock with whatever the file became.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from clawgate.kernel.storage import DiskWriter, inside, locked

T = TypeVar("T")

LOCK_NAME = ".lock"


class MemoryLock:
    """Serialises every change to one workspace's `memory/` folder, across coroutines,
    threads and processes: `run()` from async code, `hold()` for code already in a thread."""

    def __init__(self, workspace: Path, disk: DiskWriter) -> None:
        self.dir = workspace / "memory"
        self.disk = disk
        self._depth = threading.local()
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    def covers(self, path: Path) -> bool:
        """Whether `path` (resolved) is one of the memory files this lock guards."""
        return inside(path, Path(os.path.realpath(self.dir))) and path.name != LOCK_NAME

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Hold the memory lock (blocking; call it off the event loop). Re-entrant per thread."""
        depth = getattr(self._depth, "value", 0)
        if depth:
            self._depth.value = depth + 1
            try:
                yield
            finally:
                self._depth.value = depth
            return
        self.disk.mkdir(self.dir)
        with locked(self.dir / LOCK_NAME):
            self._depth.value = 1
            try:
                yield
            finally:
                self._depth.value = 0

    async def run(self, work: Callable[..., T], /, *args: object, **kwargs: object) -> T:
        """Run `work(*args, **kwargs)` in a thread while holding the lock. If the caller is
        cancelled the thread still finishes its write (and lets the lock go): never half a
        change."""
        async with self._queue():
            return await asyncio.to_thread(self._holding, work, *args, **kwargs)

    def _holding(self, work: Callable[..., T], /, *args: object, **kwargs: object) -> T:
        with self.hold():
            return work(*args, **kwargs)

    def _queue(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        queue = self._queues.get(loop)
        if queue is None:
            queue = self._queues[loop] = asyncio.Lock()
        return queue
