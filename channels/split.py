"""Split a long Markdown reply into platform-sized parts, at the most natural boundary.

Paragraphs first, then lines, then words, then characters. A fenced code block is never
cut without closing it; the next part reopens it with the same fence and language, so
every part renders on its own. `length` measures a whole candidate part, which lets a
platform count what it really sends (Telegram: UTF-16 units of the rendered HTML).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

Length = Callable[[str], int]

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


@dataclass(frozen=True)
class _Atom:
    """A piece that fits on its own, and what joins it to the piece before it."""

    text: str
    sep: str


def split_message(text: str, limit: int, *, length: Length = len) -> list[str]:
    """Parts of `text`, each with `length(part) <= limit`, in order; [] for blank text."""
    if limit < 1:
        raise ValueError("limit must be positive")
    if not text.strip():
        return []
    if length(text) <= limit:
        return [text]
    atoms: list[_Atom] = []
    for sep, block, fence in _blocks(text):
        pieces = _fit_block(block, fence, limit, length)
        atoms.extend(_Atom(piece, sep if i == 0 else "\n") for i, piece in enumerate(pieces))
    return [part for part in _pack(atoms, limit, length) if part.strip()]


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0])


def _blocks(text: str) -> list[tuple[str, str, str | None]]:
    """(separator before, block text, opening fence line or None) for paragraphs and code.

    The separator keeps the blank lines the text had, so joining the blocks back gives the
    original text (less whitespace on blank lines).
    """
    lines = text.split("\n")
    blocks: list[tuple[str, str, str | None]] = []
    current: list[str] = []
    blanks = 0

    def emit(block: str, fence: str | None) -> None:
        nonlocal blanks
        blocks.append(("\n" * (blanks + 1) if blocks else "", block, fence))
        blanks = 0

    i = 0
    while i < len(lines):
        line = lines[i]
        match = _FENCE.match(line)
        if match:
            if current:
                emit("\n".join(current), None)
                current = []
            body = [line]
            i += 1
            while i < len(lines):
                body.append(lines[i])
                i += 1
                if _closes(body[-1], match.group(1)):
                    break
            emit("\n".join(body), line)
            continue
        if line.strip():
            current.append(line)
        elif current:
            emit("\n".join(current), None)
            current = []
            blanks = 1
        elif blocks:
            blanks += 1
        i += 1
    if current:
        emit("\n".join(current), None)
    return blocks


def _fit_block(block: str, fence: str | None, limit: int, length: Length) -> list[str]:
    if length(block) <= limit:
        return [block]
    if fence is None:
        return _fit_lines(block.split("\n"), limit, length)
    return _fit_code(block, fence, limit, length)


def _fit_lines(lines: list[str], limit: int, length: Length) -> list[str]:
    pieces: list[str] = []
    for line in lines:
        if length(line) <= limit:
            pieces.append(line)
        else:
            # Words longer than a part are cut by characters in _pack.
            pieces.extend(_pack([_Atom(w, " ") for w in line.split(" ") if w], limit, length))
    return pieces


def _fit_code(block: str, fence: str, limit: int, length: Length) -> list[str]:
    lines = block.split("\n")
    marker = _FENCE.match(fence)
    assert marker is not None
    closing = marker.group(1)
    has_close = len(lines) > 1 and _closes(lines[-1], closing)
    body = lines[1:-1] if has_close else lines[1:]
    pieces: list[str] = []
    chunk: list[str] = []

    def wrapped(rows: list[str], close: bool = True) -> str:
        return "\n".join([fence, *rows, *([closing] if close else [])])

    for line in body:
        if length(wrapped([*chunk, line])) <= limit:
            chunk.append(line)
            continue
        if chunk:
            pieces.append(wrapped(chunk))
            chunk = []
        if length(wrapped([line])) <= limit:
            chunk = [line]
            continue
        # One code line longer than a part: cut it, each cut still inside its own fence.
        rest = line
        while rest:
            cut = _longest_prefix(rest, lambda p: length(wrapped([p])) <= limit)
            pieces.append(wrapped([rest[:cut]]))
            rest = rest[cut:]
    if chunk or not pieces:
        # An unclosed last fence stays unclosed, as the model wrote it.
        pieces.append(wrapped(chunk, close=has_close))
    return pieces


def _longest_prefix(text: str, fits: Callable[[str], bool]) -> int:
    """Length of the longest prefix of `text` that fits (at least 1, to make progress)."""
    low, high = 1, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if fits(text[:mid]):
            low = mid
        else:
            high = mid - 1
    return low


def _join(atoms: list[_Atom]) -> str:
    return atoms[0].text + "".join(a.sep + a.text for a in atoms[1:])


def _pack(atoms: list[_Atom], limit: int, length: Length) -> list[str]:
    """Greedy: as many consecutive atoms per part as fit. Galloping then bisecting keeps the
    number of `length` calls logarithmic per part, which matters when `length` renders."""
    parts: list[str] = []
    start = 0
    while start < len(atoms):
        if length(atoms[start].text) > limit:
            text = atoms[start].text
            while text:
                cut = _longest_prefix(text, lambda p: length(p) <= limit)
                parts.append(text[:cut])
                text = text[cut:]
            start += 1
            continue

        def fits(count: int, first: int = start) -> bool:
            return length(_join(atoms[first : first + count])) <= limit

        good, step = 1, 1
        while start + good + step <= len(atoms) and fits(good + step):
            good += step
            step *= 2
        bad = min(good + step, len(atoms) - start + 1)
        while bad - good > 1:
            mid = (good + bad) // 2
            if fits(mid):
                good = mid
            else:
                bad = mid
        parts.append(_join(atoms[start : start + good]))
        start += good
    return parts
