"""The path guard: turn a path the model gave into a real path this session may touch.

Resolution and containment are the kernel's `confine` (symlinks followed, `..` collapsed,
decided on the resolved path), so a symlink inside the workspace that points out of it is
refused like a plain `../` escape. Who reaches what is the kernel's `Reach` (the same check
the media loader and the channels' outbound files use): group and `allowed` sessions are
always confined to their own chat's area `public/<chat>/` plus `shared/` (= public/shared,
read-only), whatever the config says (that keeps MEMORY.md, sessions/, cron/, skills/ and
every other chat's files out of their reach); an owner is confined to the workspace while
`tools.restrict_to_workspace` is on; nobody reads another process's environment.
"""

from __future__ import annotations

import os
from pathlib import Path

from clawgate.agent.tools.base import ToolContext
from clawgate.kernel.areas import Reach
from clawgate.kernel.errors import PathOutsideRoot, PathOutsideWorkspace, ReadOnlyPath, ToolError
from clawgate.kernel.storage import confine

# An owner without the restriction may reach anything: confine to the filesystem root,
# which still resolves the path the same way.
_EVERYWHERE = Path("/")


def resolve_path(path: str, ctx: ToolContext, *, write: bool = False) -> Path:
    """Resolve `path` (relative to ctx.root, `~` expanded) and check it may be reached.

    `write`: the caller will change the file (shared/ is read-only for non-owners). Raises
    PathOutsideWorkspace when it lands outside the allowed folder, ToolError when the string
    cannot be a path at all. Never touches the file itself.
    """
    if not isinstance(path, str):
        raise ToolError(f"path must be a string, got {type(path).__name__}")
    if "\x00" in path:
        raise ToolError("path contains a NUL byte")
    outside = PathOutsideWorkspace(f"path {path!r} is outside the workspace")
    try:
        requested = os.path.expanduser(path)
        reach = Reach.of(ctx.workspace, ctx.trust, ctx.session_key)
    except PathOutsideRoot:
        raise outside from None
    except OSError as exc:
        raise ToolError(f"path {path!r} is not usable: {exc}") from None
    try:
        if ctx.trust.is_owner and not ctx.config.restrict_to_workspace:
            resolved = confine(_EVERYWHERE, reach.root / requested)
        else:
            resolved = reach.resolve(requested, write=write)
    except ReadOnlyPath:
        raise PathOutsideWorkspace(f"path {path!r} is in shared/, which is read-only") from None
    except PathOutsideRoot:
        raise outside from None
    if _is_process_environ(resolved):
        # Another process's environment holds tokens; refused even with the guard off.
        raise PathOutsideWorkspace(f"path {path!r} is not readable by tools")
    return resolved


def _is_process_environ(path: Path) -> bool:
    return len(path.parts) > 2 and path.parts[1] == "proc" and path.name == "environ"
