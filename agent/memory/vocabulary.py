"""Every content word the memory's chunks hold, as the confidence of a search counts them.

A search's confidence is the share of the question's content words (`coverage.terms`) the
best candidate holds; a hit's score is its relevance scaled by it. When no chunk holds any
of them (and the question names no date), the confidence is 0 for every candidate, whatever
the vector side finds, so no hit can reach a positive score floor: auto-recall's answer is
"nothing" before the index is read. `Vocabulary` counts, for each term, the chunks holding
it, kept in step with the index's chunks (MemoryIndex adds and removes their texts, and
reads all of them again when it reloads its state); its updates run in the index's worker
thread, where the reads that consult it run too.
"""

from __future__ import annotations

from collections.abc import Iterable

# Not `terms`: its cache (and that of the lines it is built from) would lose a search's hot
# entries to the memory's every chunk.
from clawgate.agent.memory.coverage import split_terms


class Vocabulary:
    """Chunks per content word; `ready` once it was filled from every chunk of the index."""

    def __init__(self) -> None:
        self._chunks: dict[str, int] = {}
        self.ready = False

    def reset(self, texts: Iterable[str]) -> None:
        self._chunks = {}
        self.add(texts)
        self.ready = True

    def forget(self) -> None:
        """Unknown until the next `reset`: no question is decided by it meanwhile."""
        self._chunks = {}
        self.ready = False

    def add(self, texts: Iterable[str]) -> None:
        chunks = self._chunks
        for text in texts:
            for term in split_terms(text):
                chunks[term] = chunks.get(term, 0) + 1

    def remove(self, texts: Iterable[str]) -> None:
        chunks = self._chunks
        for text in texts:
            for term in split_terms(text):
                left = chunks.get(term, 0) - 1
                if left > 0:
                    chunks[term] = left
                else:
                    chunks.pop(term, None)

    def holds_none(self, question_terms: frozenset[str]) -> bool:
        """True only when it is known that no chunk holds any of these terms."""
        return self.ready and not any(term in self._chunks for term in question_terms)
