"""Every content word the memory's chunks hold, as the confidence of a search counts them,
and the terms of each chunk's lines.

A search's confidence is the share of the question's content words (`coverage.terms`) the
best candidate holds; a hit's score is its relevance scaled by it. When no chunk holds any
of them (and the question names no date), the confidence is 0 for every candidate, whatever
the vector side finds, so no hit can reach a positive score floor: auto-recall's answer is
"nothing" before the index is read. `Vocabulary` counts, for each term, the chunks holding
it, kept in step with the index's chunks (MemoryIndex adds and removes their texts, and
reads all of them again when it reloads its state); its updates run in the index's worker
thread, where the reads that consult it run too.

It also keeps each chunk's lines as their terms (`coverage.Lines`): what a search counts of
its ~100 candidates (coverage.Cover, the reranker) is then split into words once, when the
chunk is indexed, not at each search that brings it back. The terms are interned, so a
chunk costs a tuple of pointers a line, ~8 bytes a word (4.5 MB at 10,000 of the benches'
one-line chunks, where the same as sets would take ~30 MB; 14 MB at 10,000 day-log chunks
of 1.3 KB, about the size of their text).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

# Not `terms`: its cache (and that of the lines it is built from) would lose a search's hot
# entries to the memory's every chunk.
from clawgate.agent.memory.coverage import Lines, split_terms
from clawgate.agent.memory.index_db import ChunkRow


class Vocabulary:
    """Chunks per content word, and each chunk's `Lines`; `ready` once it was filled from
    every chunk of the index."""

    def __init__(self) -> None:
        self._chunks: dict[str, int] = {}
        self._lines: dict[int, Lines] = {}
        self.ready = False

    def reset(self, chunks: Iterable[tuple[int, str]]) -> None:
        self.__init__()  # type: ignore[misc]
        self.add(chunks)
        self.ready = True

    def forget(self) -> None:
        """Unknown until the next `reset`: no question is decided by it meanwhile."""
        self.__init__()  # type: ignore[misc]

    def add(self, chunks: Iterable[tuple[int, str]]) -> None:
        """(chunk id, text) of chunks the index just took in."""
        counts = self._chunks
        for chunk_id, text in chunks:
            lines = _split(text)
            if lines is None:
                held: Iterable[str] = split_terms(text)
            else:
                held = set().union(*lines)
                self._lines[chunk_id] = lines
            for term in held:
                counts[term] = counts.get(term, 0) + 1

    def remove(self, chunks: Iterable[tuple[int, str]]) -> None:
        """(chunk id, text) of chunks the index just dropped."""
        counts = self._chunks
        for chunk_id, text in chunks:
            lines = self._lines.pop(chunk_id, None)
            held = split_terms(text) if lines is None else set().union(*lines)
            for term in held:
                left = counts.get(term, 0) - 1
                if left > 0:
                    counts[term] = left
                else:
                    counts.pop(term, None)

    def holds_none(self, question_terms: frozenset[str]) -> bool:
        """True only when it is known that no chunk holds any of these terms."""
        return self.ready and not any(term in self._chunks for term in question_terms)

    def lines(self, chunk_ids: Iterable[int]) -> dict[int, Lines]:
        """The lines of those chunks it keeps."""
        kept = self._lines
        return {c: kept[c] for c in chunk_ids if c in kept}

    def with_lines(self, rows: dict[int, ChunkRow]) -> dict[int, ChunkRow]:
        """The rows, each with its kept lines. Asked in the index's thread, where chunks are
        added and removed, in the read that returned the rows: the lines are those of these
        texts."""
        kept = self._lines
        return {c: r._replace(lines=kept.get(c)) for c, r in rows.items()}


def _split(text: str) -> Lines | None:
    if "\n" not in text and len(text.splitlines()) > 1:
        # `terms` splits such a text whole, not by line (a line break other than \n): no
        # lines kept, a search splits it itself.
        return None
    return tuple(tuple(map(sys.intern, split_terms(line))) for line in text.splitlines())
