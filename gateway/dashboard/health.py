"""The health page: `clawgate doctor`'s findings, a live tail of the log file, token usage per
day and per session, version, uptime, the channels and the MCP servers; on a cluster worker
the cluster as its database sees it (what `clawgate cluster status` prints), read at each load.

Doctor is `gateway/ops/online.py` `doctor_report`, the function the CLI runs. The log tail
reads `<data_dir>/logs/clawgate.log` (the file `setup_logging` writes) and passes every line
through the runtime's `Redactor` once more, so a secret written before it was configured
never reaches the browser. Usage comes from the loop's `TurnUsage` (since the gateway
started; it is not kept on disk).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from clawgate.gateway.dashboard.people import channel_rows, config_path
from clawgate.gateway.dashboard.render import render, services
from clawgate.gateway.ops.logs import log_file_path
from clawgate.gateway.ops.online import doctor_report
from clawgate.kernel.secrets import Redactor

if TYPE_CHECKING:
    from clawgate.gateway.cluster.status import ClusterStatus

# A database that does not answer in this time is shown as such, not waited for.
CLUSTER_READ_SECONDS = 5.0

# The first look at the log shows its end, not a possibly huge file from the start.
FIRST_TAIL_BYTES = 64 * 1024
MAX_READ_BYTES = 256 * 1024


@dataclass(frozen=True)
class Tail:
    lines: list[str]
    offset: int  # where the next read starts: the end of the last complete line read


def read_tail(path: Path, offset: int | None, redact: Redactor) -> Tail:
    """Complete lines of the log after `offset` (None: the last FIRST_TAIL_BYTES), redacted.
    A file shorter than `offset` was rotated: reading starts over. Blocking."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, 2)
            if offset is None:
                start = max(0, size - FIRST_TAIL_BYTES)
            else:
                start = offset if 0 <= offset <= size else 0
            handle.seek(start)
            chunk = handle.read(MAX_READ_BYTES)
    except FileNotFoundError:
        return Tail([], 0)
    if offset is None and start > 0:
        # Started mid-line: drop the fragment.
        cut = chunk.find(b"\n") + 1
        chunk, start = chunk[cut:], start + cut
    end = chunk.rfind(b"\n") + 1  # a line still being written waits for the next poll
    text = chunk[:end].decode("utf-8", errors="replace")
    return Tail([redact(line) for line in text.splitlines()], start + end)


@dataclass(frozen=True)
class UsageRow:
    key: str  # a day (YYYY-MM-DD) or a session key
    prompt: int
    completion: int
    total: int


def usage_tables(request: web.Request) -> tuple[list[UsageRow], list[UsageRow]]:
    """Tokens per day (newest first) and per session (biggest first)."""
    days: dict[str, list[int]] = {}
    sessions: dict[str, list[int]] = {}
    for (day, session), counts in services(request).runtime.loop.usage.totals().items():
        values = (
            counts["prompt_tokens"],
            counts["completion_tokens"],
            counts["total_tokens"],
        )
        for table, key in ((days, day.isoformat()), (sessions, session)):
            row = table.setdefault(key, [0, 0, 0])
            for index, value in enumerate(values):
                row[index] += value
    by_day = [UsageRow(k, *v) for k, v in sorted(days.items(), reverse=True)]
    by_session = sorted(
        (UsageRow(k, *v) for k, v in sessions.items()), key=lambda r: (-r.total, r.key)
    )
    return by_day, by_session


def version() -> str:
    try:
        return importlib.metadata.version("clawgate")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def uptime(seconds: float) -> str:
    minutes = int(seconds // 60)
    days, minutes = divmod(minutes, 24 * 60)
    hours, minutes = divmod(minutes, 60)
    return f"{days} d {hours} h {minutes} min" if days else f"{hours} h {minutes} min"


async def health_page(request: web.Request) -> web.Response:
    """The page; under /health/doctor with `clawgate doctor`'s findings (on demand: the
    checks walk the workspace and probe it with a write), `?online=1` as `--online`."""
    svc = services(request)
    findings: list[tuple[str, str]] | None = None
    problems = 0
    if request.path == "/health/doctor":
        online = request.query.get("online") == "1"
        report = await doctor_report(config_path(request), online=online)
        findings = [(f.level, svc.runtime.redact(f.message)) for f in report.findings]
        problems = report.count("problem")
    by_day, by_session = usage_tables(request)
    cluster, cluster_error = None, None
    if svc.cluster is not None:
        try:
            cluster = await asyncio.wait_for(svc.cluster(), CLUSTER_READ_SECONDS)
        except Exception as exc:  # an unreachable database is what the page must show
            cluster_error = svc.runtime.redact(f"{type(exc).__name__}: {exc}")
    return render(
        request,
        "health.html",
        title="Health",
        findings=findings,
        problems=problems,
        by_day=by_day,
        by_session=by_session,
        version=version(),
        started_at=svc.started_at,
        uptime=uptime(time.time() - svc.started_at),
        channels=channel_rows(request),
        mcp_servers=[
            replace(s, error=svc.runtime.redact(s.error))
            for s in (svc.mcp.snapshot() if svc.mcp is not None else [])
        ],
        log_file=svc.config.logging.file,
        cluster=cluster,
        cluster_rows=cluster_rows(cluster) if cluster is not None else [],
        cluster_error=cluster_error,
    )


@dataclass(frozen=True)
class ClusterRow:
    """One agent, bot or shard: its lease (if any) and what waits for it."""

    name: str
    worker: str = "-"
    generation: str = "-"
    expires: str = "-"
    inbound: int = 0
    outbound: int = 0


def cluster_rows(status: ClusterStatus) -> list[ClusterRow]:
    """Each lease with its backlog, then what has a backlog and no lease (a shard's messages
    wait under its bot's name)."""
    waiting = {row.name: row for row in status.backlog}
    rows = []
    for lease in status.leases:
        backlog = waiting.pop(lease.resource, None)
        rows.append(
            ClusterRow(
                lease.resource,
                lease.worker or "-",
                str(lease.generation),
                f"{lease.expires_in_seconds:.0f} s",
                backlog.inbound if backlog else 0,
                backlog.outbound if backlog else 0,
            )
        )
    rows += [ClusterRow(b.name, inbound=b.inbound, outbound=b.outbound) for b in waiting.values()]
    return rows


async def logs_json(request: web.Request) -> web.Response:
    """What the page's script polls: log lines after `offset` (none given: the end)."""
    svc = services(request)
    raw = request.query.get("offset", "")
    offset = int(raw) if raw.isdigit() else None
    path = log_file_path(svc.config.data_dir)
    tail = await asyncio.to_thread(read_tail, path, offset, svc.runtime.redact)
    return web.json_response({"lines": tail.lines, "offset": tail.offset})


def routes(_services: object) -> list[web.RouteDef]:
    return [
        web.get("/health", health_page),
        web.get("/health/doctor", health_page),
        web.get("/health/logs.json", logs_json),
    ]
