"""`clawgate backup verify FILE`: every member against the manifest's size and sha256, then a
trial restore in a temporary folder: the config loads, `memory audit` is clean for every
agent, and every transcript line parses."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from clawgate.agent.memory.audit import audit_sessions
from clawgate.gateway.moving.manifest import CONFIG_NAME, Manifest
from clawgate.gateway.moving.restore import unpack
from clawgate.kernel.config import ENV_PREFIX, load_config
from clawgate.kernel.errors import ConfigError, MoveRefused


@dataclass
class VerifyReport:
    manifest: Manifest | None = None
    transcripts: int = 0
    messages: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.manifest is not None and not self.problems


def verify_backup(archive: Path) -> VerifyReport:
    report = VerifyReport()
    with tempfile.TemporaryDirectory(prefix="clawgate-verify-") as tmp:
        home = Path(tmp) / "home"
        try:
            report.manifest, report.problems = unpack(archive, home, home)
        except MoveRefused as exc:
            report.problems.append(str(exc))
        if report.problems or report.manifest is None:
            return report
        # Only the file: the environment's overrides belong to this machine, not the backup.
        environ = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
        try:
            config = load_config(home / CONFIG_NAME, environ)
        except ConfigError as exc:
            report.problems.append(f"the config does not load: {exc}")
            return report
        for agent in report.manifest.agents:
            sessions = config.for_agent(agent.name).workspace / "sessions"
            audit = audit_sessions(sessions)
            report.transcripts += audit.files
            report.messages += audit.total
            report.problems += [f"{agent.name}: audit: {p}" for p in audit.problems]
            report.problems += [f"{agent.name}: {p}" for p in _unparsed(sessions, home)]
    return report


def _unparsed(sessions: Path, home: Path) -> list[str]:
    """Transcript lines that are not JSON objects (a backup cuts every file at a whole line)."""
    problems = []
    for path in sorted(sessions.rglob("*.jsonl")) if sessions.is_dir() else []:
        for number, line in enumerate(path.read_bytes().splitlines(), 1):
            try:
                ok = isinstance(json.loads(line), dict)
            except ValueError:
                ok = False
            if not ok:
                problems.append(f"{path.relative_to(home)} line {number} does not parse")
    return problems
