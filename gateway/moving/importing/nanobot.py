"""nanobot's files, as its public repository writes them (HKUDS/nanobot):

    ~/.nanobot/workspace/            AGENTS.md SOUL.md USER.md TOOLS.md HEARTBEAT.md
        memory/MEMORY.md             long-term facts
        memory/HISTORY.md            older releases: "[YYYY-MM-DD HH:MM] ..." paragraphs
        memory/history.jsonl         newer: {"cursor": n, "timestamp": "...", "content": "..."}
        skills/<name>/SKILL.md
        sessions/<key>.jsonl         older releases; newer ones under ~/.nanobot/sessions/
    ~/.nanobot/cron/jobs.json        {"version": 1, "jobs": [{"id", "name", "enabled",
                                     "schedule": {"kind": "at"|"every"|"cron", "atMs",
                                     "everyMs", "expr", "tz"}, "payload": {"message",
                                     "channel", "to", ...}, "createdAtMs", ...}]}

A transcript starts with {"_type": "metadata", "key": "telegram:123", ...}; each further
line is a message {"role", "content", "timestamp", tool_calls...}. User and assistant text
comes over; tool calls and results stay behind (counted in the report).

PATH is the nanobot home (holding `workspace/`) or a workspace itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clawgate.agent.memory.entries import split_entries
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

SOURCE = "nanobot"


def read_nanobot(path: Path) -> Haul:
    haul = Haul(SOURCE)
    home = path if (path / "workspace").is_dir() else None
    workspace = path / "workspace" if home else path
    add_bootstrap(haul, workspace)
    add_file(haul, workspace / "memory" / "MEMORY.md", "memory/MEMORY.md", "long-term memory")
    _history(haul, workspace / "memory")
    add_skills(haul, workspace)
    folders = [workspace / "sessions"] + ([home / "sessions"] if home else [])
    for folder in folders:
        for session in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
            _transcript(haul, session)
    for jobs in [workspace / "cron" / "jobs.json"] + (
        [home / "cron" / "jobs.json"] if home else []
    ):
        if jobs.is_file():
            _jobs(haul, jobs)
    return haul


def _history(haul: Haul, memory: Path) -> None:
    legacy = memory / "HISTORY.md"
    if legacy.is_file():
        haul.history += split_entries(legacy.read_text(encoding="utf-8"))
    jsonl = memory / "history.jsonl"
    for line in jsonl.read_text(encoding="utf-8").splitlines() if jsonl.is_file() else []:
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a torn last line
        content = str(record.get("content") or "").strip()
        stamp = str(record.get("timestamp") or "").replace("T", " ")[:16]
        if content and len(stamp) == 16:
            haul.history.append(f"[{stamp}] {content}")


def _transcript(haul: Haul, path: Path) -> None:
    key, turns, left = path.stem, [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            data: dict[str, Any] = json.loads(line)
        except ValueError:
            continue
        if data.get("_type") == "metadata":
            key = str(data.get("key") or key)
            continue
        if data.get("_type"):
            continue  # provider state and other bookkeeping lines
        role, content = data.get("role"), data.get("content")
        if role in ("user", "assistant") and isinstance(content, str) and content.strip():
            turns.append(Turn(role, content, data.get("timestamp")))
        else:
            left += 1
    clawgate_key, target = transcript_name(SOURCE, key)
    what = f"transcript {key}: {len(turns)} messages" + (
        f", {left} tool steps left out" if left else ""
    )
    haul.files.append(FileItem(target, transcript_bytes(SOURCE, clawgate_key, turns), path, what))


def _jobs(haul: Haul, path: Path) -> None:
    data = read_json(path, haul)
    for job in data.get("jobs", []) if isinstance(data, dict) else []:
        schedule, payload = job.get("schedule") or {}, job.get("payload") or {}
        kind = schedule.get("kind")
        if kind == "at":
            when: dict[str, Any] = {"at": from_ms(schedule.get("atMs"))}
        elif kind == "every":
            when = {"every": max(1, int(schedule.get("everyMs") or 0) // 1000)}
        else:
            when = {"cron": schedule.get("expr")}
        channel, to = payload.get("channel"), payload.get("to")
        make_job(
            haul,
            str(job.get("id") or job.get("name") or "job"),
            str(job.get("name") or ""),
            when,
            timezone=schedule.get("tz"),
            message=str(payload.get("message") or ""),
            deliver_to=f"{channel}:{to}" if channel and to else None,
            enabled=bool(job.get("enabled", True)),
            created=from_ms(job.get("createdAtMs")),
        )
