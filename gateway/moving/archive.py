"""Reading a backup archive: its manifest, and each member written where a caller places it,
checked against the manifest on the way (size and sha256). A member the manifest does not
name, a name that would land outside its place, a missing or altered file: each one line."""

from __future__ import annotations

import hashlib
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from clawgate.gateway.moving.manifest import MANIFEST_NAME, Manifest
from clawgate.kernel.errors import MoveRefused
from clawgate.kernel.storage import make_dirs

Place = Callable[[str], Path | None]


def _manifest(archive: Path, tar: tarfile.TarFile) -> Manifest:
    first = tar.next()
    if first is None or first.name != MANIFEST_NAME or not first.isfile():
        raise MoveRefused(f"{archive}: not a clawgate backup (no {MANIFEST_NAME} first)")
    handle = tar.extractfile(first)
    assert handle is not None  # a regular file
    try:
        return Manifest.model_validate_json(handle.read())
    except ValidationError as exc:
        raise MoveRefused(
            f"{archive}: its {MANIFEST_NAME} is damaged ({exc.errors()[0]['msg']})"
        ) from None


def extract(archive: Path, place: Callable[[Manifest], Place]) -> tuple[Manifest, list[str]]:
    """Write every member to `place(manifest)(name)`; (the manifest, the problems found).
    The caller throws the written files away when there are problems."""
    problems: list[str] = []
    try:
        with tarfile.open(archive, mode="r:gz") as tar:
            manifest = _manifest(archive, tar)
            where = place(manifest)
            expected = {entry.path: entry for entry in manifest.files}
            seen: set[str] = set()
            for member in tar:
                if member.name == MANIFEST_NAME and member.offset == 0:
                    continue
                entry = expected.get(member.name)
                target = where(member.name) if entry is not None else None
                if entry is None or target is None or member.name in seen or not member.isfile():
                    problems.append(f"{member.name}: not a file the manifest lists")
                    continue
                seen.add(member.name)
                source = tar.extractfile(member)
                assert source is not None
                make_dirs(target.parent)
                digest, size = hashlib.sha256(), 0
                with target.open("wb") as out:
                    while piece := source.read(1 << 20):
                        digest.update(piece)
                        size += len(piece)
                        out.write(piece)
                if size != entry.size or digest.hexdigest() != entry.sha256:
                    problems.append(f"{member.name}: checksum does not match the manifest")
            problems += [
                f"{name}: missing from the archive" for name in expected if name not in seen
            ]
    except (OSError, tarfile.TarError, EOFError, zlib.error) as exc:
        raise MoveRefused(f"{archive}: not a readable backup ({exc})") from None
    return manifest, problems
