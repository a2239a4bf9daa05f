"""The system prompt: who the assistant is, what it may see, and what it knows.

Parts, in order: identity; the bootstrap files AGENTS.md, SOUL.md, USER.md, TOOLS.md;
for the owner only, memory/MEMORY.md and any extra parts (daily logs, recalled
snippets); then skills. USER.md and memory hold facts about the owner, so group and
`allowed` sessions never get them.

The identity part gives the time in `agent.timezone`, the session key and trust, and the
workspace path to owners only (a shared chat is told its file tools are limited to its own
folder). Each bootstrap file is capped at 12,000 characters. What a turn reads is kept as a
snapshot per kind of chat (owner or not) and reused while a re-stat of the files and skill
folders it read still matches: a dozen `stat` calls instead of a thread hop and the reads.
Skills: `always` ones in full, the others as name and description (and what they are
missing); shared chats get skill names only.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from clawgate.agent.skills_loader import (
    BUILTIN_SKILLS_DIR,
    SKILL_FILE,
    Skill,
    SkillReader,
    load_skills,
)
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
    """Everything read from disk for one prompt, gathered in a single worker thread.

    `watched` is every path it depended on (files, and the skill folders whose listing it
    used), `stamp` their stats taken before reading: while a fresh stamp equals it, the
    snapshot still holds and the turn skips the worker thread and the reads.
    """

    files: dict[str, str]
    skills: list[Skill]
    watched: tuple[str, ...] = ()
    stamp: tuple[tuple[int, int, int] | None, ...] = ()


def _stamp(paths: tuple[str, ...]) -> tuple[tuple[int, int, int] | None, ...]:
    # A folder's mtime moves when an entry is added, removed or renamed in it; a file's
    # (mtime, size, inode) when it is written or replaced.
    stamps: list[tuple[int, int, int] | None] = []
    for path in paths:
        try:
            stat = os.stat(path)
        except OSError:
            stamps.append(None)
        else:
            stamps.append((stat.st_mtime_ns, stat.st_size, stat.st_ino))
    return tuple(stamps)


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
        self._snapshots: dict[bool, _Snapshot] = {}  # by owner: what each kind of chat sees

    async def system_prompt_parts(
        self, *, trust: Trust, session_key: str, now: datetime, incoming_text: str = ""
    ) -> list[PromptPart]:
        owner = trust.is_owner
        snapshot = await self._snapshot(owner)
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

    async def _snapshot(self, owner: bool) -> _Snapshot:
        cached = self._snapshots.get(owner)
        # A dozen stat calls: cheaper on the loop than one hop to a worker thread.
        if cached is not None and _stamp(cached.watched) == cached.stamp:
            # A binary or variable a skill requires can appear while its file stays the same.
            return _Snapshot(cached.files, [self._skills.recheck(s) for s in cached.skills])
        snapshot = await asyncio.to_thread(self._read_snapshot, owner)
        self._snapshots[owner] = snapshot
        return snapshot

    def _read_snapshot(self, owner: bool) -> _Snapshot:
        names = SHARED_FILES + OWNER_ONLY_FILES if owner else SHARED_FILES
        paths = [self.workspace / name for name in names]
        if owner:
            paths.append(self.workspace / MEMORY_FILE)
        watched = [str(path) for path in paths]
        for root in (self.builtin_skills_dir or BUILTIN_SKILLS_DIR, self.workspace / "skills"):
            watched.append(str(root))
            try:
                folders = sorted(entry.path for entry in os.scandir(root) if entry.is_dir())
            except OSError:
                continue
            for folder in folders:
                watched += [folder, os.path.join(folder, SKILL_FILE)]
        stamp = _stamp(tuple(watched))  # before reading: a change while reading shows next turn
        files: dict[str, str] = {}
        for name, path in zip(names, paths, strict=False):
            text = self._read_capped(path)
            if text:
                files[name] = text
        if owner:
            text = self._read_capped(self.workspace / MEMORY_FILE)
            if text:
                files["memory"] = text
        skills = load_skills(self.workspace, self.builtin_skills_dir, parse=self._skills)
        skipped = any(
            self._skills.broken(Path(path))
            for path, seen in zip(watched, stamp, strict=True)
            if seen is not None and path.endswith(os.sep + SKILL_FILE)
        )
        if skipped:
            stamp = ()  # never matches: a skipped skill is reported on every turn, as before
        return _Snapshot(files=files, skills=skills, watched=tuple(watched), stamp=stamp)

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
        # One after another: each is quick (recall is one hop to the index's thread, the
        # logs are a small file), and a task per part cost more than the parts themselves.
        parts: list[PromptPart] = []
        for make in self.extra_parts:
            try:
                result = await make(trust, incoming_text)
            except Exception as exc:
                # Recall is a nicety: a broken index must not stop the assistant answering.
                log.warning("prompt part %r failed: %s", make, exc, exc_info=exc)
                continue
            if result is not None and result.text.strip():
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
