"""The one writer of a workspace's memory files: MEMORY.md, HISTORY.md, the daily logs.

Everything that changes a file in `memory/` - a consolidation, the model's file tools, a CLI
command in another process - does its whole read-modify-write inside `hold()`: an flock on
`memory/.lock` (the kernel's `locked`), so a second process waits, and the same lock taken
from two threads of one process waits too (each hold opens its own descriptor). Nested holds
in one thread are counted, not re-locked. Async callers go through `run()`, which queues them
on an asyncio lock first, so waiting writers park on the event loop, not in threads.

Holding the lock across a model call would make the owner's reply wait on a consolidation,
so a consolidation reads MEMORY.md, asks the model unlocked, and hands the answer back as a
`MemoryRewrite`: the new text and the text it was built from. Under the lock the store
merges it with whatever the file became meanwhile (merge.py).

One writer per workspace and DiskWriter in a process (`for_workspace`): the runtime's memory
store and the file tools of its turns share it.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, TypeVar

from clawgate.kernel.storage import DiskWriter, inside, locked

T = TypeVar("T")

LOCK_NAME = ".lock"


@dataclass(frozen=True)
class MemoryRewrite:
    """A whole new MEMORY.md from the model, and the MEMORY.md it was shown (its base)."""

    base: str
    text: str


class MemoryWriter:
    """Serialises every change to one workspace's `memory/` folder, across coroutines,
    threads and processes: `hold()` for code already in a thread, `run()` from async code."""

    _shared: ClassVar[weakref.WeakValueDictionary[tuple[str, DiskWriter], MemoryWriter]] = (
        weakref.WeakValueDictionary()
    )
    _shared_guard: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, workspace: Path, disk: DiskWriter) -> None:
        self.dir = workspace / "memory"
        self.disk = disk
        self._depth = threading.local()
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    @classmethod
    def for_workspace(cls, workspace: Path, disk: DiskWriter) -> MemoryWriter:
        """The writer of `workspace` for this DiskWriter, made on first use and kept while
        anyone holds it."""
        key = (os.path.realpath(workspace), disk)
        with cls._shared_guard:
            writer = cls._shared.get(key)
            if writer is None:
                writer = cls._shared[key] = cls(workspace, disk)
            return writer

    def covers(self, path: Path) -> bool:
        """Whether `path` (resolved) is one of the memory files this writer guards."""
        return inside(path, Path(os.path.realpath(self.dir))) and path.name != LOCK_NAME

    # The lock ----------------------------------------------------------------------

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

    async def run(self, work: Callable[..., T], *args: object) -> T:
        """Run `work(*args)` in a thread while holding the lock. If the caller is cancelled
        the thread still finishes its write (and lets the lock go): never half a change."""
        async with self._queue():
            return await asyncio.to_thread(self._holding, work, *args)

    def _holding(self, work: Callable[..., T], *args: object) -> T:
        with self.hold():
            return work(*args)

    def _queue(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        queue = self._queues.get(loop)
        if queue is None:
            queue = self._queues[loop] = asyncio.Lock()
        return queue
