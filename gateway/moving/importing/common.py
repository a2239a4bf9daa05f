"""What both importers do alike: files copied as they are, folders of skills, the bootstrap
files, a cron job built from its parts, and JSON read without trusting it."""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from clawgate.gateway.cron.models import CronJob, Schedule
from clawgate.gateway.moving.importing.plan import FileItem, Haul
from clawgate.kernel.errors import describe_validation

# The bootstrap files clawgate reads (agent/context.py) and the gateway's HEARTBEAT.md.
BOOTSTRAP = ("AGENTS.md", "SOUL.md", "USER.md", "TOOLS.md", "HEARTBEAT.md")
_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_-]")


def add_file(haul: Haul, source: Path, target: str, what: str) -> None:
    if source.is_file() and not source.is_symlink():
        haul.files.append(FileItem(target, source.read_bytes(), source, what))


def add_bootstrap(haul: Haul, workspace: Path) -> None:
    for name in BOOTSTRAP:
        add_file(haul, workspace / name, name, "bootstrap file")


def add_skills(haul: Haul, workspace: Path) -> None:
    """Every file of every `skills/<name>/` folder that has a SKILL.md (the same layout)."""
    skills = workspace / "skills"
    for skill in sorted(skills.iterdir()) if skills.is_dir() else []:
        if not (skill / "SKILL.md").is_file():
            continue
        for folder, dirs, files in os.walk(skill):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                path = Path(folder) / name
                relative = path.relative_to(workspace).as_posix()
                add_file(haul, path, relative, f"skill {skill.name}")


def read_json(path: Path, haul: Haul) -> Any:
    """The JSON at `path`, or None (and a line in the report) when it does not parse."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        haul.skipped.append(f"{path}: not readable JSON ({exc})")
        return None


def from_ms(value: Any) -> datetime | None:
    return datetime.fromtimestamp(value / 1000, UTC) if isinstance(value, int | float) else None


def make_job(
    haul: Haul,
    their_id: str,
    name: str,
    schedule: dict[str, Any],
    *,
    timezone: str | None,
    message: str,
    deliver_to: str | None,
    enabled: bool,
    created: datetime | None,
) -> None:
    """Add the job to the haul, or a line saying why it cannot come over."""
    label = f"cron job {name or their_id!r}"
    if not deliver_to:
        haul.skipped.append(f"{label}: no chat to deliver to; add it with `clawgate cron add`")
        return
    try:
        job = CronJob(
            id=f"{haul.source}-{_UNSAFE_ID.sub('-', their_id)}"[:64],
            name=name or their_id,
            schedule=Schedule.model_validate(schedule),
            timezone=timezone,
            message=message,
            deliver_to=deliver_to,
            enabled=enabled,
            created_at=created or datetime(1970, 1, 1, tzinfo=UTC),
        )
    except ValidationError as exc:
        haul.skipped.append(f"{label}: {describe_validation(exc)}")
        return
    haul.jobs.append(job)
