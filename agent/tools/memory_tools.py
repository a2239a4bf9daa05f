"""memory_search and memory_get: the model's way into its Markdown memory.

Owner sessions only: in group and `allowed` sessions both tools are absent (the registry
hides them and answers a call as for an unknown tool), since the memory is the owner's.
memory_get reads only the memory files: memory/MEMORY.md, memory/HISTORY.md and
memory/*.md (daily logs, session notes).

With `share_memory_from` (several agents in one gateway), memory_search also searches the
named agents' memory, read-only: their hits are labelled with the agent they come from.
Nothing else of theirs is reachable - memory_get and every other tool stay in this agent's
workspace.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from clawgate.agent.memory.batch import date_window
from clawgate.agent.memory.search import MemorySearch, SearchHit
from clawgate.agent.tools.base import Tool, ToolContext, ToolParams
from clawgate.agent.tools.files import _read_text
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import ToolsConfig
from clawgate.kernel.errors import PathOutsideRoot, ToolError
from clawgate.kernel.storage import confine

MAX_GET_LINES = 400
DEFAULT_GET_LINES = 60


class MemorySearchTool(Tool["MemorySearchTool.Params"]):
    name: ClassVar[str] = "memory_search"
    description: ClassVar[str] = (
        "Search long-term memory (MEMORY.md, daily logs, HISTORY.md) by meaning and keywords, "
        "English or Chinese. Returns path, line range, score and a snippet per hit; read more "
        "of a hit with memory_get. With sessions=true it also searches past conversations "
        "(what was said, in every chat), each hit naming the conversation, time and speaker."
    )

    class Params(ToolParams):
        query: str = Field(description="What to look for, in plain words")
        max_results: int | None = Field(None, description="How many hits (default 6)")
        since: str | None = Field(None, description="Only entries dated on/after (YYYY-MM-DD)")
        until: str | None = Field(None, description="Only entries dated on/before (YYYY-MM-DD)")
        sessions: bool = Field(False, description="Also search the conversation transcripts")

    def __init__(self, search: MemorySearch, shared: Mapping[str, MemorySearch]) -> None:
        self._search = search
        self._shared = shared

    def available(self, ctx_trust: Trust, config: ToolsConfig) -> bool:
        return ctx_trust.is_owner

    async def run(self, params: Params, ctx: ToolContext) -> str:
        query = params.query.strip()
        if not query:
            raise ToolError("query must not be empty")
        limit = params.max_results or self._search.config.max_results
        limit = max(1, min(int(limit), 50))
        try:
            since, until = date_window(self._search, params.since, params.until)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        found: list[tuple[str, SearchHit]] = []
        for agent, search in [("", self._search), *self._shared.items()]:
            hits = await search.search(query, max_results=limit, since=since, until=until)
            found += [(agent, hit) for hit in hits]
        said = []
        if params.sessions and self._search.transcripts is not None:
            said = await self._search.transcripts.search(query, ctx.trust, limit)
        if not found and not said:
            return f"No memory matches {query!r}."
        found.sort(key=lambda pair: -pair[1].score)
        lines = []
        for number, (agent, hit) in enumerate(found[:limit], 1):
            where = f"[agent {agent}, read-only] " if agent else ""
            lines.append(
                f"{number}. {where}{hit.path}:{hit.start_line}-{hit.end_line} "
                f"(score {hit.score:.2f})\n   {hit.snippet}"
            )
        if said:
            lines.append("Past conversations:")
            lines += [
                f"- {hit.session}, {hit.timestamp[:16].replace('T', ' ')}, {hit.speaker} "
                f"(score {hit.score:.2f}): {hit.snippet}"
                for hit in said
            ]
        return "\n".join(lines)


class MemoryGetTool(Tool["MemoryGetTool.Params"]):
    name: ClassVar[str] = "memory_get"
    description: ClassVar[str] = (
        "Read exact lines of a memory file (memory/MEMORY.md, memory/HISTORY.md or a daily "
        "log such as memory/2026-11-02.md), e.g. around a memory_search hit."
    )

    class Params(ToolParams):
        path: str = Field(description="e.g. memory/2026-11-02.md")
        from_line: int = Field(1, description="First line, 1-based")
        lines: int = Field(
            DEFAULT_GET_LINES, description=f"How many lines (at most {MAX_GET_LINES})"
        )

    def available(self, ctx_trust: Trust, config: ToolsConfig) -> bool:
        return ctx_trust.is_owner

    async def run(self, params: Params, ctx: ToolContext) -> str:
        shown = params.path
        path = memory_file(shown, ctx.workspace)
        start = max(1, params.from_line)
        count = max(1, min(params.lines or DEFAULT_GET_LINES, MAX_GET_LINES))
        text = await asyncio.to_thread(_read_text, path, shown)
        root = await asyncio.to_thread(os.path.realpath, ctx.workspace)
        lines = text.splitlines()
        if start > len(lines):
            raise ToolError(f"{shown} has {len(lines)} lines; from_line {start} is past the end")
        end = min(len(lines), start + count - 1)
        rel = path.relative_to(root).as_posix()
        header = f"{rel} lines {start}-{end} of {len(lines)}:"
        return header + "\n" + "\n".join(lines[start - 1 : end])


def memory_file(shown: str, workspace: Path) -> Path:
    """Resolve a path the model gave to a file directly inside memory/, or refuse."""
    if not isinstance(shown, str) or not shown.strip() or "\x00" in shown:
        raise ToolError("path must name a memory file, e.g. memory/MEMORY.md")
    root = Path(os.path.realpath(workspace))
    memory_dir = root / "memory"
    candidate = Path(shown)
    if not candidate.is_absolute() and len(candidate.parts) == 1:
        candidate = Path("memory") / candidate  # "MEMORY.md", "2026-11-02.md"
    refusal = ToolError(
        f"{shown!r} is not a memory file; memory_get reads memory/MEMORY.md, "
        "memory/HISTORY.md and memory/*.md"
    )
    try:
        resolved = confine(root, candidate)
    except PathOutsideRoot:
        raise refusal from None
    if resolved.parent != memory_dir or resolved.suffix != ".md" or resolved.name.startswith("."):
        raise refusal
    return resolved


def memory_tools(
    search: MemorySearch, shared: Mapping[str, MemorySearch] | None = None
) -> list[Tool[Any]]:
    """`shared`: other agents' memory searches, by agent name (read at each call)."""
    return [MemorySearchTool(search, shared or {}), MemoryGetTool()]
