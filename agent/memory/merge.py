"""Three-way line merge: a model's rewrite of MEMORY.md applied to a file that moved on.

A consolidation shows the model MEMORY.md as it was (the base), waits seconds for the
answer, and gets back a whole new file (ours). Meanwhile the owner's turn, another chat's
consolidation or another process may have changed the file (theirs). Replacing it with ours
would lose their change, so the two are merged line by line against the base:

- a line added on either side since the base is kept (a line both sides added, once),
  but for the model's rewordings of lines the file's side removed (below);
- a base line is kept only if both sides kept it: removed (or reworded) on one side and
  left on the other, it is removed;
- a line the file's side (theirs: the owner's edit, a file tool, another writer) added is
  never dropped: nothing written after the snapshot is lost;
- a line the model (ours) added that rewords a base line theirs removed or corrected is
  dropped: the later edit wins. Without this a deleted fact ("Passport: X123") came back as
  the model's rewording ("Passport number: X123"), and the owner's correction ("lives in
  Munich") sat beside the model's rewording of the old fact ("lives in Berlin, Germany").
  A rewording is an added line whose closest base line among those ours dropped is similar
  (`_reworded`: most of its characters in common, or a shared number-like token such as a
  passport or phone number). So an added line much like a fact the owner deleted is dropped
  too; the conversation it came from is still in HISTORY.md.

Added lines stay where their side put them, relative to the base lines around them; where
both sides add at the same place, ours come first.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from difflib import SequenceMatcher

_LIST_MARKER = re.compile(r"^(?:[-*+]|\d+[.)])\s+")
# A token with a digit and at least four characters: an id, a number, a date. Two lines that
# share one speak of the same thing, however differently they are worded.
_NUMBERISH = re.compile(r"(?=\w*\d)\w{4,}")
REWORDING_RATIO = 0.6


@dataclass(frozen=True)
class MemoryRewrite:
    """A whole new MEMORY.md from the model, and the MEMORY.md it was shown (its base)."""

    base: str
    text: str
    source: str = ""  # what made it (a session key), recorded with the lines it removes


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


def fact_of(line: str) -> str:
    """A line as a fact: list marker, spacing and letter case ignored."""
    return " ".join(_LIST_MARKER.sub("", line.strip()).split()).casefold()


def _similarity(a: str, b: str) -> float:
    if set(_NUMBERISH.findall(a)) & set(_NUMBERISH.findall(b)):
        return 1.0
    return SequenceMatcher(None, a, b, autojunk=False).ratio()


def _reworded(line: str, candidates: list[str]) -> int | None:
    """The index of the candidate that `line` rewords (the most similar, if similar
    enough), or None: `line` is a fact of its own."""
    fact = fact_of(line)
    if not fact:
        return None
    scored = [(_similarity(fact, fact_of(c)), i) for i, c in enumerate(candidates) if fact_of(c)]
    if not scored:
        return None
    score, index = max(scored)
    return index if score >= REWORDING_RATIO else None


def _drop_rewordings(base: list[str], mine: _Side, other: _Side) -> None:
    """Drop the lines ours added that reword a base line theirs removed or changed."""
    dropped = [i for i, kept in enumerate(mine.kept) if not kept]
    candidates = [base[i] for i in dropped]
    for gap, lines in mine.added.items():
        kept = []
        for line in lines:
            match = _reworded(line, candidates)
            if match is None or other.kept[dropped[match]]:
                kept.append(line)
        mine.added[gap] = kept


def merge_lines(base: str, ours: str, theirs: str) -> str:
    """Merge `ours` (the model's rewrite) and `theirs` (what the file became), both edited
    from `base`: every line theirs added stays; ours' rewordings of lines theirs removed go."""
    if ours == base or ours == theirs:
        return theirs
    if theirs == base:
        return ours
    base_lines = base.splitlines()
    mine, other = _changes(base_lines, ours.splitlines()), _changes(base_lines, theirs.splitlines())
    _drop_rewordings(base_lines, mine, other)
    # A fact both sides added (the consolidation and the owner's edit saw the same message)
    # is written once, where ours put it.
    ours_added = Counter(fact_of(line) for lines in mine.added.values() for line in lines)
    merged: list[str] = []
    for gap in range(len(base_lines) + 1):
        merged.extend(mine.added.get(gap, ()))
        for line in other.added.get(gap, ()):
            fact = fact_of(line)
            if fact and ours_added[fact] > 0:
                ours_added[fact] -= 1
                continue
            merged.append(line)
        if gap < len(base_lines) and mine.kept[gap] and other.kept[gap]:
            merged.append(base_lines[gap])
    return "\n".join(merged) + "\n" if merged else ""
