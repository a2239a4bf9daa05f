"""Cut the memory files into search chunks that follow their structure.

- HISTORY.md: one chunk per entry (an entry starts with a "[YYYY-MM-DD HH:MM]" line), dated
  by its stamp; text before the first stamp is chunked as plain Markdown.
- Daily logs and notes (memory/YYYY-MM-DD*.md): Markdown chunks dated by the file name.
- MEMORY.md: curated facts, one chunk each (a top-level list item with what is indented
  under it, or a paragraph), with no date (it never decays). A fact in a chunk of its own
  competes on its own words: inside one long chunk of every fact, a question's exact match
  would weigh as little as the chunk's other hundred facts make it.
- Other files: Markdown chunks with no date.

Markdown chunks never cross a heading, and no chunk is only headings (a heading stays with
the text under it, even past the size limit); inside a section lines gather (breaking at blank
lines and list items) up to ~400 tokens, and a section too long for one chunk continues in
the next with ~80 tokens of overlap. Line numbers are 1-based and inclusive.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date

from clawgate.agent.memory.tokens import estimate_tokens

# Bumped whenever the same text would be cut differently: the index then cuts every file
# again (index_db.py).
CHUNKER_VERSION = "2"
MAX_TOKENS = 400
OVERLAP_TOKENS = 80
HISTORY_NAME = "HISTORY.md"
FACTS_NAME = "MEMORY.md"

_HEADING = re.compile(r"^#{1,6}\s")
_LIST_ITEM = re.compile(r"^\s{0,3}(?:[-*+]|\d{1,3}[.)])\s")
_TOP_ITEM = re.compile(r"^(?:[-*+]|\d{1,3}[.)])\s")
_STAMP = re.compile(r"^\[(\d{4}-\d{2}-\d{2}) \d{2}:\d{2}\]")
_FILE_DATE = re.compile(r"^(\d{4}-\d{2}-\d{2})")


@dataclass(frozen=True)
class Chunk:
    path: str  # relative to the workspace, e.g. "memory/2026-11-02.md"
    start_line: int
    end_line: int
    date: str | None  # ISO date, or None for undated text (MEMORY.md)
    text: str
    hash: str  # of the text: the embedding cache key


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def file_date(name: str) -> str | None:
    match = _FILE_DATE.match(name)
    if not match:
        return None
    try:
        return date.fromisoformat(match.group(1)).isoformat()
    except ValueError:
        return None


def chunk_file(
    path: str, text: str, *, max_tokens: int = MAX_TOKENS, overlap: int = OVERLAP_TOKENS
) -> list[Chunk]:
    """All chunks of one memory file; `path` is workspace-relative with '/' separators."""
    lines = text.splitlines()
    name = path.rsplit("/", 1)[-1]
    spans: list[tuple[int, int, str | None]] = []  # 0-based [start, end) and date
    if name == HISTORY_NAME:
        spans = _history_spans(lines, max_tokens, overlap)
    else:
        day = file_date(name)
        facts = name == FACTS_NAME
        spans = [
            (a, b, day)
            for a, b in _markdown_spans(lines, 0, len(lines), max_tokens, overlap, facts=facts)
        ]
    chunks = []
    for start, end, day in spans:
        # Ranges hold text only: no leading or trailing blank lines.
        while start < end and not lines[start].strip():
            start += 1
        while end > start and not lines[end - 1].strip():
            end -= 1
        if start == end or _headings_only(lines, range(start, end)):
            continue  # a heading alone finds nothing; what follows it carries it
        body = "\n".join(lines[start:end])
        chunks.append(Chunk(path, start + 1, end, day, body, content_hash(body)))
    return chunks


def _history_spans(
    lines: list[str], max_tokens: int, overlap: int
) -> list[tuple[int, int, str | None]]:
    starts = [i for i, line in enumerate(lines) if _STAMP.match(line)]
    spans: list[tuple[int, int, str | None]] = []
    first = starts[0] if starts else len(lines)
    spans += [(a, b, None) for a, b in _markdown_spans(lines, 0, first, max_tokens, overlap)]
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else len(lines)
        stamp = _STAMP.match(lines[start])
        assert stamp is not None
        day = stamp.group(1)
        try:
            day = date.fromisoformat(day).isoformat()
        except ValueError:
            day = None
        for a, b in _window(lines, list(range(start, end)), max_tokens, overlap):
            spans.append((a, b, day))
    return spans


def _markdown_spans(
    lines: list[str], start: int, end: int, max_tokens: int, overlap: int, *, facts: bool = False
) -> list[tuple[int, int]]:
    """Sections (a heading and what follows it), each cut into windows (with `facts`: into
    its facts first)."""
    sections: list[list[int]] = []
    current: list[int] = []
    for i in range(start, end):
        if _HEADING.match(lines[i]) and any(lines[j].strip() for j in current):
            # A heading with nothing under it yet stays with what follows.
            if any(lines[j].strip() and not _HEADING.match(lines[j]) for j in current):
                sections.append(current)
                current = []
        current.append(i)
    if current:
        sections.append(current)
    spans: list[tuple[int, int]] = []
    for section in sections:
        for unit in _facts(lines, section) if facts else [section]:
            spans.extend(_window(lines, unit, max_tokens, overlap))
    return spans


def _facts(lines: list[str], indexes: list[int]) -> list[list[int]]:
    """A section's facts: a top-level list item and the lines under it, or a paragraph.
    Headings (and blank lines) before the first fact stay with it."""
    facts: list[list[int]] = []
    current: list[int] = []
    for i in indexes:
        line = lines[i]
        has_text = not _headings_only(lines, current)
        if has_text and (not line.strip() or _TOP_ITEM.match(line)):
            facts.append(current)
            current = []
        if line.strip() or current:
            current.append(i)
    if current:
        facts.append(current)
    return facts


def _headings_only(lines: list[str], indexes: Iterable[int]) -> bool:
    return all(not lines[i].strip() or _HEADING.match(lines[i]) for i in indexes)


def _blocks(lines: list[str], indexes: list[int]) -> list[list[int]]:
    """Break points: a blank line ends a block, a list item starts one."""
    blocks: list[list[int]] = []
    current: list[int] = []
    for i in indexes:
        line = lines[i]
        if not line.strip():
            current.append(i)
            blocks.append(current)
            current = []
            continue
        if _LIST_ITEM.match(line) and any(lines[j].strip() for j in current):
            blocks.append(current)
            current = []
        current.append(i)
    if current:
        blocks.append(current)
    return [b for b in blocks if b]


def _window(
    lines: list[str], indexes: list[int], max_tokens: int, overlap: int
) -> list[tuple[int, int]]:
    """Contiguous line ranges of about max_tokens, consecutive ones overlapping by ~overlap."""
    if not indexes:
        return []
    cost = {i: estimate_tokens(lines[i]) + 1 for i in indexes}
    if sum(cost.values()) <= max_tokens:
        return [(indexes[0], indexes[-1] + 1)]
    units: list[list[int]] = []  # blocks, with oversized blocks cut to single lines
    for block in _blocks(lines, indexes):
        if sum(cost[i] for i in block) > max_tokens:
            units.extend([i] for i in block)
        else:
            units.append(block)
    spans: list[tuple[int, int]] = []
    chunk: list[int] = []
    size = 0
    for unit in units:
        unit_size = sum(cost[i] for i in unit)
        if chunk and size + unit_size > max_tokens and not _headings_only(lines, chunk):
            spans.append((chunk[0], chunk[-1] + 1))
            # Carry whole trailing lines, up to the overlap, into the next chunk.
            carried: list[int] = []
            carried_size = 0
            for i in reversed(chunk):
                if carried_size + cost[i] > overlap or (not lines[i].strip() and not carried):
                    break
                carried.insert(0, i)
                carried_size += cost[i]
            if carried_size + unit_size > max_tokens:
                carried, carried_size = [], 0  # no room: the overlap would only bloat it
            chunk, size = carried, carried_size
        chunk.extend(unit)
        size += unit_size
    if chunk and (not spans or chunk[-1] + 1 > spans[-1][1]):
        spans.append((chunk[0], chunk[-1] + 1))
    return spans
