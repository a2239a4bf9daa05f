"""`clawgate restore FILE --to DIR`: a backup unpacked into a fresh home.

Never over an installation: DIR must be missing or empty, and a gateway holding DIR's
`gateway.lock` is named in the refusal. The archive is unpacked into a sibling folder and
checked there (every member against the manifest), the config is pointed at DIR, modes are
made private (files 0600, 0700 when they were executable, folders 0700), and only then is
the folder renamed to DIR: a damaged archive leaves nothing behind."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from clawgate.gateway.daemon.lock import InstanceLock
from clawgate.gateway.moving.archive import Place, extract
from clawgate.gateway.moving.config_text import pointed_at
from clawgate.gateway.moving.layout import restored_path, workspace_target
from clawgate.gateway.moving.manifest import CONFIG_NAME, Manifest
from clawgate.kernel.config_sections import SCHEMA_VERSION
from clawgate.kernel.errors import LockHeld, MoveRefused
from clawgate.kernel.storage import fsync_dir, locked, make_dirs, replace_file


@dataclass(frozen=True)
class RestoreResult:
    target: Path
    config_path: Path
    manifest: Manifest


def restore_backup(archive: Path, target: Path) -> RestoreResult:
    target = target.expanduser().absolute()
    refuse_live(target)
    make_dirs(target.parent)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.restore-", dir=target.parent))
    try:
        manifest, problems = unpack(archive, staging, target)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise MoveRefused(f"{archive}: {problems[0]}{more}; nothing restored")
        refuse_live(target)  # again: a gateway may have started while we unpacked
        if target.exists():
            target.rmdir()
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    fsync_dir(target.parent)
    return RestoreResult(target=target, config_path=target / CONFIG_NAME, manifest=manifest)


def refuse_live(target: Path) -> None:
    """MoveRefused when a gateway runs on `target` or it holds anything at all."""
    lock = InstanceLock(target)
    if lock.path.exists():
        try:
            with locked(lock.path, wait=False):
                pass
        except LockHeld:
            raise MoveRefused(
                f"{lock.holder().describe()} is running on {target}; stop it, and restore "
                "into a new, empty folder"
            ) from None
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise MoveRefused(
            f"{target} is not empty: restore into a new folder (never over an installation)"
        )


def unpack(archive: Path, staging: Path, target: Path) -> tuple[Manifest, list[str]]:
    """Unpack into `staging`, laid out as it will be at `target` (the config names
    `target`); (the manifest, the problems). Files private whatever the umask."""

    def place(manifest: Manifest) -> Place:
        if manifest.schema_version > SCHEMA_VERSION:
            raise MoveRefused(
                f"{archive}: made by clawgate {manifest.clawgate_version} with config schema "
                f"{manifest.schema_version}; this clawgate reads up to {SCHEMA_VERSION}: upgrade first"
            )
        return lambda member: restored_path(member, staging, manifest.agents)

    manifest, problems = extract(archive, place)
    if problems:
        return manifest, problems
    config = staging / CONFIG_NAME
    text = config.read_text(encoding="utf-8") if config.exists() else ""
    workspaces = {
        a.name: workspace_target(a.name, target, manifest.agents) for a in manifest.agents
    }
    replace_file(config, pointed_at(text, target, workspaces))
    modes = {restored_path(e.path, staging, manifest.agents): e.mode for e in manifest.files}
    for folder, _, files in os.walk(staging):
        os.chmod(folder, 0o700)
        for name in files:
            path = Path(folder) / name
            os.chmod(path, 0o700 if modes.get(path, 0) & 0o100 else 0o600)
    return manifest, problems
