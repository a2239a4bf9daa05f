"""The system prompt: who the assistant is, what it may see, and what it knows.

Parts, in order: identity; the bootstrap files AGENTS.md, SOUL.md, USER.md, TOOLS.md;
for the owner only, memory/MEMORY.md and any extra parts (daily logs, recalled
snippets); then skills. USER.md and memory hold facts about the owner, so group and
`allowed` sessions never get them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from clawgate.agent.skills_loader import Skill, SkillReader, load_skills
from clawgate.kernel.bus import Trust

log = logging.getLogger(__name__)

SHARED_FILES = ("AGENTS.md", "SOUL.md", "TOOLS.md")
OWNER_ONLY_FILES = ("USER.md",)
BOOTSTRAP_FILES = ("AGENTS.md", "SOUL.md", "USER.md", "TOOLS.md")
MEMORY_FILE = Path("memory") / "MEMORY.md"


@dataclass(frozen=True)
class PromptPart:
    name: str  # e.g. "identity", "AGENTS.md", "memory", "skills"
    text: str


ExtraPart = Callable[[Trust, str], Awaitable[PromptPart | None]]


class _FileCache:
    """File texts keyed by (mtime_ns, size), so a turn only rereads files that changed.

    Used from worker threads; a race between two turns at worst reads a file twice.
    """

    def __init__(self) -> None:
        self._entries: dict[Path, tuple[int, int, str]] = {}

    def read(self, path: Path) -> str:
        stat = path.stat()
        cached = self._entries.get(path)
        if cached and cached[0] == stat.st_mtime_ns and cached[1] == stat.st_size:
            return cached[2]
        text = path.read_text(encoding="utf-8", errors="replace")
        self._entries[path] = (stat.st_mtime_ns, stat.st_size, text)
        return text

    def read_optional(self, path: Path) -> str | None:
        try:
            return self.read(path)
        except FileNotFoundError:
            self._entries.pop(path, None)
            return None


@dataclass(frozen=True)
class _Snapshot:
    """Everything read from disk for one prompt, gathered in a single worker thread."""

    files: dict[str, str]
    skills: list[Skill]


class ContextBuilder:
    def __init__(
        self,
        workspace: Path,
        *,
        timezone: str = "UTC",
        file_cap_chars: int = 12_000,
        builtin_skills_dir: Path | None = None,
        extra_parts: Sequence[ExtraPart] = (),
    ) -> None:
        self.workspace = workspace
        self.zone = ZoneInfo(timezone)
        self.file_cap_chars = file_cap_chars
        self.builtin_skills_dir = builtin_skills_dir
        self.extra_parts = tuple(extra_parts)
        self._cache = _FileCache()
        self._skills = SkillReader()

    async def system_prompt_parts(
        self, *, trust: Trust, session_key: str, now: datetime, incoming_text: str = ""
    ) -> list[PromptPart]:
        owner = trust.is_owner
        snapshot = await asyncio.to_thread(self._read_snapshot, owner)
        parts = [PromptPart("identity", self._identity(trust, session_key, now))]
        for name in BOOTSTRAP_FILES:
            if name in snapshot.files:
                parts.append(PromptPart(name, snapshot.files[name]))
        if owner:
            if "memory" in snapshot.files:
                parts.append(PromptPart("memory", snapshot.files["memory"]))
            parts.extend(await self._extra_parts(trust, incoming_text))
        skills = self._skills_text(snapshot.skills, owner)
        if skills:
            parts.append(PromptPart("skills", skills))
        return parts

    async def system_prompt(
        self, *, trust: Trust, session_key: str, now: datetime, incoming_text: str = ""
    ) -> str:
        parts = await self.system_prompt_parts(
            trust=trust, session_key=session_key, now=now, incoming_text=incoming_text
        )
        return "\n\n".join(f"## {part.name}\n\n{part.text}" for part in parts)

    def build_messages(self, system_prompt: str, history: list[dict]) -> list[dict]:
        return [{"role": "system", "content": system_prompt}, *history]

    def _read_snapshot(self, owner: bool) -> _Snapshot:
        names = SHARED_FILES + OWNER_ONLY_FILES if owner else SHARED_FILES
        files: dict[str, str] = {}
        for name in names:
            text = self._read_capped(self.workspace / name)
            if text:
                files[name] = text
        if owner:
            text = self._read_capped(self.workspace / MEMORY_FILE)
            if text:
                files["memory"] = text
        skills = load_skills(self.workspace, self.builtin_skills_dir, parse=self._skills)
        return _Snapshot(files=files, skills=skills)

    def _read_capped(self, path: Path) -> str | None:
        try:
            text = self._cache.read_optional(path)
        except OSError as exc:
            # An unreadable file should cost the model one file, not the whole turn.
            log.warning("cannot read %s: %s", path, exc)
            return None
        if text is None or not text.strip():
            return None
        text = text.strip()
        if len(text) > self.file_cap_chars:
            text = (
                text[: self.file_cap_chars].rstrip()
                + f"\n\n[truncated: showing {self.file_cap_chars} of {len(text)} characters]"
            )
        return text

    async def _extra_parts(self, trust: Trust, incoming_text: str) -> list[PromptPart]:
        results = await asyncio.gather(
            *(make(trust, incoming_text) for make in self.extra_parts), return_exceptions=True
        )
        parts: list[PromptPart] = []
        for make, result in zip(self.extra_parts, results, strict=True):
            if isinstance(result, Exception):
                # Recall is a nicety: a broken index must not stop the assistant answering.
                log.warning("prompt part %r failed: %s", make, result, exc_info=result)
            elif isinstance(result, BaseException):
                raise result
            elif result is not None and result.text.strip():
                parts.append(result)
        return parts

    def _identity(self, trust: Trust, session_key: str, now: datetime) -> str:
        if now.tzinfo is None:
            now = now.replace(tzinfo=UTC)
        local = now.astimezone(self.zone)
        lines = [
            "You are the user's personal assistant, running in clawgate, a self-hosted gateway.",
            f"Current date and time: {local:%Y-%m-%d %H:%M} ({local:%A}), time zone {self.zone.key}.",
            f"Session: {session_key} (trust: {trust.value}).",
        ]
        if trust is Trust.OWNER:
            lines.insert(2, f"Workspace: {self.workspace}")
            lines.append("You are talking privately with the owner.")
        else:
            who = (
                "a group chat"
                if trust is Trust.GROUP
                else "a shared chat with a guest, not the owner"
            )
            # Relative: the absolute path tells a shared chat the owner's user name and layout.
            lines.append(
                f"This is {who}. The owner's private memory is unavailable here and must never "
                "be revealed; file tools are limited to the shared folder of this chat; give "
                "them paths relative to it. Files the owner shares with every chat are under "
                "shared/ (read-only)."
            )
        return "\n".join(lines)

    def _skills_text(self, skills: list[Skill], owner: bool) -> str:
        if not skills:
            return ""
        sections: list[str] = []
        listed: list[Skill] = []
        for skill in skills:
            # Skill bodies are owner-written instructions; shared chats get names only.
            if owner and skill.always and skill.available and skill.body:
                sections.append(f"### {skill.name}\n\n{skill.body}")
            else:
                listed.append(skill)
        if listed:
            intro = (
                "Other skills: read a skill's SKILL.md with read_file before using it."
                if owner
                else "Skills the owner has installed:"
            )
            lines = [intro]
            for skill in listed:
                line = f"- {skill.name}: {skill.description or '(no description)'}"
                if skill.missing:
                    line += f" (unavailable: missing {', '.join(skill.missing)})"
                if owner:
                    line += f" [{self._display_path(skill.path)}]"
                lines.append(line)
            sections.append("\n".join(lines))
        return "\n\n".join(sections)

    def _display_path(self, path: Path) -> str:
        # Workspace paths are shown relative, the way the file tools take them.
        try:
            return str(path.relative_to(self.workspace))
        except ValueError:
            return str(path)
