"""`clawgate export DIR`: the workspaces and the config as a tree to commit to a private
repository. Markdown and JSONL as they are (each file read as its writer leaves it whole),
the config with every secret replaced by a placeholder, downloads and the version copies
(MEMORY.md's, the owner's files' and skills' `.versions/`) left out: git keeps versions. Files are written only when their bytes change and
files the install no longer has are removed, so a second run on an unchanged install
leaves the tree byte for byte as it was: no diff.

    DIR/config.toml
    DIR/agents/<name>/...      each agent's workspace
    DIR/.clawgate-export       marks the folder as ours: a non-empty folder without it is
                               refused, so an export never overwrites something else
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from clawgate.gateway.moving.config_text import without_secrets
from clawgate.gateway.moving.layout import Root, walk
from clawgate.gateway.moving.snapshot import memory_held, read_whole
from clawgate.kernel.agent_configs import agent_dirs
from clawgate.kernel.config import Config
from clawgate.kernel.errors import MoveRefused
from clawgate.kernel.storage import make_dirs, replace_file

MARKER = ".clawgate-export"
MARKER_TEXT = "A clawgate export (clawgate export DIR); files here are replaced on each run.\n"
KEPT = {MARKER, ".git", ".gitignore", ".gitattributes", "README.md"}
LEFT_OUT = {"media", ".versions"}  # downloads (large, binary) and copies git would keep


@dataclass(frozen=True)
class ExportResult:
    written: int
    removed: int
    unchanged: int


def export_tree(
    config: Config, config_path: Path, directory: Path, agents: list[str]
) -> ExportResult:
    directory = directory.expanduser().absolute()
    _check_target(directory)
    wanted: dict[str, bytes] = {MARKER: MARKER_TEXT.encode()}
    text = config_path.read_text(encoding="utf-8") if config_path.exists() else ""
    wanted["config.toml"] = without_secrets(text, config.secrets())[0].encode()
    for name in agents:
        workspace = Path(os.path.realpath(agent_dirs(config.root, name)[0]))
        if Path(os.path.realpath(directory)).is_relative_to(workspace):
            raise MoveRefused(
                f"{directory} is inside the workspace it would copy: export elsewhere"
            )
        root = Root(f"agents/{name}", workspace, (workspace / "memory" / ".versions",), True)
        with memory_held(workspace):
            for path, member in walk(root):
                if LEFT_OUT.isdisjoint(Path(member).parts):
                    wanted[member] = read_whole(path)
    return _write(directory, wanted)


def _check_target(directory: Path) -> None:
    if directory.exists() and not directory.is_dir():
        raise MoveRefused(f"{directory} is not a folder")
    if directory.is_dir() and not (directory / MARKER).exists():
        if any(p.name not in KEPT for p in directory.iterdir()):
            raise MoveRefused(
                f"{directory} holds files of its own: export into a new folder or an earlier export"
            )


def _write(directory: Path, wanted: dict[str, bytes]) -> ExportResult:
    written = unchanged = removed = 0
    for member in sorted(wanted):
        path = directory / member
        if path.is_file() and path.read_bytes() == wanted[member]:
            unchanged += 1
            continue
        make_dirs(path.parent)
        replace_file(path, wanted[member])
        written += 1
    for folder, _dirs, files in os.walk(directory, topdown=False):
        here = Path(folder)
        relative = here.relative_to(directory)
        if relative.parts and relative.parts[0] in KEPT:
            continue
        for name in files:
            member = str((relative / name).as_posix())
            if member not in wanted and not (not relative.parts and name in KEPT):
                (here / name).unlink()
                removed += 1
        if relative.parts and not any(here.iterdir()):
            here.rmdir()
    return ExportResult(written=written, removed=removed, unchanged=unchanged)
