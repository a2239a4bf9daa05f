"""What `clawgate status` shows: the running gateway's own report plus disk use.

The daemon rewrites `<data_dir>/status.json` every few seconds (atomically); the CLI reads it
and checks that the pid in it is still alive, so a stale file from a crash says so.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clawgate.kernel.secrets import Redactor
from clawgate.kernel.storage import DiskWriter

log = logging.getLogger(__name__)

STATUS_FILE = "status.json"
WRITE_EVERY_SECONDS = 5.0


def disk_usage(workspace: Path) -> dict[str, int]:
    """Bytes used by the folders that grow: sessions, archives, media, memory versions."""
    folders = {
        "sessions": workspace / "sessions",
        "sessions/archive": workspace / "sessions" / "archive",
        "media": workspace / "media",
        "public/media": workspace / "public" / "media",
        "memory": workspace / "memory",
        "memory/.versions": workspace / "memory" / ".versions",
    }
    usage = {}
    for name, folder in folders.items():
        total = 0
        if folder.exists():
            for path in folder.rglob("*"):
                try:
                    if path.is_file():
                        total += path.stat().st_size
                except OSError:
                    continue
        usage[name] = total
    return usage


class StatusWriter:
    """Owned by the Gateway: writes the report until cancelled."""

    def __init__(
        self,
        data_dir: Path,
        report: Callable[[], dict[str, Any]],
        redact: Redactor | None = None,
    ) -> None:
        self.path = data_dir / STATUS_FILE
        self._redact = redact or Redactor()
        self._report = report
        self._writer = DiskWriter()
        self._started = time.time()

    def write_once(self) -> None:
        body = {"pid": os.getpid(), "started_at": self._started, "updated_at": time.time()}
        body.update(self._redact.data(self._report()))
        self._writer.mkdir(self.path.parent)
        self._writer.replace(self.path, json.dumps(body, indent=2, default=str), mode=0o600)

    async def run(self) -> None:
        while True:
            try:
                await asyncio.to_thread(self.write_once)
            except OSError as exc:
                # The report is advisory: a full disk must not take the gateway's other tasks
                # (one TaskGroup) down with it. The next tick tries again.
                log.warning("cannot write %s: %s", self.path, exc)
            await asyncio.sleep(WRITE_EVERY_SECONDS)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def read_status(data_dir: Path) -> dict[str, Any] | None:
    """The last report, with `running` telling whether its process is still alive."""
    try:
        body = json.loads((data_dir / STATUS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    try:
        pid = int(body.get("pid", 0))
        # pid 0 would signal our own process group and look alive.
        if pid <= 0:
            raise ValueError(pid)
        os.kill(pid, 0)
        body["running"] = True
    except (OSError, ValueError, TypeError):
        body["running"] = False
    return body
