"""How much of a question a text covers: the question's content words (stemmed; CJK: single
characters), small talk aside, counted plainly or by weight (a word's idf: rare words count
more). Confidence, keyword evidence and the second hop (multihop.py) all count this way."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from functools import lru_cache
from itertools import chain

from clawgate.agent.memory.tokens import (
    CJK_STOP_CHARS,
    STOPWORDS,
    cjk_runs,
    normalise,
    stem,
    words,
)

# Words of small talk: a message made of them names nothing in memory.
CHITCHAT = frozenset(
    """hi hello hey hiya thanks thank thx ok okay yes yeah yep no nope sure good great nice
    cool fine morning evening night bye goodbye please lol haha hmm well really today
    tonight doing going up again""".split()
)
CHITCHAT_CJK = frozenset("好谢哈嗯早晚安啦哦嘿呀嘛")

# A chunk's lines (`str.splitlines`), each as the terms `terms` finds in it (interned:
# vocabulary.py keeps them for every chunk of the index).
Lines = tuple[tuple[str, ...], ...]


@lru_cache(maxsize=8192)
def terms(text: str) -> frozenset[str]:
    """Content words (stemmed) and CJK characters: what confidence counts as covered."""
    if "\n" in text:
        # No word or CJK run spans a line, so a text's terms are its lines' together. Built
        # from theirs (cached: Cover.entry and the reranker ask for each line's as well),
        # each line of a recall's candidates is split into words once, not twice.
        return frozenset().union(*map(terms, text.splitlines()))
    return split_terms(text)


def split_terms(text: str) -> frozenset[str]:
    """`terms`, worked out from the whole text at once."""
    norm = normalise(text)
    found = {stem(w) for w in words(norm) if w not in STOPWORDS and w not in CHITCHAT}
    for run in cjk_runs(norm):
        found.update(c for c in run if c not in CJK_STOP_CHARS and c not in CHITCHAT_CJK)
    return frozenset(found)


class Cover:
    """A question's words and their weights (idf: rare words count more), counted against
    many texts.

    A text's covered weight depends only on which of the question's words it holds, so the
    sum for each such set is worked out once a question, in the weights' order (the float
    that summing for each text would give), and a text costs a set intersection. A chunk
    whose lines' terms the index keeps (`Lines`) is counted from them, not split into words
    again."""

    def __init__(self, weights: dict[str, float]) -> None:
        self.weights = weights
        self.total = sum(weights.values())
        self.words = frozenset(weights)
        self._sums: dict[frozenset[str], float] = {}

    def weighted(self, text: str) -> float:
        """The share of the question's words (by weight) in a text."""
        return self.share_of(self.words & terms(text))

    def share_of(self, held: frozenset[str]) -> float:
        """The share (by weight) of these words of the question."""
        if self.total <= 0:
            return 0.0
        return self._covered(held) / self.total

    def entry(self, text: str, lines: Lines | None = None) -> float:
        """A chunk's weighted coverage, averaged with that of its best line: a day's log
        holds many separate entries, and one entry that holds the whole question beats words
        scattered over several."""
        if self.total <= 0:
            return 0.0
        if lines is None:
            whole = self.words & terms(text)
        else:
            # Sets made and dropped here, not kept for the search: a thousand of them alive
            # at once would have the garbage collector trace its oldest generation.
            held = [self.words.intersection(line) for line in lines]
            whole = frozenset().union(*held)  # no term spans a line (terms)
        share = self._covered(whole) / self.total
        if share <= 0:
            return share
        if lines is None:
            held = [self.words & terms(line) for line in text.splitlines()]
        if len(held) < 2:
            return share
        # Dividing by the same positive total keeps the order: the best line's share.
        return (share + max(map(self._covered, held)) / self.total) / 2

    def lines(
        self, text: str, lines: Lines | None = None
    ) -> list[tuple[Collection[str], frozenset[str]]]:
        """Each line's terms, with the question's words among them."""
        return [(held, self.words.intersection(held)) for held in line_terms(text, lines)]

    def _covered(self, held: frozenset[str]) -> float:
        """The weight of the question's words `held` (a subset of them)."""
        if not held:
            return 0  # most lines of a candidate hold no word of the question
        found = self._sums.get(held)
        if found is None:
            found = sum(w for term, w in self.weights.items() if term in held)
            self._sums[held] = found
        return found


def coverage(query_terms: frozenset[str], text: str, lines: Lines | None = None) -> float:
    """The share of the question's terms a text holds (`lines`: its kept lines' terms)."""
    if not query_terms:
        return 0.0
    held = terms(text) if lines is None else chain.from_iterable(lines)
    return len(query_terms.intersection(held)) / len(query_terms)


def chunk_terms(text: str, lines: Lines | None) -> frozenset[str]:
    """`terms(text)`, from the chunk's kept lines when given (no term spans a line)."""
    return terms(text) if lines is None else frozenset().union(*lines)


def line_terms(text: str, lines: Lines | None) -> Iterable[Collection[str]]:
    """Each line's `terms`, the kept ones when given."""
    return map(terms, text.splitlines()) if lines is None else lines
