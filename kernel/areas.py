"""Who reaches which files: the workspace for owners, one area per chat for everyone else.

    <workspace>/public/<chat area>/   one group or `allowed` chat's files and downloads
    <workspace>/public/shared/        read-only for those chats; the owner fills it

A chat area's name is its session key made safe for a path (`chat_area_name`), so no value a
platform sends (a chat id, a topic, a user name) is ever used raw in a path, and two chats
never share an area. A non-owner session names its own area `.` and the shared folder
`shared/`; it never sees `public/` itself, so it cannot list other chats' areas.

`Reach` is the one check of what a session may touch: the file tools (agent/tools/paths.py),
the media loader (agent/media.py) and the channels' outbound files all ask it.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from clawgate.kernel.bus import Trust
from clawgate.kernel.errors import PathOutsideRoot, ReadOnlyPath
from clawgate.kernel.storage import confine, inside

PUBLIC = PurePosixPath("public")
SHARED_NAME = "shared"
SHARED = PUBLIC / SHARED_NAME
MAX_NAME_CHARS = 120
_KEPT = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")
_UNSAFE_FILE_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


def chat_area_name(session_key: str) -> str:
    """One path component for a session key, injective: ':' becomes '_', every other byte
    outside [A-Za-z0-9-] (including '_', '.', '/') becomes %XX. Never `shared`, `.` or `..`."""
    out: list[str] = []
    for char in session_key:
        if char in _KEPT:
            out.append(char)
        elif char == ":":
            out.append("_")
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8"))
    name = "".join(out) or "%00"
    if name == SHARED_NAME:
        name = "%73hared"  # 's' is never escaped otherwise, so this stays injective
    if len(name) > MAX_NAME_CHARS:
        digest = hashlib.sha256(session_key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        name = f"{name[: MAX_NAME_CHARS - 17]}~{digest}"
    return name


def chat_area(session_key: str) -> PurePosixPath:
    """A non-owner chat's folder, relative to the workspace."""
    return PUBLIC / chat_area_name(session_key)


def safe_file_name(name: str, fallback: str = "file") -> str:
    """A platform-supplied file name (or id) as one harmless path component: only
    [A-Za-z0-9._-], no leading dot, at most 100 characters (the end, which has the suffix)."""
    cleaned = _UNSAFE_FILE_CHARS.sub("_", name).strip("._")
    return cleaned[-100:].lstrip("._") or fallback


@dataclass(frozen=True)
class Reach:
    """The folders one session may touch. Owners: the workspace. Others: their chat's area
    (read and write) and `public/shared` (read only)."""

    workspace: Path  # resolved
    root: Path  # where relative paths start; writable
    shared: Path | None  # read-only, named `shared/` by the session; None for owners

    @classmethod
    def of(cls, workspace: Path, trust: Trust, session_key: str) -> Reach:
        """The reach of a session; raises PathOutsideRoot when public/ or the area is a
        symlink to somewhere else (that would hand outsiders whatever it points at)."""
        base = Path(os.path.realpath(workspace))
        if trust.is_owner:
            return cls(base, base, None)
        area, shared = base / chat_area(session_key), base / SHARED
        for expected in (base / PUBLIC, area, shared):
            if confine(base, expected) != expected:
                raise PathOutsideRoot(f"{expected} is not a plain folder of the workspace")
        return cls(base, area, shared)

    def resolve(self, path: str, *, write: bool = False) -> Path:
        """A path as the session names it (relative to its root, `shared/...`, or absolute),
        resolved and checked. Raises PathOutsideRoot."""
        if self.shared is None:
            return confine(self.root, self.root / path)
        parts = PurePosixPath(os.path.normpath(path)).parts
        if parts and parts[0] == SHARED_NAME:
            return self._shared(confine(self.shared, Path(*parts[1:])), path, write)
        try:
            return confine(self.root, self.root / path)
        except PathOutsideRoot:
            if not os.path.isabs(path):
                raise
        return self._shared(confine(self.shared, path), path, write)

    def workspace_file(self, relative: str) -> Path:
        """A workspace-relative path (as channels and inbound media name files), resolved and
        required to lie in this reach. Raises PathOutsideRoot."""
        resolved = confine(self.workspace, relative)
        if inside(resolved, self.root) or (self.shared and inside(resolved, self.shared)):
            return resolved
        raise PathOutsideRoot(f"path {relative!r} is outside this chat's folder")

    def _shared(self, resolved: Path, shown: str, write: bool) -> Path:
        if write:
            raise ReadOnlyPath(f"path {shown!r} is in shared/, which is read-only here")
        return resolved
