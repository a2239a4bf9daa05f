"""OpenClaw's files, as its public repository writes them (openclaw/openclaw):

    ~/.openclaw/workspace/           AGENTS.md SOUL.md USER.md TOOLS.md HEARTBEAT.md
                                     IDENTITY.md BOOTSTRAP.md, and MEMORY.md at the top
        memory/YYYY-MM-DD.md         daily logs
        skills/<name>/SKILL.md
    ~/.openclaw/agents/<agentId>/sessions/
        sessions.json                {"<session key>": {"sessionId": "...", ...}}
        <sessionId>.jsonl            {"type": "session", "version", "id", "timestamp", "cwd"},
                                     then {"type": "message", "timestamp", "message": {"role":
                                     "user"|"assistant"|"toolResult", "content": [{"type":
                                     "text", "text"}, {"type": "toolCall"}, ...] or a string}}
    ~/.openclaw/cron/jobs.json       {"version": 1, "jobs": [{"id", "agentId", "name",
                                     "enabled", "createdAtMs", "schedule": {"kind": "at", "at"}
                                     | {"kind": "every", "everyMs"} | {"kind": "cron", "expr",
                                     "tz"}, "payload": {"kind": "agentTurn", "message"} |
                                     {"kind": "systemEvent", "text"}, "delivery": {"mode",
                                     "channel", "to"}}]}

MEMORY.md goes to memory/MEMORY.md; IDENTITY.md and BOOTSTRAP.md have no clawgate
counterpart and are reported. User and assistant text comes over; thinking, tool calls and
tool results stay behind (counted in the report). Other model and event lines are skipped.

PATH is the OpenClaw home (holding `workspace/`) or a workspace itself."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from clawgate.gateway.moving.importing.common import (
    add_bootstrap,
    add_file,
    add_skills,
    from_ms,
    make_job,
    read_json,
)
from clawgate.gateway.moving.importing.plan import FileItem, Haul
from clawgate.gateway.moving.importing.transcripts import Turn, transcript_bytes, transcript_name

SOURCE = "openclaw"
DAILY_LOG = re.compile(r"\d{4}-\d{2}-\d{2}\.md")
NO_COUNTERPART = ("IDENTITY.md", "BOOTSTRAP.md")


def read_openclaw(path: Path) -> Haul:
    haul = Haul(SOURCE)
    home = path if (path / "workspace").is_dir() else None
    workspace = path / "workspace" if home else path
    add_bootstrap(haul, workspace)
    add_file(haul, workspace / "MEMORY.md", "memory/MEMORY.md", "long-term memory")
    memory = workspace / "memory"
    for log in sorted(memory.glob("*.md")) if memory.is_dir() else []:
        if DAILY_LOG.fullmatch(log.name):
            add_file(haul, log, f"memory/{log.name}", "daily log")
        else:
            haul.skipped.append(f"{log}: not a daily log; copy it into memory/ by hand if wanted")
    for name in NO_COUNTERPART:
        if (workspace / name).is_file():
            haul.skipped.append(
                f"{workspace / name}: clawgate has no {name}; merge it into SOUL.md"
            )
    add_skills(haul, workspace)
    if home is not None:
        for sessions in sorted((home / "agents").glob("*/sessions")):
            _sessions(haul, sessions)
        if (home / "cron" / "jobs.json").is_file():
            _jobs(haul, home / "cron" / "jobs.json")
    return haul


def _sessions(haul: Haul, folder: Path) -> None:
    index = (
        read_json(folder / "sessions.json", haul) if (folder / "sessions.json").is_file() else {}
    )
    keys = {
        str(entry["sessionId"]): str(key)
        for key, entry in (index.items() if isinstance(index, dict) else [])
        if isinstance(entry, dict) and entry.get("sessionId")
    }
    for path in sorted(folder.glob("*.jsonl")):
        _transcript(haul, path, keys.get(path.stem, f"{folder.parent.name}:{path.stem}"))


def _transcript(haul: Haul, path: Path, key: str) -> None:
    turns, left = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            data: dict[str, Any] = json.loads(line)
        except ValueError:
            continue
        if data.get("type") != "message" or not isinstance(data.get("message"), dict):
            continue
        message = data["message"]
        role, content = message.get("role"), _text(message.get("content"))
        if role in ("user", "assistant") and content:
            turns.append(Turn(role, content, data.get("timestamp")))
        else:
            left += 1
    clawgate_key, target = transcript_name(SOURCE, key)
    what = f"transcript {key}: {len(turns)} messages" + (
        f", {left} tool steps left out" if left else ""
    )
    haul.files.append(FileItem(target, transcript_bytes(SOURCE, clawgate_key, turns), path, what))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content.strip()
    parts = content if isinstance(content, list) else []
    texts = [p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "text"]
    return "\n\n".join(t for t in texts if t).strip()


def _jobs(haul: Haul, path: Path) -> None:
    data = read_json(path, haul)
    for job in data.get("jobs", []) if isinstance(data, dict) else []:
        schedule, payload = job.get("schedule") or {}, job.get("payload") or {}
        delivery = job.get("delivery") or {}
        kind = schedule.get("kind")
        if kind == "at":
            when: dict[str, Any] = {"at": schedule.get("at")}
        elif kind == "every":
            when = {"every": max(1, int(schedule.get("everyMs") or 0) // 1000)}
        else:
            when = {"cron": schedule.get("expr")}
        channel = delivery.get("channel") or payload.get("channel")
        to = delivery.get("to") or payload.get("to")
        make_job(
            haul,
            str(job.get("id") or job.get("name") or "job"),
            str(job.get("name") or ""),
            when,
            timezone=schedule.get("tz"),
            message=str(payload.get("message") or payload.get("text") or ""),
            deliver_to=f"{channel}:{to}" if channel and to and channel != "last" else None,
            enabled=bool(job.get("enabled", True)),
            created=from_ms(job.get("createdAtMs")),
        )
