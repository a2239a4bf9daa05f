"""Account for every message of every transcript: live, covered by a consolidation or
archive, or waiting in an archived transcript for its archive to land."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from clawgate.agent.session import Archived, Consolidation, load_session, read_key


@dataclass
class AuditReport:
    files: int = 0
    live: int = 0
    covered: int = 0
    pending_archive: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.live + self.covered + self.pending_archive

    @property
    def ok(self) -> bool:
        return not self.problems


def audit_sessions(sessions_dir: Path) -> AuditReport:
    """Check every transcript in sessions/ and sessions/archive/."""
    report = AuditReport()
    archive = sessions_dir / "archive"
    live_files = sorted(sessions_dir.glob("*.jsonl")) if sessions_dir.exists() else []
    archived_files = sorted(archive.glob("*.jsonl")) if archive.exists() else []
    for path, archived in [(p, False) for p in live_files] + [(p, True) for p in archived_files]:
        _audit_file(path, archived, sessions_dir.parent, report)
    return report


def _audit_file(path: Path, archived: bool, root: Path, report: AuditReport) -> None:
    session = load_session(path, read_key(path) or path.stem)
    report.files += 1
    name = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
    coverage: Counter[int] = Counter()
    for record in session.records_of(Consolidation):
        for seq in range(record.from_seq, record.to_seq + 1):
            coverage[seq] += 1
    landed = any(True for _ in session.records_of(Archived))
    seqs = [int(m["seq"]) for m in session.messages]
    present = set(seqs)
    for seq in seqs:
        if coverage[seq] > 1:
            report.problems.append(f"{name}: seq {seq} is covered by {coverage[seq]} ranges")
            report.covered += 1
        elif coverage[seq] == 1:
            report.covered += 1
        elif not archived and seq > session.last_consolidated:
            report.live += 1
        elif archived and not landed:
            report.pending_archive += 1
        else:
            report.problems.append(f"{name}: seq {seq} is in no covered range")
    expected = set(coverage)
    if seqs:
        expected |= set(range(session.first_seq, max(seqs) + 1))
    if expected:
        missing = sorted(expected - present)
        # A seq that a covered range or the live window accounts for must exist in the file.
        for seq in missing:
            report.problems.append(f"{name}: message seq {seq} is missing from the transcript")
