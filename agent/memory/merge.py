"""Three-way line merge: a model's rewrite of MEMORY.md applied to a file that moved on.

A consolidation shows the model MEMORY.md as it was (the base), waits seconds for the
answer, and gets back a whole new file (ours). Meanwhile the owner's turn, another chat's
consolidation or another process may have changed the file (theirs). Replacing it with ours
would lose their change, so the two are merged line by line against the base:

- a line added on either side since the base is kept (a line both sides added, once);
- a base line is kept only if both sides kept it: removed (or reworded) on one side and
  left on the other, it is removed;
- a line one side rewords while the other removes it: the new wording is an added line,
  so it stays. Nothing written after the snapshot is ever dropped.

Added lines stay where their side put them, relative to the base lines around them; where
both sides add at the same place, ours come first.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from difflib import SequenceMatcher

_LIST_MARKER = re.compile(r"^(?:[-*+]|\d+[.)])\s+")


@dataclass(frozen=True)
class MemoryRewrite:
    """A whole new MEMORY.md from the model, and the MEMORY.md it was shown (its base)."""

    base: str
    text: str


@dataclass
class _Side:
    """One side's changes to the base: which base lines it kept, what it added before each."""

    kept: list[bool]
    added: dict[int, list[str]] = field(default_factory=dict)


def _changes(base: list[str], side: list[str]) -> _Side:
    result = _Side(kept=[True] * len(base))
    matcher = SequenceMatcher(None, base, side, autojunk=False)
    for op, b1, b2, s1, s2 in matcher.get_opcodes():
        if op in ("delete", "replace"):
            result.kept[b1:b2] = [False] * (b2 - b1)
        if op in ("insert", "replace"):
            result.added.setdefault(b1, []).extend(side[s1:s2])
    return result


def _fact(line: str) -> str:
    """A line as a fact: list marker, spacing and letter case ignored."""
    return " ".join(_LIST_MARKER.sub("", line.strip()).split()).casefold()


def merge_lines(base: str, ours: str, theirs: str) -> str:
    """Merge `ours` and `theirs`, both edited from `base`, keeping every line either added."""
    if ours == base or ours == theirs:
        return theirs
    if theirs == base:
        return ours
    base_lines = base.splitlines()
    mine, other = _changes(base_lines, ours.splitlines()), _changes(base_lines, theirs.splitlines())
    # A fact both sides added (the consolidation and the owner's edit saw the same message)
    # is written once, where ours put it.
    ours_added = Counter(_fact(line) for lines in mine.added.values() for line in lines)
    merged: list[str] = []
    for gap in range(len(base_lines) + 1):
        merged.extend(mine.added.get(gap, ()))
        for line in other.added.get(gap, ()):
            fact = _fact(line)
            if fact and ours_added[fact] > 0:
                ours_added[fact] -= 1
                continue
            merged.append(line)
        if gap < len(base_lines) and mine.kept[gap] and other.kept[gap]:
            merged.append(base_lines[gap])
    return "\n".join(merged) + "\n" if merged else ""
