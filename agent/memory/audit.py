"""Account for every message of every transcript, and pair every consolidation with its
HISTORY.md entry.

Messages: each is live, covered by exactly one consolidation range, or waiting in an archived
transcript for its archive to land. Memory (both directions, by the range markers of
entries.py): every `consolidation` record (a `/new` archive writes one too; "trimmed" ones of
scheduled runs have none) has exactly one HISTORY.md entry, no range has two entries or two
day's-log lines, no two entries of a key overlap, and an entry whose range has no record is
reported - unless its transcript is no longer kept (retention removed it). Entries written
before the markers are paired with the records of their key by count only.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

from clawgate.agent.memory.entries import Entry, Span, parse_entries, spans_in
from clawgate.agent.memory.provenance import read_all_notes
from clawgate.agent.session import Archived, Consolidation, Session, load_session, read_key

DAILY_LOG = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9].md"


@dataclass
class AuditReport:
    files: int = 0
    live: int = 0
    covered: int = 0
    pending_archive: int = 0
    records: int = 0  # consolidation records that need a HISTORY.md entry
    entries: int = 0  # HISTORY.md entries
    unmarked: int = 0  # entries without a range marker (older format, or written by hand)
    retired: int = 0  # entries whose transcript retention removed
    problems: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.live + self.covered + self.pending_archive

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class _Recorded:
    where: str  # the transcript, relative to the workspace
    span: Span


def audit_sessions(sessions_dir: Path) -> AuditReport:
    """Check every transcript in sessions/ and sessions/archive/, and memory/ beside them."""
    report = AuditReport()
    archive = sessions_dir / "archive"
    live_files = sorted(sessions_dir.glob("*.jsonl")) if sessions_dir.exists() else []
    archived_files = sorted(archive.glob("*.jsonl")) if archive.exists() else []
    recorded: list[_Recorded] = []
    first_kept: dict[str, int] = {}  # per key, the first seq of its oldest transcript
    for path, archived in [(p, False) for p in live_files] + [(p, True) for p in archived_files]:
        session = _audit_file(path, archived, sessions_dir.parent, report)
        first_kept[session.key] = min(
            first_kept.get(session.key, session.first_seq), session.first_seq
        )
        name = _name(path, sessions_dir.parent)
        for record in session.records_of(Consolidation):
            if record.mode != "trimmed":
                recorded.append(_Recorded(name, Span(session.key, record.from_seq, record.to_seq)))
    _audit_history(sessions_dir.parent / "memory", recorded, first_kept, report)
    return report


def _name(path: Path, root: Path) -> str:
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _audit_file(path: Path, archived: bool, root: Path, report: AuditReport) -> Session:
    session = load_session(path, read_key(path) or path.stem)
    report.files += 1
    name = _name(path, root)
    coverage: Counter[int] = Counter()
    for record in session.records_of(Consolidation):
        for seq in range(record.from_seq, record.to_seq + 1):
            coverage[seq] += 1
    landed = any(True for _ in session.records_of(Archived))
    seqs = [m.seq for m in session.messages]
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
    return session


def _audit_history(
    memory: Path, recorded: list[_Recorded], first_kept: dict[str, int], report: AuditReport
) -> None:
    history = memory / "HISTORY.md"
    text = history.read_text("utf-8", errors="replace") if history.exists() else ""
    # The owner's HISTORY.md and every chat's own notes (provenance.py): a non-owner
    # consolidation's entry lives in the latter. Line numbers below are of the owner's file.
    entries = parse_entries(text)
    for _where, notes in read_all_notes(memory):
        entries += parse_entries(notes)
    report.entries, report.records = len(entries), len(recorded)
    where = "memory/HISTORY.md"
    by_span: dict[Span, list[Entry]] = defaultdict(list)
    unmarked: Counter[str] = Counter()
    for entry in entries:
        if entry.span is None:
            unmarked[entry.key or ""] += 1
            report.unmarked += 1
        else:
            by_span[entry.span].append(entry)
    spans = {r.span for r in recorded}
    for item in recorded:
        found = by_span.get(item.span, [])
        if len(found) > 1:
            lines = ", ".join(str(e.line) for e in found)
            report.problems.append(
                f"{item.where}: consolidation {item.span} has {len(found)} HISTORY.md entries "
                f"(lines {lines})"
            )
        elif not found:
            if unmarked[item.span.key]:  # an entry from before the markers, paired by key
                unmarked[item.span.key] -= 1
            else:
                report.problems.append(
                    f"{item.where}: consolidation {item.span} has no HISTORY.md entry"
                )
    for span, found in by_span.items():
        if span in spans:
            continue
        if span.key not in first_kept or span.last < first_kept[span.key]:
            report.retired += len(found)
            continue
        for entry in found:
            report.problems.append(
                f"{where}:{entry.line}: entry {span} has no consolidation or archive record"
            )
        if len(found) > 1:
            lines = ", ".join(str(e.line) for e in found)
            report.problems.append(
                f"{where}: range {span} has {len(found)} entries (lines {lines})"
            )
    _overlaps(by_span, where, report)
    _daily_duplicates(memory, report)


def _overlaps(by_span: dict[Span, list[Entry]], where: str, report: AuditReport) -> None:
    """Two different ranges of one key that share a seq: the same messages summarised twice."""
    per_key: dict[str, list[tuple[Span, Entry]]] = defaultdict(list)
    for span, found in by_span.items():
        per_key[span.key].append((span, found[0]))
    for ranges in per_key.values():
        ranges.sort(key=lambda pair: (pair[0].first, pair[0].last))
        for (before, first), (after, second) in pairwise(ranges):
            if after.first <= before.last:
                report.problems.append(
                    f"{where}:{second.line}: entry {after} overlaps {before} (line {first.line})"
                )


def _daily_duplicates(memory: Path, report: AuditReport) -> None:
    if not memory.exists():
        return
    for path in sorted(memory.glob(DAILY_LOG)):
        counts = Counter(spans_in(path.read_text("utf-8", errors="replace")))
        for span, count in counts.items():
            if count > 1:
                report.problems.append(f"memory/{path.name}: range {span} has {count} lines")
