"""`clawgate backup`: one `.tar.gz` of an installation, taken while the gateway runs.

The files are staged first (snapshot.py: each read as its writer leaves it whole), next to
the output so the copy stays on one disk; the manifest is made from the staged copies, and
the archive is written under a temp name and renamed into place, mode 0600 (it holds the
config's secrets unless `--no-secrets`)."""

from __future__ import annotations

import io
import os
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from clawgate.gateway.moving.config_text import without_secrets
from clawgate.gateway.moving.layout import DATA, plan, walk
from clawgate.gateway.moving.manifest import (
    CONFIG_NAME,
    MANIFEST_NAME,
    FileEntry,
    Manifest,
    clawgate_version,
    file_digest,
)
from clawgate.gateway.moving.snapshot import stage_root
from clawgate.kernel.config import Config
from clawgate.kernel.errors import ConfigError
from clawgate.kernel.storage import fsync_dir, replace_file

# Files of a data_dir that hold nothing but secrets: left out by `--no-secrets`.
SECRET_FILES = ("service.env",)


@dataclass(frozen=True)
class BackupResult:
    path: Path
    files: int
    size: int
    secrets_removed: list[str]
    files_left_out: list[str]


def count_files(config: Config, agents: list[str], config_path: Path) -> int:
    """How many files a backup of `agents` reads: the progress bar's length."""
    roots, _ = plan(config, agents, config_path)
    return sum(1 for root in roots for _ in walk(root))


def write_backup(
    config: Config,
    config_path: Path,
    output: Path,
    *,
    agents: list[str],
    keep_secrets: bool = True,
    progress: Callable[[int], None] | None = None,
) -> BackupResult:
    """Write the archive; `progress(n)` is called as each n files are read (the bar)."""
    roots, entries = plan(config, agents, config_path)
    output = output.expanduser().absolute()
    if not output.parent.is_dir():
        raise ConfigError(f"{output.parent}: no such folder for the backup")
    config_text = config_path.read_text(encoding="utf-8") if config_path.exists() else ""
    removed: list[str] = []
    if not keep_secrets:
        config_text, removed = without_secrets(config_text, config.secrets())
    with tempfile.TemporaryDirectory(prefix=".clawgate-backup-", dir=output.parent) as tmp:
        staging = Path(os.path.realpath(tmp))
        # An output inside the data_dir must not back up its own staging copy.
        roots = [replace(root, skip=(*root.skip, staging)) for root in roots]
        replace_file(staging / CONFIG_NAME, config_text)
        members = [CONFIG_NAME]
        for root in roots:
            members += stage_root(root, staging, progress or _quiet)
        left_out = [] if keep_secrets else _drop_secret_files(staging, members)
        members = [m for m in members if m not in left_out]
        manifest = Manifest(
            clawgate_version=clawgate_version(),
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
            agents=entries,
            secrets_removed=removed,
            files_left_out=left_out,
            files=[_entry(staging, member) for member in sorted(set(members))],
        )
        _write_archive(staging, manifest, output)
    return BackupResult(
        path=output,
        files=len(manifest.files),
        size=output.stat().st_size,
        secrets_removed=removed,
        files_left_out=left_out,
    )


def _quiet(_: int) -> None:
    """No progress shown."""


def _drop_secret_files(staging: Path, members: list[str]) -> list[str]:
    dropped = [m for m in members if m.startswith(f"{DATA}/") and Path(m).name in SECRET_FILES]
    for member in dropped:
        (staging / member).unlink()
    return dropped


def _entry(staging: Path, member: str) -> FileEntry:
    path = staging / member
    size, digest = file_digest(path)
    return FileEntry(path=member, size=size, sha256=digest, mode=path.stat().st_mode & 0o777)


def _write_archive(staging: Path, manifest: Manifest, output: Path) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{output.name}.", suffix=".tmp", dir=output.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            with tarfile.open(fileobj=handle, mode="w:gz", compresslevel=6) as tar:
                raw = manifest.model_dump_json(indent=1).encode()
                info = tarfile.TarInfo(MANIFEST_NAME)
                info.size, info.mode, info.mtime = len(raw), 0o600, int(datetime.now().timestamp())
                tar.addfile(info, io.BytesIO(raw))
                for entry in manifest.files:
                    info = tar.gettarinfo(staging / entry.path, arcname=entry.path)
                    info.uid = info.gid = 0
                    info.uname = info.gname = ""
                    with (staging / entry.path).open("rb") as member:
                        tar.addfile(info, member)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, output)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(output.parent)
