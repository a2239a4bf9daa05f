"""`clawgate cron run ID` while a gateway runs: the job must run in the gateway (it owns
the scheduler, the channels and state.json), so the CLI leaves a request file in
`cron/requests/` and waits for the result file the gateway writes next to it.

    <uuid>.request.json   {"job_id": "..."}          written by the CLI
    <uuid>.result.json    {"ok", "text", "error"}    written by the gateway
"""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path

from clawgate.gateway.cron.models import RunResult
from clawgate.gateway.cron.store import CronStore

log = logging.getLogger(__name__)

REQUEST_SUFFIX = ".request.json"
RESULT_SUFFIX = ".result.json"


def request_run(store: CronStore, job_id: str) -> Path:
    """Ask the running gateway to run a job now; returns the path its result will have."""
    store.writer.mkdir(store.requests_dir)
    name = uuid.uuid4().hex
    store.writer.replace(
        store.requests_dir / f"{name}{REQUEST_SUFFIX}", json.dumps({"job_id": job_id}), mode=0o600
    )
    return store.requests_dir / f"{name}{RESULT_SUFFIX}"


def take_requests(store: CronStore) -> list[tuple[str, Path]]:
    """The pending requests as (job id, result path), each request file removed as it is
    taken; an unreadable one is logged and dropped. Blocking (a few small files)."""
    directory = store.requests_dir
    if not directory.is_dir():
        return []
    taken = []
    for path in sorted(directory.glob(f"*{REQUEST_SUFFIX}")):
        try:
            job_id = str(json.loads(path.read_text(encoding="utf-8"))["job_id"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("cron: ignoring unreadable run request %s: %s", path.name, exc)
            path.unlink(missing_ok=True)
            continue
        path.unlink(missing_ok=True)
        taken.append((job_id, directory / path.name.replace(REQUEST_SUFFIX, RESULT_SUFFIX)))
    return taken


def answer_request(store: CronStore, result_path: Path, result: RunResult) -> None:
    """Write the result file the waiting CLI reads (atomically: it never sees half)."""
    payload = {"ok": result.ok, "text": result.text, "error": result.error}
    store.writer.replace(result_path, json.dumps(payload), mode=0o600)
