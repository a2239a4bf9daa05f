"""MEMORY.md in the browser: view, edit, versions with a diff and one-click restore, and the
lines consolidations removed with one-click restore.

Every write goes through the runtime's `MemoryStore` under the workspace's one memory lock
(`MemoryLock.run`), like a consolidation or the model's `write_file`. Every write is a
compare-and-swap: the form carries the version (sha-256 of the text) of MEMORY.md its page
showed, and the text itself (`base`); if MEMORY.md changed since - a consolidation, the
model, another tab - nothing is written and the page comes back (409) with a diff of what
changed meanwhile, to decide again. That holds for an edit, for restoring a kept version (a
restore replaces the file: without the check it would silently drop what a consolidation
added after the page was opened), and for putting back the lines a consolidation removed
(agent/memory/removed.py; they are appended at the end). A browser posts every field's line
ends as CRLF, so `base` and `text` are read back with LF line ends, and a version is the
hash of the text with LF line ends (a MEMORY.md saved with CRLF by an editor included).
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from clawgate.agent.memory.removed import Removal, with_restored
from clawgate.agent.memory.store import MemoryStore
from clawgate.gateway.dashboard.markdown import to_html
from clawgate.gateway.dashboard.render import render, services
from clawgate.gateway.dashboard.services import DashboardServices
from clawgate.kernel.errors import PathOutsideRoot
from clawgate.kernel.storage import confine

MAX_REMOVALS_SHOWN = 20  # the newest removals not restored yet, on the memory page


def routes(_services: DashboardServices) -> list[web.RouteDef]:
    return [
        web.get("/memory", memory_page),
        web.get("/memory/edit", edit_page),
        web.post("/memory/edit", save),
        web.get("/memory/versions", versions_page),
        web.get("/memory/versions/{name}", version_page),
        web.post("/memory/versions/{name}/restore", restore),
        web.post("/memory/removed/{id}/restore", restore_removed),
    ]


def lf(text: str) -> str:
    """Form text with LF line ends: browsers send CRLF for every newline in a field."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def version_of(text: str) -> str:
    """What a form says its page showed: the text's sha-256, line ends read as LF (a page's
    text comes back from a browser with CRLF, whatever the file has)."""
    return hashlib.sha256(lf(text).encode("utf-8")).hexdigest()


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
class Swapped:
    """The outcome of a compare-and-swap write: `current` is MEMORY.md after it (unchanged
    when the page's version was not the current one)."""

    written: bool
    current: str


def compare_and_swap(
    read: Callable[[], str], replace: Callable[[str], None], based_on: str, text: str
) -> Swapped:
    """Replace a file with `text` (through `replace`) if it still reads as the version
    `based_on`; else write nothing. Call it holding the lock that guards the file."""
    current = read()
    if version_of(current) != based_on:
        return Swapped(written=False, current=current)
    replace(text)
    return Swapped(written=True, current=read())


def save_memory(store: MemoryStore, based_on: str, text: str) -> Swapped:
    """Replace MEMORY.md with `text` if it is still the version `based_on`; else write
    nothing. Call it holding the memory lock (`store.lock.run`)."""
    return compare_and_swap(store.read_memory, store.replace_memory, based_on, text)


def restore_version(store: MemoryStore, based_on: str, path: Path) -> Swapped:
    """Replace MEMORY.md with a kept version if it is still the version `based_on`. Call it
    holding the memory lock. FileNotFoundError if the version was pruned meanwhile."""
    current = store.read_memory()
    if version_of(current) != based_on:
        return Swapped(written=False, current=current)
    store.replace_memory(path.read_text(encoding="utf-8", errors="replace"))
    return Swapped(written=True, current=store.read_memory())


def restore_lines(store: MemoryStore, based_on: str, removal_id: str) -> Swapped | None:
    """Append a removal's lines back if MEMORY.md is still the version `based_on`; None if
    there is no such removal. Call it holding the memory lock."""
    removal = store.removals().find(removal_id)
    if removal is None:
        return None
    current = store.read_memory()
    if version_of(current) != based_on:
        return Swapped(written=False, current=current)
    return Swapped(written=True, current=store.restore_removal(removal))


async def memory_page(request: web.Request) -> web.StreamResponse:
    memory = services(request).memory
    text = await asyncio.to_thread(memory.read_memory)
    return await _memory_view(request, text, saved=request.query.get("saved"))


async def _memory_view(
    request: web.Request,
    text: str,
    *,
    saved: str | None = None,
    changes: list[DiffLine] | None = None,
    status: int = 200,
) -> web.Response:
    journal = await asyncio.to_thread(services(request).memory.removals)
    # A removal whose lines are all back (restored by hand, say) has nothing left to offer.
    pending = [r for r in journal.pending() if with_restored(text, r) != text]
    removals: list[Removal] = pending[:MAX_REMOVALS_SHOWN]
    return render(
        request,
        "memory.html",
        title="Memory",
        status=status,
        text=text,
        saved=saved,
        version=version_of(text),
        removals=removals,
        changes=changes or [],
    )


async def edit_page(request: web.Request) -> web.StreamResponse:
    text = await asyncio.to_thread(services(request).memory.read_memory)
    return edit_form(request, MEMORY_FORM, text=text, base=text)


@dataclass(frozen=True)
class FileForm:
    """Which file an edit form edits: its name as shown, where it posts, where Cancel goes."""

    name: str
    action: str
    back: str


MEMORY_FORM = FileForm("MEMORY.md", "/memory/edit", "/memory")


def edit_form(
    request: web.Request,
    form: FileForm,
    *,
    text: str,
    base: str,
    changes: list[DiffLine] | None = None,
    preview: str | None = None,
    status: int = 200,
) -> web.Response:
    """The edit page of `form`'s file, showing `text`, based on the version `base`."""
    return render(
        request,
        "memory_edit.html",
        title=f"Edit {form.name}",
        status=status,
        form=form,
        text=text,
        base=base,
        version=version_of(base),
        changes=changes or [],
        preview=preview,
    )


async def save(request: web.Request) -> web.StreamResponse:
    memory = services(request).memory
    lock = services(request).memory_lock
    return await save_form(
        request, MEMORY_FORM, lambda *args: lock.run(save_memory, memory, *args), "/memory?saved=1"
    )


async def save_form(
    request: web.Request,
    form: FileForm,
    swap: Callable[[str, str], Awaitable[Swapped]],
    saved: str,
) -> web.StreamResponse:
    """Handle an edit form's post: `swap(based_on, text)` writes if the file is still the
    version the form showed. Preview (the form's other button) writes nothing."""
    posted = await request.post()
    text, based_on = lf(str(posted.get("text", ""))), str(posted.get("version", ""))
    base = lf(str(posted.get("base", "")))
    if "preview" in posted:
        return edit_form(request, form, text=text, base=base, preview=to_html(text))
    outcome = await swap(based_on, text)
    if outcome.written:
        raise web.HTTPSeeOther(saved)
    # Refused: show what changed underneath since the form was opened; the owner's text stays
    # in the form, now based on the current version, to merge by hand and save again.
    shown_base = base if version_of(base) == based_on else text
    changes = diff(
        shown_base, outcome.current, f"{form.name} when you opened it", f"{form.name} now"
    )
    return edit_form(request, form, text=text, base=outcome.current, changes=changes, status=409)


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
    return await _version_view(request, path, await asyncio.to_thread(memory.read_memory))


async def _version_view(
    request: web.Request,
    path: Path,
    current: str,
    *,
    meanwhile: list[DiffLine] | None = None,
    status: int = 200,
) -> web.Response:
    try:
        old = await asyncio.to_thread(path.read_text, encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise web.HTTPNotFound(text="no such version") from None
    return render(
        request,
        "memory_version.html",
        title=f"Version {path.name}",
        status=status,
        name=path.name,
        text=old,
        current=current,
        version=version_of(current),
        changes=diff(old, current, path.name, "MEMORY.md now"),
        meanwhile=meanwhile or [],
    )


def _changed_since(form_base: str, based_on: str, current: str) -> list[DiffLine]:
    """What changed between the page the owner saw and MEMORY.md now."""
    base = form_base if version_of(form_base) == based_on else ""
    return diff(base, current, "MEMORY.md when you opened the page", "MEMORY.md now")


async def restore(request: web.Request) -> web.StreamResponse:
    memory = services(request).memory
    path = _version_path(memory, request.match_info["name"])
    form = await request.post()
    based_on, base = str(form.get("version", "")), lf(str(form.get("base", "")))
    try:
        outcome = await services(request).memory_lock.run(restore_version, memory, based_on, path)
    except FileNotFoundError:  # pruned meanwhile by a newer save
        raise web.HTTPNotFound(text="no such version") from None
    if outcome.written:
        raise web.HTTPSeeOther("/memory?saved=restored")
    meanwhile = _changed_since(base, based_on, outcome.current)
    return await _version_view(request, path, outcome.current, meanwhile=meanwhile, status=409)


async def restore_removed(request: web.Request) -> web.StreamResponse:
    memory = services(request).memory
    form = await request.post()
    based_on, base = str(form.get("version", "")), lf(str(form.get("base", "")))
    lock = services(request).memory_lock
    outcome = await lock.run(restore_lines, memory, based_on, request.match_info["id"])
    if outcome is None:
        raise web.HTTPNotFound(text="no such removal")
    if outcome.written:
        raise web.HTTPSeeOther("/memory?saved=lines")
    changes = _changed_since(base, based_on, outcome.current)
    return await _memory_view(request, outcome.current, changes=changes, status=409)
