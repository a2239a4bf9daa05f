"""The path guard: turn a path the model gave into a real path this session may touch.

Containment is decided on the fully resolved path (symlinks followed, `..` collapsed), so a
symlink inside the workspace that points out of it is refused like a plain `../` escape.
Group and `allowed` sessions are always confined to `workspace/public`, whatever the config
says: that is what keeps MEMORY.md, sessions/, cron/ and skills/ out of their reach.
"""

from __future__ import annotations

import os
from pathlib import Path

from clawgate.agent.tools.base import PathOutsideWorkspace, ToolContext, ToolError


def resolve_path(path: str, ctx: ToolContext) -> Path:
    """Resolve `path` (relative to ctx.root, `~` expanded) and check it may be reached.

    Raises PathOutsideWorkspace when it lands outside the allowed folder, ToolError when the
    string cannot be a path at all. Never touches the file itself.
    """
    if not isinstance(path, str):
        raise ToolError(f"path must be a string, got {type(path).__name__}")
    if "\x00" in path:
        raise ToolError("path contains a NUL byte")
    try:
        workspace = Path(os.path.realpath(ctx.workspace))
        root = Path(os.path.realpath(ctx.root))
        # realpath (not Path.resolve) because on 3.11 it handles symlink loops without raising
        # and resolves a not-yet-existing tail against its deepest existing parent.
        resolved = Path(os.path.realpath(root / os.path.expanduser(path)))
    except (ValueError, OSError, RuntimeError) as exc:
        raise ToolError(f"path {path!r} is not usable: {exc}") from None

    confined = ctx.config.restrict_to_workspace or not ctx.trust.is_owner
    if not ctx.trust.is_owner and (root == workspace or not _inside(root, workspace)):
        # public/ symlinked elsewhere would hand outsiders whatever it points at.
        raise PathOutsideWorkspace(f"path {path!r} is outside the workspace")
    if confined and not _inside(resolved, root):
        raise PathOutsideWorkspace(f"path {path!r} is outside the workspace")
    if _is_process_environ(resolved):
        # Another process's environment holds tokens; refused even with the guard off.
        raise PathOutsideWorkspace(f"path {path!r} is not readable by tools")
    return resolved


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _is_process_environ(path: Path) -> bool:
    return len(path.parts) > 2 and path.parts[1] == "proc" and path.name == "environ"
