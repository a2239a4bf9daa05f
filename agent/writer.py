"""The one place that writes files that matter.

Every append and every whole-file replace goes through a `DiskWriter`, so a test can hand
in a writer that refuses (ENOSPC, read-only) - root ignores file modes, so chmod cannot.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


class DiskWriter:
    """Append-only and atomic-rename writes. Subclass and override `_check` to inject faults."""

    def _check(self, path: Path) -> None:
        """Hook for tests: raise OSError here to simulate a disk that refuses writes."""

    def append(self, path: Path, data: str, *, mode: int = 0o600) -> None:
        """Append `data` with a single write(): a kill -9 leaves either all of it or a torn tail."""
        self._check(path)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode)
        try:
            os.write(fd, data.encode("utf-8"))
        finally:
            os.close(fd)

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
        _fsync_dir(path.parent)

    def mkdir(self, path: Path, *, mode: int = 0o700) -> None:
        self._check(path)
        path.mkdir(parents=True, exist_ok=True, mode=mode)

    def move(self, source: Path, target: Path) -> None:
        """Rename within one filesystem; the file exists under exactly one name at every moment."""
        self._check(target)
        os.replace(source, target)
        _fsync_dir(target.parent)


def _fsync_dir(directory: Path) -> None:
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
