"""Which files of an installation a backup takes, under which archive name, and where a
restore puts each back.

Archive names: `config.toml`; `data/<path under the data_dir>` for the data_dir's state
(pairing, groups, journals, usage, cron state, each agent's own data folder); and
`workspaces/<agent>/<path>` for each agent's workspace, wherever it sat. Left out: the
search index (derived, rebuilt on demand), logs, lock files, sockets, half-written temp
files, and the config file when it sits inside a root (it travels as `config.toml`).

A restore into DIR makes DIR the data_dir; a workspace that sat inside the data_dir goes
back to the same place under DIR, one that sat elsewhere to `DIR/workspaces/<agent>`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from clawgate.gateway.moving.manifest import CONFIG_NAME, AgentEntry
from clawgate.kernel.agent_configs import agent_dirs
from clawgate.kernel.config import MAIN_AGENT, Config

DATA = "data"
WORKSPACES = "workspaces"
# Folders of a data_dir (the top one, or an agent's under agents/<name>/) not worth keeping.
DERIVED = {"index", "logs"}


@dataclass(frozen=True)
class Root:
    """One folder the backup walks: its archive prefix and the folders under it it skips
    (another agent's, a workspace walked as its own root)."""

    member: str
    path: Path
    skip: tuple[Path, ...] = ()
    workspace: bool = False


def plan(
    config: Config, agents: list[str], config_path: Path
) -> tuple[list[Root], list[AgentEntry]]:
    """The roots of `agents` (every agent when the list holds them all) and their entries."""
    root = config.root
    every = set(agents) == set(root.agent_names())
    workspaces = {name: agent_dirs(root, name)[0] for name in agents}
    entries = []
    roots: list[Root] = []
    skipped_workspaces = tuple(_real(ws) for ws in workspaces.values())
    data = _real(root.data_dir)
    if every:
        roots.append(Root(DATA, data, skipped_workspaces))
    else:
        for name in agents:
            mine = _real(agent_dirs(root, name)[1])
            others = (data / "agents",) if name == MAIN_AGENT else ()
            member = _member(DATA, mine.relative_to(data)) if mine != data else DATA
            roots.append(Root(member, mine, skipped_workspaces + others))
    for name, workspace in workspaces.items():
        real = _real(workspace)
        inside = (
            str(PurePosixPath(*real.relative_to(data).parts)) if real.is_relative_to(data) else None
        )
        member = f"{WORKSPACES}/{name}"
        entries.append(AgentEntry(name=name, workspace=member, workspace_in_data=inside))
        roots.append(Root(member, real, workspace=True))
    config_real = _real(config_path)
    return [Root(r.member, r.path, (*r.skip, config_real), r.workspace) for r in roots], entries


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path.expanduser()))


def _member(prefix: str, relative: Path) -> str:
    return str(PurePosixPath(prefix, *relative.parts))


def walk(root: Root, under: Path | None = None) -> Iterator[tuple[Path, str]]:
    """(file, archive name) of every regular file under the root (or its folder `under`),
    in a stable order, without what is left out."""
    start = under or root.path
    if not start.is_dir():
        return
    for folder, dirs, files in os.walk(start):
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs if not _skipped(root, here / d))
        for name in sorted(files):
            path = here / name
            if _skipped(root, path) or _left_out(name):
                continue
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:  # removed while we walked: not part of the snapshot
                continue
            if stat.S_ISREG(mode):
                yield path, _member(root.member, path.relative_to(root.path))


def _skipped(root: Root, path: Path) -> bool:
    if path in root.skip:
        return True
    if root.workspace:
        return False
    parts = path.relative_to(root.path).parts
    # <data_dir>/index, and agents/<name>/index under a data_dir that holds the agents.
    return (len(parts) == 1 and parts[0] in DERIVED) or (
        len(parts) == 3 and parts[0] == "agents" and parts[2] in DERIVED
    )


def _left_out(name: str) -> bool:
    return name.endswith(".lock") or (name.startswith(".") and name.endswith(".tmp"))


def restored_path(member: str, target: Path, agents: list[AgentEntry]) -> Path | None:
    """Where a restore into `target` puts the archive member `member`; None for a name no
    root makes (a tampered or foreign archive)."""
    parts = PurePosixPath(member).parts
    if not parts or any(p in ("..", "") or p.startswith("/") for p in parts):
        return None
    if member == CONFIG_NAME:
        return target / CONFIG_NAME
    if parts[0] == DATA:
        return target.joinpath(*parts[1:]) if len(parts) > 1 else None
    if parts[0] == WORKSPACES and len(parts) > 2:
        return (
            workspace_target(parts[1], target, agents) / Path(*parts[2:])
            if any(a.name == parts[1] for a in agents)
            else None
        )
    return None


def workspace_target(name: str, target: Path, agents: list[AgentEntry]) -> Path:
    """Where agent `name`'s workspace goes in a restore into `target`."""
    entry = next(a for a in agents if a.name == name)
    if entry.workspace_in_data is not None:
        return target / entry.workspace_in_data
    return target / WORKSPACES / name
