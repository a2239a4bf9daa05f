"""The one home of the file primitives that must never diverge.

- `DiskWriter.append`: complete or raise. A short count from write(2) (a filling disk) is
  retried until every byte is written; if that fails, the written prefix is truncated away
  where the disk allows, and otherwise the next append to the same file starts on a fresh
  line, so a new record never glues onto a fragment.
- `DiskWriter.replace` / `replace_file`: write to a temp file in the same folder, fsync,
  rename, fsync the folder. Never half-written, cancellation included.
- `locked(path)`: an flock on a lock file, for read-modify-write across processes.
- `confine(root, relative)`: resolve a path under a root with symlinks followed; refuse
  an escape.

Every append and whole-file replace goes through a `DiskWriter`, so a test can hand in one
that refuses (ENOSPC, read-only) or writes short - root ignores file modes, so chmod cannot.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from clawgate.kernel.errors import LockHeld, PathOutsideRoot


class DiskWriter:
    """Append-only and atomic-rename writes. Subclass `_check` or `_write` to inject faults."""

    def __init__(self) -> None:
        # Files known to end with a newline (or be empty) since our last append to them.
        self._clean: set[Path] = set()
        self._guard = threading.Lock()

    def _check(self, path: Path) -> None:
        """Hook for tests: raise OSError here to simulate a disk that refuses writes."""

    def _write(self, fd: int, data: memoryview) -> int:
        """Hook for tests: return a short count to simulate a disk filling mid-write."""
        return os.write(fd, data)

    def append(self, path: Path, data: str | bytes, *, mode: int = 0o600) -> None:
        """Append all of `data` or raise OSError; never leave the next record glued to a tail."""
        raw = data.encode("utf-8") if isinstance(data, str) else data
        self._check(path)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, mode)
        try:
            with self._guard:
                clean = path in self._clean
                self._clean.discard(path)
            if not clean and _ends_mid_line(fd):
                raw = b"\n" + raw
            size = os.fstat(fd).st_size
            view = memoryview(raw)
            try:
                while view:
                    written = self._write(fd, view)
                    if written <= 0:
                        raise OSError(28, "No space left on device")
                    view = view[written:]
            except BaseException:
                # A prefix that lacks only its newline parses as a whole record, and the next
                # append's fresh line would complete it: take the prefix back if we can.
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
                raise
        finally:
            os.close(fd)
        if raw.endswith(b"\n"):
            with self._guard:
                self._clean.add(path)

    def fsync(self, path: Path) -> None:
        """Make earlier appends to `path` durable."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def replace(self, path: Path, data: str | bytes, *, mode: int = 0o600) -> None:
        """Replace `path` whole: temp file in the same folder, fsync, rename. Never half-written."""
        self._check(path)
        replace_file(path, data, mode=mode)
        with self._guard:
            # The new content may end mid-line: the next append must look again.
            self._clean.discard(path)

    def mkdir(self, path: Path, *, mode: int = 0o700) -> None:
        self._check(path)
        make_dirs(path, mode=mode)

    def move(self, source: Path, target: Path) -> None:
        """Rename within one filesystem; the file exists under exactly one name at every moment."""
        self._check(target)
        os.replace(source, target)
        fsync_dir(target.parent)


def make_dirs(path: Path, *, mode: int = 0o700) -> None:
    """Create `path` and its missing parents with `mode` whatever the umask (mkdir's
    `parents=True` gives the in-between folders the umask's mode); existing ones are left."""
    missing: list[Path] = []
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=mode)
        except FileExistsError:
            continue
        os.chmod(folder, mode)


def _ends_mid_line(fd: int) -> bool:
    size = os.fstat(fd).st_size
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"


def replace_file(path: Path, data: str | bytes, *, mode: int = 0o600) -> None:
    """Atomic whole-file replace: temp file beside `path`, fsync, rename, fsync the folder."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    """Make a rename in `directory` durable; a folder that cannot be opened is left be."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def locked(path: Path, *, wait: bool = True) -> Iterator[int]:
    """Hold an exclusive flock on the lock file `path` (created 0600) for the block.

    With `wait=False` a lock held elsewhere raises LockHeld at once. The kernel releases the
    lock if the process dies, so a crash never leaves it stuck. Yields the descriptor.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise LockHeld(f"{path} is locked by another process") from None
        yield fd
    finally:
        # Closing the descriptor releases the flock.
        os.close(fd)


def inside(path: Path, root: Path) -> bool:
    """`path` is `root` or below it (both already resolved)."""
    return path == root or root in path.parents


def confine(root: Path, relative: str | Path) -> Path:
    """Resolve `relative` against `root`, symlinks followed and `..` collapsed; refuse escapes.

    An absolute `relative` is allowed only if it lands inside `root`. Raises PathOutsideRoot.
    """
    text = str(relative)
    if "\x00" in text:
        raise PathOutsideRoot(f"path {text!r} contains a NUL byte")
    try:
        # realpath (not Path.resolve): on 3.11 it handles symlink loops without raising and
        # resolves a not-yet-existing tail against its deepest existing parent.
        base = Path(os.path.realpath(root))
        resolved = Path(os.path.realpath(base / relative))
        # A symlink loop earlier in the path stops realpath from resolving what follows it,
        # and a `..` after the loop then lands on a name it never looked at: a dangling link
        # out of the root. A path realpath leaves unchanged is one it fully resolved.
        settled = os.path.realpath(resolved) == str(resolved)
    except (ValueError, OSError, RuntimeError) as exc:
        raise PathOutsideRoot(f"path {text!r} is not usable: {exc}") from None
    if not settled:
        raise PathOutsideRoot(f"path {text!r} passes through a symlink loop")
    if not inside(resolved, base):
        raise PathOutsideRoot(f"path {text!r} is outside {root}")
    return resolved
