"""The path guard: turn a path the model gave into a real path this session may touch.

Resolution and containment are the kernel's `confine` (symlinks followed, `..` collapsed,
decided on the resolved path), so a symlink inside the workspace that points out of it is
refused like a plain `../` escape. On top of it, the rules of who reaches what: group and
`allowed` sessions are always confined to `workspace/public`, whatever the config says
(that keeps MEMORY.md, sessions/, cron/ and skills/ out of their reach); an owner is
confined to the workspace while `tools.restrict_to_workspace` is on; nobody reads another
process's environment.
"""

from __future__ import annotations

import os
from pathlib import Path

from clawgate.agent.tools.base import PathOutsideWorkspace, ToolContext, ToolError
from clawgate.kernel.errors import PathOutsideRoot
from clawgate.kernel.storage import confine, inside

# An owner without the restriction may reach anything: confine to the filesystem root,
# which still resolves the path the same way.
_EVERYWHERE = Path("/")


def resolve_path(path: str, ctx: ToolContext) -> Path:
    """Resolve `path` (relative to ctx.root, `~` expanded) and check it may be reached.

    Raises PathOutsideWorkspace when it lands outside the allowed folder, ToolError when the
    string cannot be a path at all. Never touches the file itself.
    """
    if not isinstance(path, str):
        raise ToolError(f"path must be a string, got {type(path).__name__}")
    if "\x00" in path:
        raise ToolError("path contains a NUL byte")
    outside = PathOutsideWorkspace(f"path {path!r} is outside the workspace")
    try:
        workspace = confine(_EVERYWHERE, ctx.workspace)
        root = confine(_EVERYWHERE, ctx.root)
        requested = os.path.expanduser(path)
    except (PathOutsideRoot, OSError) as exc:
        raise ToolError(f"path {path!r} is not usable: {exc}") from None

    if not ctx.trust.is_owner and (root == workspace or not inside(root, workspace)):
        # public/ symlinked elsewhere would hand outsiders whatever it points at.
        raise outside
    confined = ctx.config.restrict_to_workspace or not ctx.trust.is_owner
    try:
        resolved = confine(root if confined else _EVERYWHERE, root / requested)
    except PathOutsideRoot:
        raise outside from None
    if _is_process_environ(resolved):
        # Another process's environment holds tokens; refused even with the guard off.
        raise PathOutsideWorkspace(f"path {path!r} is not readable by tools")
    return resolved


def _is_process_environ(path: Path) -> bool:
    return len(path.parts) > 2 and path.parts[1] == "proc" and path.name == "environ"
