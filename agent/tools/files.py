"""File tools: read_file, write_file, edit_file, append_file, list_dir. Every path goes
through the guard.

Changes to a memory file (anything in `memory/`) run under the workspace's memory lock, the
one consolidations and CLI commands take, for their whole read-modify-write (memory/lock.py).
write_file is a compare-and-swap against what read_file returned in this turn: a file that
changed since is not overwritten ("changed since you read it; read it again"), and a memory
file that already has content must have been read in this turn first - the copy in the
system prompt may be stale. append_file adds lines without rewriting, for logs.
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import Field

from clawgate.agent.text import without_surrogates
from clawgate.agent.tools.base import Tool, ToolContext, ToolParams
from clawgate.agent.tools.paths import resolve_path
from clawgate.kernel.errors import ToolError, one_line

MAX_READ_BYTES = 1024 * 1024
MAX_LIST_ENTRIES = 500
NEW_FILE_MODE = 0o600
NEW_DIR_MODE = 0o700
# Below this similarity "closest match" would be noise, not a hint.
MIN_MATCH_RATIO = 0.3
CHANGED = "{shown} changed since you read it; read it again"
NOT_READ = (
    "{shown} is a memory file that already has content you have not read in this turn; read "
    "it first (read_file), or add to it with append_file"
)

T = TypeVar("T")


def _path(what: str) -> Any:
    return Field(description=f"{what}, relative to the workspace (or absolute inside it)")


class ReadFile(Tool["ReadFile.Params"]):
    name: ClassVar[str] = "read_file"
    description: ClassVar[str] = "Read a text file and return its contents (up to 1 MB)."

    class Params(ToolParams):
        path: str = _path("The file to read")

    async def run(self, params: Params, ctx: ToolContext) -> str:
        path = resolve_path(params.path, ctx)
        raw = await asyncio.to_thread(_read_bytes, path, params.path)
        ctx.reads[path] = _digest(raw)
        text = raw.decode("utf-8", errors="replace")
        return text if text else f"({params.path} is empty)"


class WriteFile(Tool["WriteFile.Params"]):
    name: ClassVar[str] = "write_file"
    description: ClassVar[str] = (
        "Create or overwrite a text file with the given content; parent folders are created. "
        "A file you read in this turn is not overwritten if it changed since: read it again. "
        "To add lines to a log, use append_file instead."
    )

    class Params(ToolParams):
        path: str = _path("The file to write")
        content: str = Field(description="The complete new file content")

    async def run(self, params: Params, ctx: ToolContext) -> str:
        shown = params.path
        path = resolve_path(shown, ctx, write=True)
        size = await _changing(ctx, path, _write_checked, ctx, path, shown, params.content)
        return f"Wrote {size} bytes to {shown}"


class EditFile(Tool["EditFile.Params"]):
    name: ClassVar[str] = "edit_file"
    description: ClassVar[str] = (
        "Replace one exact occurrence of old_text with new_text in a file. old_text must "
        "match exactly once, including whitespace; add surrounding lines to make it unique."
    )

    class Params(ToolParams):
        path: str = _path("The file to edit")
        old_text: str = Field(description="Exact text to find (once)")
        new_text: str = Field(description="Text to put in its place")

    async def run(self, params: Params, ctx: ToolContext) -> str:
        shown, old, new = params.path, params.old_text, params.new_text
        if not old:
            raise ToolError("old_text must not be empty")
        path = resolve_path(shown, ctx, write=True)
        await _changing(ctx, path, _edit, ctx, path, shown, old, new)
        return f"Edited {shown}: replaced 1 occurrence"


class AppendFile(Tool["AppendFile.Params"]):
    name: ClassVar[str] = "append_file"
    description: ClassVar[str] = (
        "Add lines at the end of a text file, keeping everything already in it; the file and "
        "its folders are created if missing. Use it to add to a daily log "
        "(memory/YYYY-MM-DD.md) or any other log, instead of rewriting the file."
    )

    class Params(ToolParams):
        path: str = _path("The file to add to")
        content: str = Field(description="The lines to add at the end")

    async def run(self, params: Params, ctx: ToolContext) -> str:
        shown = params.path
        if not params.content.strip():
            raise ToolError("content is empty; there is nothing to append")
        path = resolve_path(shown, ctx, write=True)
        size = await _changing(ctx, path, _append, ctx, path, shown, params.content)
        return f"Appended {size} bytes to {shown}"


class ListDir(Tool["ListDir.Params"]):
    name: ClassVar[str] = "list_dir"
    description: ClassVar[str] = (
        "List a folder: entries sorted by name, folders end with '/', files show their size."
    )

    class Params(ToolParams):
        path: str = _path("The folder to list ('.' for the workspace)")

    async def run(self, params: Params, ctx: ToolContext) -> str:
        shown = params.path or "."
        path = resolve_path(shown, ctx)
        return await asyncio.to_thread(_list, path, shown)


async def _changing(ctx: ToolContext, path: Path, change: Callable[..., T], *args: Any) -> T:
    """Run a file change in a thread; for a memory file, holding the memory lock throughout."""
    if ctx.memory_lock.covers(path):
        return await ctx.memory_lock.run(change, *args)
    return await asyncio.to_thread(change, *args)


def _digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def _read_text(path: Path, shown: str) -> str:
    return _read_bytes(path, shown).decode("utf-8", errors="replace")


def _read_bytes(path: Path, shown: str) -> bytes:
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ToolError(f"file not found: {shown}") from None
    except OSError as exc:
        raise ToolError(f"could not read {shown}: {one_line(exc)}") from None
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{shown} is a directory; use list_dir to see what it contains")
    if not stat.S_ISREG(info.st_mode):
        # A FIFO or device would block or never end.
        raise ToolError(f"{shown} is not a regular file")
    if info.st_size > MAX_READ_BYTES:
        raise ToolError(f"{shown} is too large to read ({info.st_size:,} bytes; the limit is 1 MB)")
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_READ_BYTES + 1)
    except OSError as exc:
        raise ToolError(f"could not read {shown}: {one_line(exc)}") from None
    if len(raw) > MAX_READ_BYTES:
        raise ToolError(f"{shown} is too large to read (over 1 MB)")
    return raw


def _existing(path: Path, shown: str) -> bytes | None:
    """The file's bytes now, None if there is no file."""
    if path.is_dir():
        raise ToolError(f"{shown} is a directory; give a file path")
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ToolError(f"could not read {shown}: {one_line(exc)}") from None


def _write_checked(ctx: ToolContext, path: Path, shown: str, content: str) -> int:
    """write_file: refuse to overwrite what the model has not seen, then replace."""
    seen = ctx.reads.get(path)
    if seen is not None or ctx.memory_lock.covers(path):
        current = _existing(path, shown)
        if seen is None and current:
            raise ToolError(NOT_READ.format(shown=shown))
        if seen is not None and (current is None or _digest(current) != seen):
            raise ToolError(CHANGED.format(shown=shown))
    data = _write_text(ctx, path, shown, content)
    # The model knows the whole file now: a later write_file in this turn builds on it.
    ctx.reads[path] = _digest(data)
    return len(data)


def _edit(ctx: ToolContext, path: Path, shown: str, old: str, new: str) -> None:
    raw = _read_bytes(path, shown)
    text = raw.decode("utf-8", errors="replace")
    count = text.count(old)
    if count == 0:
        raise ToolError(f"old_text not found in {shown}; {closest_match(text, old)}")
    if count > 1:
        raise ToolError(
            f"old_text occurs {count} times in {shown}; include more context to make it unique"
        )
    data = _write_text(ctx, path, shown, text.replace(old, new, 1))
    _follow(ctx, path, raw, data)


def _append(ctx: ToolContext, path: Path, shown: str, content: str) -> int:
    before = _existing(path, shown) if path in ctx.reads else None
    data = without_surrogates(content).encode("utf-8")
    if not data.endswith(b"\n"):
        data += b"\n"
    try:
        if not path.parent.is_dir():
            ctx.writer.mkdir(path.parent, mode=NEW_DIR_MODE)
        # Whole lines or nothing; a file that ends mid-line gets its newline first.
        ctx.writer.append(path, data, mode=NEW_FILE_MODE)
        ctx.writer.fsync(path)
    except OSError as exc:
        raise ToolError(f"could not append to {shown}: {one_line(exc)}") from None
    if before is not None:
        joint = b"\n" if before and not before.endswith(b"\n") else b""
        _follow(ctx, path, before, before + joint + data)
    return len(data)


def _follow(ctx: ToolContext, path: Path, before: bytes, after: bytes) -> None:
    """After the model's own edit of a file it read, its reading still holds - unless
    someone else had changed the file in between, which it has not seen."""
    if ctx.reads.get(path) == _digest(before):
        ctx.reads[path] = _digest(after)


def _write_text(ctx: ToolContext, path: Path, shown: str, content: str) -> bytes:
    if path.is_dir():
        raise ToolError(f"{shown} is a directory; give a file path")
    data = without_surrogates(content).encode("utf-8")
    try:
        # Rewriting a private file (MEMORY.md is 0600) must not widen who can read it.
        mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else NEW_FILE_MODE
        if not path.parent.is_dir():
            ctx.writer.mkdir(path.parent, mode=NEW_DIR_MODE)
        ctx.writer.replace(path, data, mode=mode)
    except OSError as exc:
        raise ToolError(f"could not write {shown}: {one_line(exc)}") from None
    return data


def closest_match(text: str, wanted: str) -> str:
    """Describe the block of lines in `text` most like `wanted`, for a failed edit."""
    lines = text.splitlines()
    size = max(len(wanted.splitlines()), 1)
    if not lines:
        return "the file is empty"
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(wanted)
    # Starting at the threshold lets the cheap bounds below skip hopeless windows too.
    best_ratio, best_start = MIN_MATCH_RATIO, -1
    for start in range(max(len(lines) - size + 1, 1)):
        matcher.set_seq1("\n".join(lines[start : start + size]))
        # The cheap upper bounds skip most windows before the expensive ratio().
        if matcher.real_quick_ratio() <= best_ratio or matcher.quick_ratio() <= best_ratio:
            continue
        ratio = matcher.ratio()
        if ratio > best_ratio:
            best_ratio, best_start = ratio, start
    if best_start < 0:
        return "nothing similar found; read the file first"
    block = lines[best_start : best_start + size]
    end = best_start + len(block)
    where = f"line {end}" if len(block) == 1 else f"lines {best_start + 1}-{end}"
    return f"closest match at {where}:\n" + "\n".join(block)


def _list(path: Path, shown: str) -> str:
    try:
        with os.scandir(path) as scan:
            entries = sorted(scan, key=lambda e: e.name)
    except FileNotFoundError:
        raise ToolError(f"folder not found: {shown}") from None
    except NotADirectoryError:
        raise ToolError(f"{shown} is a file, not a folder; use read_file") from None
    except OSError as exc:
        raise ToolError(f"could not list {shown}: {one_line(exc)}") from None
    if not entries:
        return f"{shown} is empty"
    lines = [_describe_entry(entry) for entry in entries[:MAX_LIST_ENTRIES]]
    if len(entries) > MAX_LIST_ENTRIES:
        lines.append(f"... and {len(entries) - MAX_LIST_ENTRIES} more")
    return "\n".join(lines)


def _describe_entry(entry: os.DirEntry[str]) -> str:
    try:
        if entry.is_dir():
            return f"{entry.name}/"
        return f"{entry.name}  ({entry.stat().st_size:,} bytes)"
    except OSError:
        return f"{entry.name}  (unreadable)"  # a dangling symlink, for one
