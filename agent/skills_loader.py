"""Skills: folders of instructions the model reads when a job calls for them.

A skill is `skills/<name>/SKILL.md`: YAML front matter between `---` lines, then a
Markdown body. Built-in skills ship in `agent/skills/`; a workspace skill of the same
name replaces the built-in one, so an owner can rewrite any of them.

    ---
    name: github
    description: Work with GitHub issues and pull requests.
    always: false
    requires: {bins: [gh], env: [GITHUB_TOKEN]}
    ---
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from clawgate.kernel.errors import SkillFormatError

log = logging.getLogger(__name__)

BUILTIN_SKILLS_DIR = Path(__file__).resolve().parent / "skills"
SKILL_FILE = "SKILL.md"


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    always: bool
    path: Path
    body: str
    missing: tuple[str, ...] = ()  # e.g. ("bin: ffmpeg", "env: GITHUB_TOKEN")

    @property
    def available(self) -> bool:
        return not self.missing


def _read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Return (front matter, body). A file without front matter is all body."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return {}, text.strip()
    closing = next((i for i, line in enumerate(lines[1:], start=1) if line.strip() == "---"), None)
    if closing is None:
        raise SkillFormatError("front matter has no closing '---'")
    try:
        meta = yaml.safe_load("".join(lines[1:closing])) or {}
    except yaml.YAMLError as exc:
        raise SkillFormatError(f"front matter is not valid YAML: {exc}") from None
    if not isinstance(meta, dict):
        raise SkillFormatError("front matter must be a mapping of keys to values")
    return meta, "".join(lines[closing + 1 :]).strip()


def _str_list(value: Any, key: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise SkillFormatError(f"'{key}' must be a list of strings")


@dataclass(frozen=True)
class _Declared:
    """What a SKILL.md says, checked; whether its requirements are met is looked up apart,
    since a binary or a variable can appear while the file stays the same."""

    name: str
    description: str
    always: bool
    body: str
    bins: tuple[str, ...]
    env: tuple[str, ...]


def _declared(path: Path, text: str) -> _Declared:
    meta, body = split_front_matter(text)
    name = meta.get("name", path.parent.name)
    description = meta.get("description", "")
    always = meta.get("always", False)
    requires = meta.get("requires") or {}
    if not isinstance(name, str) or not name.strip():
        raise SkillFormatError("'name' must be a non-empty string")
    if not isinstance(description, str):
        raise SkillFormatError("'description' must be a string")
    if not isinstance(always, bool):
        raise SkillFormatError("'always' must be true or false")
    if not isinstance(requires, dict):
        raise SkillFormatError("'requires' must be a mapping with 'bins' and/or 'env'")
    return _Declared(
        name=name.strip(),
        description=" ".join(description.split()),
        always=always,
        body=body,
        bins=tuple(_str_list(requires.get("bins"), "requires.bins")),
        env=tuple(_str_list(requires.get("env"), "requires.env")),
    )


def _skill(path: Path, declared: _Declared) -> Skill:
    missing = [f"bin: {b}" for b in declared.bins if not shutil.which(b)]
    missing += [f"env: {e}" for e in declared.env if not os.environ.get(e)]
    return Skill(
        name=declared.name,
        description=declared.description,
        always=declared.always,
        path=path,
        body=declared.body,
        missing=tuple(missing),
    )


def parse_skill(path: Path, text: str) -> Skill:
    """Build a Skill from one SKILL.md's text; raises SkillFormatError on bad front matter."""
    return _skill(path, _declared(path, text))


class SkillReader:
    """Reads a SKILL.md into a Skill, parsing its text again only when the file's
    (mtime_ns, size) changes: the YAML parse is most of the cost of a turn's prompt.

    Used from worker threads; a race between two turns at worst parses a file twice.
    """

    def __init__(self) -> None:
        self._entries: dict[Path, tuple[int, int, _Declared | str]] = {}

    def __call__(self, path: Path) -> Skill:
        stat = path.stat()
        cached = self._entries.get(path)
        if cached and cached[0] == stat.st_mtime_ns and cached[1] == stat.st_size:
            declared = cached[2]
        else:
            try:
                declared = _declared(path, _read_text(path))
            except SkillFormatError as exc:
                declared = str(exc)  # the message, raised afresh each turn as before
            self._entries[path] = (stat.st_mtime_ns, stat.st_size, declared)
        if isinstance(declared, str):
            raise SkillFormatError(declared)
        return _skill(path, declared)

    def broken(self, path: Path) -> bool:
        """The SKILL.md at `path` was skipped when last read (bad front matter, unreadable)."""
        cached = self._entries.get(path)
        return cached is None or isinstance(cached[2], str)

    def recheck(self, skill: Skill) -> Skill:
        """`skill` from its unchanged file, its requirements looked up again."""
        cached = self._entries.get(skill.path)
        if cached is None or isinstance(cached[2], str):
            return skill
        return _skill(skill.path, cached[2])


def _skills_in(directory: Path, parse: Callable[[Path], Skill]) -> dict[str, Skill]:
    found: dict[str, Skill] = {}
    if not directory.is_dir():
        return found
    for folder in sorted(directory.iterdir()):
        path = folder / SKILL_FILE
        if not path.is_file():
            continue
        try:
            skill = parse(path)
        except (SkillFormatError, OSError) as exc:
            log.warning("skipping skill %s: %s", path, exc)
            continue
        found[skill.name] = skill
    return found


def load_skills(
    workspace: Path,
    builtin_dir: Path | None = None,
    *,
    parse: Callable[[Path], Skill] | None = None,
) -> list[Skill]:
    """Every skill, built-in and workspace, sorted by name; workspace skills win on a name clash.

    Blocking: call it through `asyncio.to_thread` from async code. `parse` lets a caller
    supply a `SkillReader`, so unchanged SKILL.md files are not parsed again on every turn.
    """
    reader = parse or (lambda path: parse_skill(path, _read_text(path)))
    skills = _skills_in(BUILTIN_SKILLS_DIR if builtin_dir is None else builtin_dir, reader)
    skills.update(_skills_in(workspace / "skills", reader))
    return [skills[name] for name in sorted(skills)]
