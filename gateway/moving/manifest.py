"""The archive's table of contents, `manifest.json`, its first member: every file's path,
size, sha256 and mode, the clawgate version, the config's schema version, and where each
agent's workspace sat relative to the data_dir (so a restore puts it back the same way)."""

from __future__ import annotations

import hashlib
import importlib.metadata
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from clawgate.kernel.config_sections import SCHEMA_VERSION

MANIFEST_NAME = "manifest.json"
CONFIG_NAME = "config.toml"
FORMAT = "clawgate-backup/1"


class FileEntry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str  # the archive member's name
    size: int
    sha256: str
    mode: int


class AgentEntry(BaseModel):
    """One agent in the backup: its workspace's archive folder, and where that folder sat
    under the data_dir (None: outside it, restored under `workspaces/<name>`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    workspace: str
    workspace_in_data: str | None = None


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: str = FORMAT
    clawgate_version: str
    schema_version: int = SCHEMA_VERSION
    created_at: str
    agents: list[AgentEntry]
    # Config keys whose values were replaced by a placeholder (`--no-secrets`), and files
    # left out because they hold nothing but secrets.
    secrets_removed: list[str] = Field(default_factory=list)
    files_left_out: list[str] = Field(default_factory=list)
    files: list[FileEntry] = Field(default_factory=list)


def clawgate_version() -> str:
    try:
        return importlib.metadata.version("clawgate")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def file_digest(path: Path) -> tuple[int, str]:
    """(size, sha256 hex) of a file, read in pieces."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while piece := handle.read(1 << 20):
            digest.update(piece)
            size += len(piece)
    return size, digest.hexdigest()
