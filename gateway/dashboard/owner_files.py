"""The owner's files in the browser: SOUL.md, USER.md, AGENTS.md, TOOLS.md, HEARTBEAT.md and
each workspace skill's SKILL.md, shown with their Markdown rendered, edited with a preview.

    GET  /files                      the files, the skills, a form to start a new skill
    GET  /files/view?file=NAME       the file rendered, its kept versions
    GET  /files/edit?file=NAME       the editor (Preview renders without saving)
    POST /files/edit?file=NAME       save, under the rule of MEMORY.md's page (memory.py):
                                     compare-and-swap on the version the form showed, a
                                     refusal with a diff when it changed meanwhile
    GET  /files/version?file=NAME&v=VERSION   a kept version and its diff to the file now

A save runs under the workspace's memory lock, the lock the model's file writes of memory
take, and keeps the replaced text as a version (agent/memory/versions.py: the same code
that keeps MEMORY.md's): `<workspace>/.versions/` for the top-level files, the skill's own
`.versions/` for a skill. NAME is one of the five names or `skills/<name>/SKILL.md`; any
other name is a 404, and every path is confined to the workspace.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from aiohttp import web
from yarl import URL

from clawgate.agent.memory.versions import KeptFile
from clawgate.gateway.dashboard.markdown import to_html
from clawgate.gateway.dashboard.memory import (
    FileForm,
    Swapped,
    compare_and_swap,
    diff,
    edit_form,
    save_form,
)
from clawgate.gateway.dashboard.render import render, services
from clawgate.gateway.dashboard.services import DashboardServices
from clawgate.kernel.errors import PathOutsideRoot
from clawgate.kernel.storage import DiskWriter, confine

OWNER_FILES = ("SOUL.md", "USER.md", "AGENTS.md", "TOOLS.md", "HEARTBEAT.md")
SKILL = re.compile(r"skills/([A-Za-z0-9_-][A-Za-z0-9_.-]{0,63})/SKILL\.md")


def routes(_services: DashboardServices) -> list[web.RouteDef]:
    return [
        web.get("/files", files_page),
        web.post("/files/skill", new_skill),
        web.get("/files/view", file_page),
        web.get("/files/edit", edit_page),
        web.post("/files/edit", save),
        web.get("/files/version", version_page),
    ]


def kept_file(workspace: Path, name: str, writer: DiskWriter) -> KeptFile:
    """The file `name` of the workspace with its versions; 404 for any other name."""
    try:
        if name in OWNER_FILES:
            return KeptFile(confine(workspace, name), workspace / ".versions", writer)
        if SKILL.fullmatch(name):
            path = confine(workspace, name)
            return KeptFile(path, path.parent / ".versions", writer)
    except PathOutsideRoot:
        pass
    raise web.HTTPNotFound(text="not one of the owner's files")


def _kept(request: web.Request, name: str) -> KeptFile:
    svc = services(request)
    return kept_file(svc.config.workspace, name, svc.runtime.writer)


def _form(name: str) -> FileForm:
    query = URL.build(query={"file": name}).query_string
    return FileForm(name, f"/files/edit?{query}", f"/files/view?{query}")


def listing(workspace: Path) -> tuple[list[dict[str, object]], list[str]]:
    """The five files (size and time, or not yet written) and the workspace's skills."""
    files: list[dict[str, object]] = []
    for name in OWNER_FILES:
        path = workspace / name
        stat = path.stat() if path.is_file() else None
        files.append(
            {
                "name": name,
                "size": stat.st_size if stat else None,
                "mtime": stat.st_mtime if stat else None,
            }
        )
    skills_dir = workspace / "skills"
    skills = sorted(
        f"skills/{p.parent.name}/SKILL.md"
        for p in (skills_dir.glob("*/SKILL.md") if skills_dir.is_dir() else ())
        if SKILL.fullmatch(f"skills/{p.parent.name}/SKILL.md")
    )
    return files, skills


async def files_page(request: web.Request) -> web.StreamResponse:
    files, skills = await asyncio.to_thread(listing, services(request).config.workspace)
    return render(request, "files.html", title="Files", files=files, skills=skills)


async def new_skill(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    name = f"skills/{str(form.get('name', '')).strip()}/SKILL.md"
    if not SKILL.fullmatch(name):
        raise web.HTTPBadRequest(text="a skill name is letters, digits, '.', '-' or '_'")
    raise web.HTTPSeeOther(_form(name).action)


async def file_page(request: web.Request) -> web.StreamResponse:
    name = request.query.get("file", "")
    kept = _kept(request, name)

    def load() -> tuple[str, list[dict[str, object]]]:
        versions = [
            {"name": p.name, "size": p.stat().st_size, "mtime": p.stat().st_mtime}
            for p in reversed(kept.versions())
        ]
        return kept.read(), versions

    text, versions = await asyncio.to_thread(load)
    return render(
        request,
        "file.html",
        title=name,
        name=name,
        form=_form(name),
        text=text,
        html=to_html(text),
        versions=versions,
        saved=request.query.get("saved"),
    )


async def edit_page(request: web.Request) -> web.StreamResponse:
    name = request.query.get("file", "")
    text = await asyncio.to_thread(_kept(request, name).read)
    return edit_form(request, _form(name), text=text, base=text)


async def save(request: web.Request) -> web.StreamResponse:
    name = request.query.get("file", "")
    kept = _kept(request, name)
    lock = services(request).memory_lock

    def write(based_on: str, text: str) -> Swapped:
        kept.writer.mkdir(kept.path.parent)  # a new skill's folder
        return compare_and_swap(kept.read, kept.replace, based_on, text)

    async def swap(based_on: str, text: str) -> Swapped:
        return await lock.run(write, based_on, text)

    saved = f"{_form(name).back}&saved=1"
    return await save_form(request, _form(name), swap, saved)


async def version_page(request: web.Request) -> web.StreamResponse:
    name = request.query.get("file", "")
    kept = _kept(request, name)
    wanted = request.query.get("v", "")

    def load() -> tuple[str, str]:
        for path in kept.versions():
            if path.name == wanted:
                return path.read_text(encoding="utf-8", errors="replace"), kept.read()
        raise web.HTTPNotFound(text="no such version")

    old, current = await asyncio.to_thread(load)
    return render(
        request,
        "file_version.html",
        title=f"{name}: {wanted}",
        name=name,
        version_name=wanted,
        form=_form(name),
        text=old,
        changes=diff(old, current, wanted, f"{name} now"),
    )
