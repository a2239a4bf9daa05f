"""Copying a running installation's files into a staging folder, each as its writer leaves it
whole, so a backup taken while the gateway runs restores into a state the gateway itself
could have left.

- memory/ and sessions/ of a workspace are read together under the memory lock (the lock
  every memory writer holds, agent/memory/lock.py): a consolidation is then either in the
  snapshot or not. Its transcript record follows its HISTORY.md entry just after the lock is
  let go, so the staged pair is audited and read again, a few times at most, until they
  agree (or the disagreement is the installation's own).
- a JSON document is read under its lock file (kernel/json_document.py), when it has one;
  every other whole-file write is an atomic rename, so a plain read sees the old or the new.
- a JSONL file (transcripts, journals, usage) is append-only: it is cut after its last whole
  line, so a line being appended is left for the next backup.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from clawgate.agent.memory.audit import audit_sessions
from clawgate.agent.memory.lock import MemoryLock
from clawgate.gateway.moving.layout import Root, walk
from clawgate.kernel.storage import DiskWriter, locked, make_dirs

# Under the memory lock together: what `memory audit` pairs.
PAIRED = ("memory", "sessions")
AUDIT_TRIES = 5
AUDIT_PAUSE = 0.1

Progress = Callable[[int], None]


def stage_root(root: Root, staging: Path, progress: Progress) -> list[str]:
    """Copy `root` into `staging` (member names as paths); the members written."""
    if not root.workspace:
        return _stage_all(walk(root), staging, progress)
    written: list[str] = []
    paired = [root.path / name for name in PAIRED]
    for attempt in range(AUDIT_TRIES):
        batch = _stage_paired(root, paired, staging)
        sessions = staging / root.member / "sessions"
        if audit_sessions(sessions).ok or attempt == AUDIT_TRIES - 1:
            written += batch
            progress(len(batch))
            break
        for member in batch:
            (staging / member).unlink()
        time.sleep(AUDIT_PAUSE)
    rest = Root(root.member, root.path, tuple(paired), workspace=True)
    return written + _stage_all(walk(rest), staging, progress)


def _stage_paired(root: Root, paired: list[Path], staging: Path) -> list[str]:
    with memory_held(root.path):
        files = [found for folder in paired for found in walk(root, folder)]
        return _stage_all(iter(files), staging, lambda _: None)


def _stage_all(files: Iterator[tuple[Path, str]], staging: Path, progress: Progress) -> list[str]:
    written = []
    for path, member in files:
        try:
            _stage_file(path, member, staging)
        except FileNotFoundError:  # gone since the walk saw it (an archive moved it): skip
            continue
        written.append(member)
        progress(1)
    return written


def _stage_file(path: Path, member: str, staging: Path) -> None:
    target = staging / member
    make_dirs(target.parent)
    mode = os.stat(path).st_mode & 0o700 | 0o600
    if path.suffix in (".jsonl", ".json"):
        target.write_bytes(read_whole(path))
    else:
        shutil.copyfile(path, target)
    os.chmod(target, mode)


def read_whole(path: Path) -> bytes:
    """The file as its writer leaves it whole: a JSON document under its lock, a JSONL file
    up to its last whole line."""
    with ExitStack() as held:
        for lock in _lock_files(path):
            held.enter_context(locked(lock))
        raw = path.read_bytes()
    return raw[: raw.rfind(b"\n") + 1] if path.suffix == ".jsonl" else raw


@contextmanager
def memory_held(workspace: Path) -> Iterator[None]:
    """The workspace's memory lock, when it has a memory folder (taking it would make one)."""
    with ExitStack() as held:
        if (workspace / "memory").is_dir():
            held.enter_context(MemoryLock(workspace, DiskWriter()).hold())
        yield


def _lock_files(path: Path) -> list[Path]:
    """The lock files a JSON document's writers hold (`X.lock` or `.<stem>.lock` beside it)."""
    if path.suffix != ".json":
        return []
    candidates = [path.with_name(path.name + ".lock"), path.with_name(f".{path.stem}.lock")]
    return [lock for lock in candidates if lock.exists()]
