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

log = logging.getLogger(__name__)

BUILTIN_SKILLS_DIR = Path(__file__).resolve().parent / "skills"
SKILL_FILE = "SKILL.md"


class SkillFormatError(ValueError):
    """A SKILL.md whose front matter cannot be used; the skill is skipped, not fatal."""


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


def parse_skill(path: Path, text: str) -> Skill:
    """Build a Skill from one SKILL.md's text; raises SkillFormatError on bad front matter."""
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
    missing = [
        f"bin: {b}" for b in _str_list(requires.get("bins"), "requires.bins") if not shutil.which(b)
    ]
    missing += [
        f"env: {e}" for e in _str_list(requires.get("env"), "requires.env") if not os.environ.get(e)
    ]
    return Skill(
        name=name.strip(),
        description=" ".join(description.split()),
        always=always,
        path=path,
        body=body,
        missing=tuple(missing),
    )


def _skills_in(directory: Path, read: Callable[[Path], str]) -> dict[str, Skill]:
    found: dict[str, Skill] = {}
    if not directory.is_dir():
        return found
    for folder in sorted(directory.iterdir()):
        path = folder / SKILL_FILE
        if not path.is_file():
            continue
        try:
            skill = parse_skill(path, read(path))
        except (SkillFormatError, OSError) as exc:
            log.warning("skipping skill %s: %s", path, exc)
            continue
        found[skill.name] = skill
    return found


def load_skills(
    workspace: Path,
    builtin_dir: Path | None = None,
    *,
    read: Callable[[Path], str] | None = None,
) -> list[Skill]:
    """Every skill, built-in and workspace, sorted by name; workspace skills win on a name clash.

    Blocking: call it through `asyncio.to_thread` from async code. `read` lets a caller
    supply a cached reader so unchanged SKILL.md files are not reread on every turn.
    """
    reader = read or _read_text
    skills = _skills_in(BUILTIN_SKILLS_DIR if builtin_dir is None else builtin_dir, reader)
    skills.update(_skills_in(workspace / "skills", reader))
    return [skills[name] for name in sorted(skills)]
