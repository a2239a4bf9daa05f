"""HISTORY.md entries and their range markers: what makes a consolidation one unit of work.

Every entry a consolidation or a `/new` archive writes ends with a marker naming the session
key and the seq range it covers, and its copy in the day's log ends with the same marker:

    [2026-12-03 09:30] (telegram:123) Ann planned the Lisbon trip. <!-- telegram:123 #41-80 -->
    - 09:30 (telegram:123) Ann planned the Lisbon trip. <!-- telegram:123 #41-80 -->

An HTML comment: Markdown viewers hide it, a person editing the words before it keeps it, and
`grep -rn 'telegram:123 #41-80' memory/` finds both copies. Whitespace, `%`, `<` and `>` in a
key are written as %XX, so a marker is always one `<!-- KEY #FIRST-LAST -->` token.

The unit, in order (a crash may stop it between any two steps):

1. MEMORY.md is rewritten (owner transcripts): before the entry, so an entry on disk means
   the memory side of its range is done.
2. The HISTORY.md entry is appended unless that exact marker is already in the file, then the
   day's log line likewise (the day of the entry's stamp); both are fsynced.
3. The session's `consolidation` record (range and new `last_consolidated`), fsynced. A `/new`
   archive then writes its dated note and its `archived` record.

A retry finds an entry for the session's first unconsolidated seq that has no record
(`unrecorded`): it writes whatever copy is missing and the record, without asking the model
again (`AgentRuntime.start` does the same for live sessions). So no range is ever written
twice, and `clawgate memory audit` can pair every record with exactly one entry.

Limits: the archive's dated note is written at most once (a kill between the record and the
note leaves none; HISTORY.md holds the same words). A range names messages only while seqs
are unique per key, which they are across `/new`; a transcript deleted by hand and begun again
at seq 1 could meet an old entry of its key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal
from urllib.parse import unquote

from clawgate.agent.session import Session
from clawgate.agent.text import without_surrogates
from clawgate.kernel.storage import DiskWriter

MARKER = re.compile(r"<!-- (\S+) #(\d+)-(\d+) -->")
ENTRY_START = re.compile(r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}\]", re.M)
_HEADER = re.compile(r"\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2})\](?: \(([^)\s]*)\))?[ \t]?")
_UNSAFE = re.compile(r"[\s%<>]")
RAW_PREFIX = "Raw archive of messages"
STAMP_FORMAT = "%Y-%m-%d %H:%M"


@dataclass(frozen=True)
class Span:
    """Messages `first`..`last` of the session `key` (seqs are unique per key across /new)."""

    key: str
    first: int
    last: int

    @property
    def opening(self) -> str:
        """The marker up to its last seq: what every range starting at `first` begins with."""
        key = _UNSAFE.sub(lambda m: "".join(f"%{b:02X}" for b in m[0].encode()), self.key)
        return f"<!-- {key} #{self.first}-"

    @property
    def marker(self) -> str:
        return f"{self.opening}{self.last} -->"

    def __str__(self) -> str:
        return f"{self.key} #{self.first}-{self.last}"


@dataclass(frozen=True)
class Entry:
    """One HISTORY.md entry as it stands in the file (a person may have edited it)."""

    line: int  # 1-based line of its stamp
    stamp: str  # "YYYY-MM-DD HH:MM", in agent.timezone
    key: str | None  # the "(key)" after the stamp
    text: str  # the words, without stamp, key and marker
    span: Span | None  # None for an entry written before markers, or one a person wrote

    @property
    def mode(self) -> Literal["llm", "raw"]:
        return "raw" if self.text.startswith(RAW_PREFIX) else "llm"


def _span(match: re.Match[str]) -> Span:
    return Span(unquote(match[1], errors="replace"), int(match[2]), int(match[3]))


def split_entries(history: str) -> list[str]:
    """HISTORY.md entries: each starts with a "[YYYY-MM-DD HH:MM]" line; text before the
    first stamp (a heading a person added) is not an entry."""
    return [history[a:b].strip() for a, b in _bounds(history)]


def _bounds(history: str) -> list[tuple[int, int]]:
    starts = [m.start() for m in ENTRY_START.finditer(history)]
    return list(zip(starts, [*starts[1:], len(history)], strict=False))


def parse_entries(history: str) -> list[Entry]:
    """Every entry with its stamp, key, words and range (the last marker in it)."""
    entries = []
    bounds = _bounds(history)
    line = 1 + history.count("\n", 0, bounds[0][0]) if bounds else 1
    for a, b in bounds:
        raw = history[a:b]
        header = _HEADER.match(raw)
        assert header is not None  # ENTRY_START matched this very text
        markers = list(MARKER.finditer(raw))
        entries.append(
            Entry(
                line=line,
                stamp=header[1],
                key=header[2],
                text=MARKER.sub("", raw[header.end() :]).strip(),
                span=_span(markers[-1]) if markers else None,
            )
        )
        line += raw.count("\n")
    return entries


def spans_in(text: str) -> list[Span]:
    """Every range marker in a text (a daily log)."""
    return [_span(m) for m in MARKER.finditer(text)]


def _words(text: str) -> str:
    # The model's words must not smuggle in a marker of their own.
    return without_surrogates(text.strip()).replace("<!--", "<! --")


def history_entry(text: str, key: str, when: datetime, span: Span | None = None) -> str:
    tail = f" {span.marker}" if span else ""
    return without_surrogates(f"[{when.strftime(STAMP_FORMAT)}] ({key}) {_words(text)}{tail}\n\n")


def daily_line(text: str, key: str, when: datetime, span: Span | None = None) -> str:
    tail = f" {span.marker}" if span else ""
    return without_surrogates(f"- {when.strftime('%H:%M')} ({key}) {_words(text)}{tail}\n")


def _holds(path: Path, span: Span) -> bool:
    try:
        return span.marker.encode("utf-8") in path.read_bytes()
    except FileNotFoundError:
        return False


def write_entry(
    writer: DiskWriter,
    history: Path,
    daily: Path,
    text: str,
    key: str,
    when: datetime,
    span: Span | None = None,
) -> bool:
    """Append the HISTORY.md entry and its day's-log line, each only if its exact range is not
    there yet, and fsync both: they are durable before the record that says they happened.
    The caller holds the memory lock. True if the HISTORY.md entry was written now."""
    wrote = False
    if span is None or not _holds(history, span):
        writer.append(history, history_entry(text, key, when, span), mode=0o600)
        wrote = True
    if span is None or not _holds(daily, span):
        writer.append(daily, daily_line(text, key, when, span), mode=0o600)
    writer.fsync(history)
    writer.fsync(daily)
    return wrote


def unrecorded(history: str, session: Session) -> list[Entry]:
    """The entries a crash left without their record, in the order to record them: each
    starts at the session's next unconsolidated seq and ends at one of its messages."""
    seqs = [m.seq for m in session.unconsolidated()]
    # Most calls find nothing: look for the one marker prefix before parsing the file.
    if not seqs or Span(session.key, seqs[0], seqs[0]).opening not in history:
        return []
    by_first = {
        e.span.first: e
        for e in parse_entries(history)
        if e.span is not None and e.span.key == session.key
    }
    present = set(seqs)
    found: list[Entry] = []
    following: int | None = seqs[0]
    while following is not None and (entry := by_first.get(following)) is not None:
        assert entry.span is not None
        if entry.span.last not in present or entry.span.last < entry.span.first:
            break
        found.append(entry)
        following = next((s for s in seqs if s > entry.span.last), None)
    return found
