"""MEMORY.md in the browser: view, edit, versions with a diff and one-click restore.

Every write goes through the runtime's `MemoryStore` under the workspace's one memory lock
(`MemoryLock.run`), like a consolidation or the model's `write_file`. An edit carries the
version (sha-256 of the text) it was based on; if MEMORY.md changed since - a consolidation,
the model, another tab - the save is refused with a diff of what changed and nothing is
written. A restore is a plain replace: the current text becomes a version of its own first.
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from clawgate.agent.memory.store import MemoryStore
from clawgate.gateway.dashboard.render import render, services
from clawgate.gateway.dashboard.services import DashboardServices
from clawgate.kernel.errors import PathOutsideRoot
from clawgate.kernel.storage import confine


def routes(_services: DashboardServices) -> list[web.RouteDef]:
    return [
        web.get("/memory", memory_page),
        web.get("/memory/edit", edit_page),
        web.post("/memory/edit", save),
        web.get("/memory/versions", versions_page),
        web.get("/memory/versions/{name}", version_page),
        web.post("/memory/versions/{name}/restore", restore),
    ]


def version_of(text: str) -> str:
    """What an edit form says it was based on: the text's sha-256."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "add", "del", "hunk" or "" (context and file names)
    text: str


def diff(before: str, after: str, before_name: str, after_name: str) -> list[DiffLine]:
    lines = difflib.unified_diff(
        before.splitlines(), after.splitlines(), before_name, after_name, lineterm=""
    )
    found = []
    for line in lines:
        if line.startswith(("+++", "---")):
            kind = ""
        elif line.startswith("@@"):
            kind = "hunk"
        else:
            kind = {"+": "add", "-": "del"}.get(line[:1], "")
        found.append(DiffLine(kind, line))
    return found


@dataclass(frozen=True)
class Saved:
    """The outcome of an edit: `current` is MEMORY.md after it (unchanged on a conflict)."""

    written: bool
    current: str


def save_memory(store: MemoryStore, based_on: str, text: str) -> Saved:
    """Replace MEMORY.md with `text` if it is still the version `based_on`; else write
    nothing. Call it holding the memory lock (`store.lock.run`)."""
    current = store.read_memory()
    if version_of(current) != based_on:
        return Saved(written=False, current=current)
    store.replace_memory(text)
    return Saved(written=True, current=store.read_memory())


async def memory_page(request: web.Request) -> web.StreamResponse:
    memory = services(request).memory
    text = await asyncio.to_thread(memory.read_memory)
    saved = request.query.get("saved")
    return render(request, "memory.html", title="Memory", text=text, saved=saved)


async def edit_page(request: web.Request) -> web.StreamResponse:
    text = await asyncio.to_thread(services(request).memory.read_memory)
    return _edit_form(request, text=text, base=text, version=version_of(text))


def _edit_form(
    request: web.Request,
    *,
    text: str,
    base: str,
    version: str,
    changes: list[DiffLine] | None = None,
    status: int = 200,
) -> web.Response:
    return render(
        request,
        "memory_edit.html",
        title="Edit MEMORY.md",
        status=status,
        text=text,
        base=base,
        version=version,
        changes=changes or [],
    )


async def save(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    text, based_on = str(form.get("text", "")), str(form.get("version", ""))
    base = str(form.get("base", ""))
    memory = services(request).memory
    lock = services(request).memory_lock
    outcome = await lock.run(save_memory, memory, based_on, text.replace("\r\n", "\n"))
    if outcome.written:
        raise web.HTTPSeeOther("/memory?saved=1")
    # Refused: show what changed underneath since the form was opened; the owner's text stays
    # in the form, now based on the current version, to merge by hand and save again.
    shown_base = base if version_of(base) == based_on else text
    changes = diff(shown_base, outcome.current, "MEMORY.md when you opened it", "MEMORY.md now")
    return _edit_form(
        request,
        text=text,
        base=outcome.current,
        version=version_of(outcome.current),
        changes=changes,
        status=409,
    )


def _version_path(store: MemoryStore, name: str) -> Path:
    """A kept version by its file name, confined to the versions folder."""
    try:
        path = confine(store.versions_dir, name)
    except PathOutsideRoot:
        raise web.HTTPNotFound(text="no such version") from None
    if path.parent != store.versions_dir.resolve() or path not in _resolved(store.versions()):
        raise web.HTTPNotFound(text="no such version")
    return path


def _resolved(paths: list[Path]) -> set[Path]:
    return {path.resolve() for path in paths}


async def versions_page(request: web.Request) -> web.StreamResponse:
    memory = services(request).memory

    def listing() -> list[dict[str, object]]:
        found = []
        for path in reversed(memory.versions()):
            stat = path.stat()
            found.append({"name": path.name, "size": stat.st_size, "mtime": stat.st_mtime})
        return found

    return render(
        request,
        "memory_versions.html",
        title="MEMORY.md versions",
        versions=await asyncio.to_thread(listing),
    )


async def version_page(request: web.Request) -> web.StreamResponse:
    memory = services(request).memory
    path = _version_path(memory, request.match_info["name"])

    def read() -> tuple[str, str]:
        return path.read_text(encoding="utf-8", errors="replace"), memory.read_memory()

    try:
        old, current = await asyncio.to_thread(read)
    except FileNotFoundError:
        raise web.HTTPNotFound(text="no such version") from None
    return render(
        request,
        "memory_version.html",
        title=f"Version {path.name}",
        name=path.name,
        text=old,
        changes=diff(old, current, path.name, "MEMORY.md now"),
    )


async def restore(request: web.Request) -> web.StreamResponse:
    memory = services(request).memory
    path = _version_path(memory, request.match_info["name"])

    def restore_version() -> None:
        memory.replace_memory(path.read_text(encoding="utf-8", errors="replace"))

    try:
        await services(request).memory_lock.run(restore_version)
    except FileNotFoundError:  # pruned meanwhile by a newer save
        raise web.HTTPNotFound(text="no such version") from None
    raise web.HTTPSeeOther("/memory?saved=restored")
