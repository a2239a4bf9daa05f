"""One JSON document on disk that several processes read and change: the one store of
pairing.json, groups.json, cron/jobs.json, cron/state.json and dashboard-logins.json.

    doc = JsonDocument.of_model(directory / "jobs.json", JobsFile)
    doc.load()          the value; a missing file is the default, a garbled one raises
                        DocumentDamaged (the caller decides: refuse, or read as empty)
    doc.update(fn)      under the file lock: load, `fn` changes the value in place (and may
                        return a result), atomic replace; if `fn` raises, nothing is written
    doc.replace(value)  under the file lock: write `value` whole
    doc.fingerprint()   (inode, mtime_ns, size) or None: a reader re-reads when it changed

The lock is the kernel's flock on a sibling lock file and the write its atomic replace
(storage.py), so a reader never needs the lock: it sees the old file or the new one. Every
change is a read-modify-write under the lock, so two processes never lose each other's
changes. An update that leaves the text as it was writes nothing (a reader's fingerprint
then stays put). Blocking: call it from a thread in async code.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from clawgate.kernel.errors import DocumentDamaged, describe_validation
from clawgate.kernel.storage import DiskWriter, locked

T = TypeVar("T")
R = TypeVar("R")
M = TypeVar("M", bound=BaseModel)

# (inode, mtime_ns, size): a replace always makes a new inode, so two writes within one
# mtime tick that happen to have the same size are still told apart.
Fingerprint = tuple[int, int, int] | None


class JsonDocument(Generic[T]):
    """A value of type T kept as one JSON file, changed only under its lock."""

    def __init__(
        self,
        path: Path,
        *,
        default: Callable[[], T],
        parse: Callable[[Any], T],
        dump: Callable[[T], Any],
        writer: DiskWriter | None = None,
        lock_path: Path | None = None,
        indent: int | None = 2,
        ensure_ascii: bool = True,
    ) -> None:
        """`parse` turns decoded JSON into the value (raising ValueError, TypeError or
        KeyError for a wrong shape); `dump` turns the value back into JSON data."""
        self.path = path
        self.lock_path = lock_path or path.with_name(path.name + ".lock")
        self.writer = writer or DiskWriter()
        self._default = default
        self._parse = parse
        self._dump = dump
        self._indent = indent
        self._ensure_ascii = ensure_ascii

    @classmethod
    def of_model(
        cls,
        path: Path,
        model: type[M],
        *,
        writer: DiskWriter | None = None,
        lock_path: Path | None = None,
        ensure_ascii: bool = False,
    ) -> JsonDocument[M]:
        """A document holding one pydantic model; its default is the model's defaults."""
        return JsonDocument(
            path,
            default=model,
            parse=model.model_validate,
            dump=lambda value: value.model_dump(mode="json"),
            writer=writer,
            lock_path=lock_path,
            ensure_ascii=ensure_ascii,
        )

    def fingerprint(self) -> Fingerprint:
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return None
        return info.st_ino, info.st_mtime_ns, info.st_size

    def load(self) -> T:
        """The value on disk; the default if there is no file. Raises DocumentDamaged for a
        file that is not the document (OSError for one that cannot be read)."""
        return self._decode(self._read())

    def update(self, change: Callable[[T], R], *, repair: bool = False) -> R:
        """Load under the lock, let `change` modify the value in place, write it back
        atomically; `change`'s result is returned. With `repair`, a damaged file counts as
        the default (and is overwritten) instead of raising DocumentDamaged."""
        self.writer.mkdir(self.path.parent)
        with locked(self.lock_path):
            raw = self._read()
            try:
                value = self._decode(raw)
            except DocumentDamaged:
                if not repair:
                    raise
                value = self._default()
            result = change(value)
            text = self._encode(value)
            if text != raw:
                self.writer.replace(self.path, text, mode=0o600)
            return result

    def replace(self, value: T) -> None:
        """Write `value` whole, whatever the file held."""
        self.writer.mkdir(self.path.parent)
        with locked(self.lock_path):
            self.writer.replace(self.path, self._encode(value), mode=0o600)

    def _read(self) -> str | None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DocumentDamaged(self.path, f"not valid UTF-8 ({exc})") from None

    def _decode(self, raw: str | None) -> T:
        if raw is None:
            return self._default()
        if not raw.strip():
            # Most likely an editor caught mid-save.
            raise DocumentDamaged(self.path, "the file is empty")
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise DocumentDamaged(self.path, f"not valid JSON: {exc}") from None
        try:
            return self._parse(data)
        except ValidationError as exc:
            raise DocumentDamaged(self.path, describe_validation(exc)) from None
        except (ValueError, TypeError, KeyError) as exc:
            raise DocumentDamaged(self.path, str(exc) or type(exc).__name__) from None

    def _encode(self, value: T) -> str:
        data = self._dump(value)
        return json.dumps(data, indent=self._indent, ensure_ascii=self._ensure_ascii) + "\n"
